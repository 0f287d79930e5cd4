//! `kinformer-sim`: serve a simulated Kubernetes API server on a loopback port.
//!
//! Fills `--objects` template objects, then prints exactly one line `LISTENING http://ADDR` to
//! stdout and serves until SIGTERM or ctrl-c (or, with `--exit-with-parent`,
//! until the process that started it is gone).

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use kinformer_sim::{FaultSchedule, Sim};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A simulated Kubernetes API server for scale and fault tests.
#[derive(Debug, Parser)]
#[command(name = "kinformer-sim", version)]
struct Args {
    /// Address to listen on (loopback; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Objects to create before serving.
    #[arg(long, default_value_t = 0)]
    objects: usize,
    /// Resource to fill (plural or kind).
    #[arg(long, default_value = "pods")]
    kind: String,
    /// Namespaces to spread the objects over.
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    /// Named fault schedule: none, flaky-watch, expire, restarts, slow, throttle, chaos.
    #[arg(long, default_value = "none")]
    faults: String,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 60.0)]
    bookmark_interval: f64,
    /// Events retained per resource for watch resumption.
    #[arg(long, default_value_t = 100_000)]
    history: usize,
    /// How watch events are cut into HTTP chunks: `apiserver` (an event of
    /// 2 KiB or more a chunk of its own, as kube-apiserver writes them) or
    /// `batched` (the events queued together in one chunk).
    #[arg(long, default_value = "apiserver")]
    watch_chunks: kinformer_sim::WatchChunks,
    /// Do not stamp the commit-time annotation on writes.
    #[arg(long)]
    no_commit_stamp: bool,
    /// Transcode each object's metadata to protobuf when it is committed
    /// (for load tests of protobuf clients: their LISTs and WatchList
    /// streams then cost the simulator a copy, as JSON ones do).
    #[arg(long)]
    protobuf_on_commit: bool,
    /// Exit when the process that started this one goes away (a load test
    /// killed without its clean-up must not leave the simulator running).
    #[arg(long)]
    exit_with_parent: bool,
    /// Ignore `shardSelector`, as a server without the
    /// `ShardedListAndWatch` gate does.
    #[arg(long)]
    ignore_shard_selector: bool,
}

/// Exits this process once its parent is gone (it is then reparented, so
/// the parent id changes). Checked twice a second on a thread of its own.
#[cfg(unix)]
fn exit_with_parent() {
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(500));
            if std::os::unix::process::parent_id() != parent {
                tracing::warn!(parent, "the parent process is gone; exiting");
                std::process::exit(0);
            }
        }
    });
}

#[cfg(not(unix))]
fn exit_with_parent() {}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    if args.exit_with_parent {
        exit_with_parent();
    }
    match run(args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kinformer-sim: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let faults = FaultSchedule::by_name(&args.faults).ok_or_else(|| {
        format!(
            "unknown fault schedule {:?}; known: {:?}",
            args.faults,
            FaultSchedule::NAMES
        )
    })?;
    let interval = Duration::try_from_secs_f64(args.bookmark_interval.max(0.01))?;
    let sim = Sim::builder()
        .history(args.history)
        .bookmark_interval(interval)
        .watch_chunks(args.watch_chunks)
        .stamp_commit_time(!args.no_commit_stamp)
        .protobuf_on_commit(args.protobuf_on_commit)
        .sharded_list_and_watch(!args.ignore_shard_selector)
        .faults(faults)
        .build();
    if args.objects > 0 {
        let created = sim
            .handle()
            .fill(&args.kind, args.objects, args.namespaces)?;
        tracing::info!(created, kind = %args.kind, "filled");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let running = sim.serve(args.listen).await?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "LISTENING {}", running.base_url())?;
        out.flush()?;
        drop(out);
        shutdown_signal().await;
        running.shutdown().await;
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

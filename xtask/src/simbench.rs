//! `cargo xtask simbench`: measure kinformer-sim against its scale targets (issue 3).
//!
//! Starts the sim in process ([`RunningSim::start_in_background`]) and measures, in order:
//! 1. fill: N Pods through the in-process bulk path;
//! 2. LIST: a paged LIST of the first `--list-objects` Pods over HTTP (`limit` + `continue`), read as
//!    raw bytes (MB/s), optionally decoded into `k8s-openapi` Pods afterwards (timed apart);
//! 3. watch fan-out: W watchers over HTTP, each counting events and measuring the lag from the sim's
//!    commit annotation to arrival, while the sim churns at R events/s for D seconds.
//!
//! Targets (2 cores): fill 1M ≤ 60 s; LIST ≥ 200 MB/s; 100 watchers at 10k events/s, none
//! dropped and none lagging more than 1 s.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use kinformer_sim::{COMMIT_ANNOTATION, ChurnConfig, RunningSim, Sim};
use serde::Serialize;

/// Options of `cargo xtask simbench`.
#[derive(clap::Args, Debug)]
pub struct SimbenchArgs {
    /// Pods to fill (the fill figure), spread over `--namespaces`.
    #[arg(long, default_value_t = 1_000_000)]
    pub objects: usize,
    /// Namespaces the Pods are spread over.
    #[arg(long, default_value_t = 10)]
    pub namespaces: usize,
    /// Pods read by the paged LIST (0 skips the LIST).
    #[arg(long, default_value_t = 100_000)]
    pub list_objects: usize,
    /// Page size (`limit`) of the LIST.
    #[arg(long, default_value_t = 500)]
    pub list_limit: usize,
    /// Also decode the LIST pages into `k8s-openapi` Pods (timed separately).
    #[arg(long)]
    pub decode: bool,
    /// Concurrent watchers (0 skips the watch fan-out).
    #[arg(long, default_value_t = 100)]
    pub watchers: usize,
    /// Churn rate of the watch fan-out, in events per second.
    #[arg(long, default_value_t = 10_000)]
    pub events_per_second: u64,
    /// Churn duration of the watch fan-out, in seconds.
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Watchers ask for `PartialObjectMetadata` instead of full objects.
    #[arg(long)]
    pub metadata_only: bool,
    /// Core/v1 resource churned and watched in the fan-out: `pods` (the filled ~5 KB Pods) or
    /// `configmaps` (small objects, filled with `--watch-objects` first).
    #[arg(long, default_value = "pods")]
    pub watch_kind: String,
    /// Objects filled for a `--watch-kind` other than pods.
    #[arg(long, default_value_t = 10_000)]
    pub watch_objects: usize,
    /// Write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Fill figures.
#[derive(Debug, Default, Serialize)]
struct FillReport {
    objects: usize,
    seconds: f64,
    objects_per_second: f64,
    bytes_per_object: f64,
}

/// LIST figures.
#[derive(Debug, Default, Serialize)]
struct ListReport {
    objects: usize,
    limit: usize,
    pages: usize,
    bytes: u64,
    seconds: f64,
    mb_per_second: f64,
    first_page_ms: f64,
    decode_seconds: Option<f64>,
    decoded_objects: Option<usize>,
}

/// Watch fan-out figures.
#[derive(Debug, Default, Serialize)]
struct WatchReport {
    kind: String,
    watchers: usize,
    metadata_only: bool,
    target_events_per_second: u64,
    duration_seconds: f64,
    events_sent: u64,
    sent_events_per_second: f64,
    received_min: u64,
    received_max: u64,
    received_total: u64,
    /// Events sent but not received by a watcher within the 10 s drain after the churn (sum).
    dropped_total: u64,
    watchers_with_drops: usize,
    error_events: u64,
    /// Lag samples (first event of each received chunk) over 1 s.
    lag_samples_over_1s: u64,
    lag_samples: u64,
    lag_p50_us: u64,
    lag_p99_us: u64,
    lag_max_us: u64,
    bytes_received: u64,
    mb_per_second_received: f64,
    /// Watchers the sim cut off with a 410 for falling a broadcast buffer behind (real drops).
    sim_watches_lagged: u64,
    drain_seconds: f64,
}

/// Everything measured.
#[derive(Debug, Default, Serialize)]
struct Report {
    load_average_before: String,
    fill: Option<FillReport>,
    list: Option<ListReport>,
    watch: Option<WatchReport>,
}

/// Run the benchmark.
pub fn run(args: &SimbenchArgs) -> anyhow::Result<()> {
    let mut report = Report {
        load_average_before: load_average(),
        ..Report::default()
    };
    eprintln!("load average before: {}", report.load_average_before);
    let sim = Sim::builder().build();
    let bg = RunningSim::start_in_background(sim, SocketAddr::from(([127, 0, 0, 1], 0)))
        .context("starting the sim")?;
    let handle = bg.handle().clone();
    let base = bg.base_url();

    eprintln!("filling {} pods ...", args.objects);
    let t = Instant::now();
    let filled = handle
        .fill("pods", args.objects, args.namespaces)
        .map_err(|e| anyhow::anyhow!("fill: {e:?}"))?;
    let seconds = t.elapsed().as_secs_f64();
    let sample_len = handle
        .get("pods", "ns-0", "pod-0")
        .ok()
        .flatten()
        .map_or(0, |o| o.bytes.len());
    report.fill = Some(FillReport {
        objects: filled,
        seconds,
        objects_per_second: filled as f64 / seconds.max(1e-9),
        bytes_per_object: sample_len as f64,
    });
    ensure!(
        filled == args.objects,
        "filled {filled} of {} pods",
        args.objects
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-client")
        .enable_all()
        .build()?;
    rt.block_on(async {
        let config = kube::Config::new(base.parse().context("sim URL")?);
        let client = kube::Client::try_from(config)?;
        if args.list_objects > 0 {
            eprintln!("paged LIST of {} pods ...", args.list_objects);
            report.list = Some(list_bench(&client, args).await?);
        }
        if args.watchers > 0 {
            eprintln!(
                "watch fan-out: {} watchers of {}, {} events/s for {} s ...",
                args.watchers, args.watch_kind, args.events_per_second, args.duration
            );
            report.watch = Some(watch_bench(&base, &handle, args).await?);
        }
        anyhow::Ok(())
    })?;
    drop(rt);
    bg.shutdown();

    print_table(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn get(uri: &str, accept: Option<&str>) -> anyhow::Result<http::Request<kube::client::Body>> {
    let mut b = http::Request::get(uri);
    if let Some(a) = accept {
        b = b.header(http::header::ACCEPT, a);
    }
    Ok(b.body(kube::client::Body::empty())?)
}

/// The `metadata.continue` of a list page, read from the envelope at its start (no decoding).
fn continue_token(head: &[u8]) -> Option<String> {
    const KEY: &[u8] = br#""continue":""#;
    let at = memchr::memmem::find(head, KEY)? + KEY.len();
    let len = memchr::memchr(b'"', &head[at..])?;
    let tok = std::str::from_utf8(&head[at..at + len]).ok()?;
    (!tok.is_empty()).then(|| tok.to_string())
}

async fn list_bench(client: &kube::Client, args: &SimbenchArgs) -> anyhow::Result<ListReport> {
    let limit = args.list_limit.max(1);
    let mut kept: Vec<Vec<bytes::Bytes>> = Vec::new();
    let (mut pages, mut items, mut bytes) = (0usize, 0usize, 0u64);
    let mut cont: Option<String> = None;
    let mut first_page = Duration::ZERO;
    let t = Instant::now();
    while items < args.list_objects {
        let uri = match &cont {
            None => format!("/api/v1/pods?limit={limit}"),
            Some(c) => format!("/api/v1/pods?limit={limit}&continue={c}"),
        };
        let resp = client.send(get(&uri, None)?).await?;
        ensure!(
            resp.status().is_success(),
            "LIST answered {}",
            resp.status()
        );
        let mut body = resp.into_body();
        let mut head: Vec<u8> = Vec::new();
        let mut page: Vec<bytes::Bytes> = Vec::new();
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            if head.len() < 4096 {
                let n = data.len().min(4096 - head.len());
                head.extend_from_slice(&data[..n]);
            }
            bytes += data.len() as u64;
            if args.decode {
                // Keep the chunks (no copy while timing); they are joined when decoding.
                page.push(data);
            }
        }
        if pages == 0 {
            first_page = t.elapsed();
        }
        pages += 1;
        cont = continue_token(&head);
        items += limit;
        if args.decode {
            kept.push(page);
        }
        if cont.is_none() {
            break;
        }
    }
    let seconds = t.elapsed().as_secs_f64();
    let (decode_seconds, decoded_objects) = if args.decode {
        let t = Instant::now();
        let mut n = 0;
        for chunks in &kept {
            let page = chunks.concat();
            let list: k8s_openapi::List<k8s_openapi::api::core::v1::Pod> =
                serde_json::from_slice(&page).context("decoding a LIST page")?;
            n += list.items.len();
        }
        (Some(t.elapsed().as_secs_f64()), Some(n))
    } else {
        (None, None)
    };
    Ok(ListReport {
        objects: decoded_objects.unwrap_or(items.min(args.list_objects)),
        limit,
        pages,
        bytes,
        seconds,
        mb_per_second: bytes as f64 / 1e6 / seconds.max(1e-9),
        first_page_ms: first_page.as_secs_f64() * 1e3,
        decode_seconds,
        decoded_objects,
    })
}

/// What one watcher saw.
struct WatcherResult {
    events: u64,
    errors: u64,
    bytes: u64,
    /// Sampled events (see `lag_us`) that lagged more than 1 s.
    over_1s: u64,
    /// Lag of the first event starting in each received chunk: the oldest of the chunk, so the
    /// maximum is the maximum over all events and percentiles err on the high side.
    lag_us: Histogram<u64>,
}

/// Shared stop conditions of the watchers.
struct WatchControl {
    /// Events each watcher must see before it stops (`u64::MAX` until the churn ends).
    expected: AtomicU64,
    /// Stop now, whatever was received.
    abort: AtomicBool,
    /// Watchers connected so far.
    connected: AtomicU64,
}

/// Lags from 1 µs to one hour, 3 significant digits.
fn lag_histogram() -> anyhow::Result<Histogram<u64>> {
    Ok(Histogram::new_with_bounds(1, 3_600_000_000, 3)?)
}

fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Parse the commit annotation's nanoseconds out of an encoded watch line.
fn commit_nanos(line: &[u8], finder: &memchr::memmem::Finder<'_>) -> Option<u128> {
    let at = finder.find(line)? + finder.needle().len();
    let len = memchr::memchr(b'"', &line[at..])?;
    std::str::from_utf8(&line[at..at + len]).ok()?.parse().ok()
}

async fn watch_one(
    client: kube::Client,
    uri: String,
    accept: Option<&'static str>,
    ctl: Arc<WatchControl>,
) -> anyhow::Result<WatcherResult> {
    let resp = client.send(get(&uri, accept)?).await?;
    ensure!(
        resp.status().is_success(),
        "WATCH answered {}",
        resp.status()
    );
    ctl.connected.fetch_add(1, Ordering::Relaxed);
    let needle = format!("\"{COMMIT_ANNOTATION}\":\"");
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let mut res = WatcherResult {
        events: 0,
        errors: 0,
        bytes: 0,
        over_1s: 0,
        lag_us: lag_histogram()?,
    };
    let mut body = resp.into_body();
    // Whether the previous chunk ended inside a line.
    let mut mid_line = false;
    loop {
        if ctl.abort.load(Ordering::Relaxed) || res.events >= ctl.expected.load(Ordering::Relaxed) {
            break;
        }
        let frame = match tokio::time::timeout(Duration::from_millis(200), body.frame()).await {
            Err(_) => continue,
            Ok(None) => break,
            Ok(Some(f)) => f?,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        res.bytes += data.len() as u64;
        // Count complete lines (no bookmarks are asked for, so every line is an event or an
        // ERROR); measure the lag on the first line starting in this chunk, the oldest in it.
        let mut lines = memchr::memchr_iter(b'\n', &data).count() as u64;
        let first = if mid_line {
            memchr::memchr(b'\n', &data).map(|i| i + 1)
        } else {
            Some(0)
        };
        mid_line = !data.ends_with(b"\n");
        if let Some(start) = first.filter(|&s| s < data.len()) {
            let head = &data[start..data.len().min(start + 2048)];
            if head.starts_with(br#"{"type":"ERROR""#) {
                res.errors += 1;
                lines = lines.saturating_sub(1);
            } else if let Some(c) = commit_nanos(head, &finder) {
                let lag = unix_nanos().saturating_sub(c);
                if lag > 1_000_000_000 {
                    res.over_1s += 1;
                }
                res.lag_us
                    .saturating_record((lag / 1000).min(u128::from(u64::MAX)) as u64);
            }
        }
        res.events += lines;
    }
    Ok(res)
}

async fn watch_bench(
    base: &str,
    handle: &kinformer_sim::SimHandle,
    args: &SimbenchArgs,
) -> anyhow::Result<WatchReport> {
    let kind = args.watch_kind.as_str();
    ensure!(
        matches!(kind, "pods" | "configmaps"),
        "--watch-kind must be pods or configmaps"
    );
    if kind != "pods" {
        handle
            .fill(kind, args.watch_objects, args.namespaces)
            .map_err(|e| anyhow::anyhow!("fill {kind}: {e:?}"))?;
    }
    let rv = handle.current_rv();
    let timeout = args.duration.ceil() as u64 + 120;
    let uri = format!("/api/v1/{kind}?watch=1&resourceVersion={rv}&timeoutSeconds={timeout}");
    let accept = args
        .metadata_only
        .then_some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
    let ctl = Arc::new(WatchControl {
        expected: AtomicU64::new(u64::MAX),
        abort: AtomicBool::new(false),
        connected: AtomicU64::new(0),
    });
    let mut tasks = Vec::with_capacity(args.watchers);
    for _ in 0..args.watchers {
        // One client (and so one connection pool) per watcher: each watch is its own connection.
        let config = kube::Config::new(base.parse().context("sim URL")?);
        let client = kube::Client::try_from(config)?;
        tasks.push(tokio::spawn(watch_one(
            client,
            uri.clone(),
            accept,
            ctl.clone(),
        )));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while ctl.connected.load(Ordering::Relaxed) < args.watchers as u64 {
        if Instant::now() > deadline || tasks.iter().any(|t| t.is_finished()) {
            ctl.abort.store(true, Ordering::Relaxed);
            bail!(
                "only {} of {} watchers connected",
                ctl.connected.load(Ordering::Relaxed),
                args.watchers
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lagged_before = handle.stats().watches_lagged;
    let churn = handle
        .churn(ChurnConfig {
            kind: kind.into(),
            rate_per_sec: Some(args.events_per_second),
            duration: Duration::from_secs_f64(args.duration),
            namespaces: args.namespaces.max(1),
            ..ChurnConfig::default()
        })
        .map_err(|e| anyhow::anyhow!("churn: {e:?}"))?;
    let churn_report = tokio::task::spawn_blocking(move || churn.join()).await?;
    let drain_start = Instant::now();
    let sent = churn_report.total();
    ctl.expected.store(sent, Ordering::Relaxed);
    // Give stragglers up to 10 s to catch up, then stop everyone.
    let abort = {
        let ctl = ctl.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            ctl.abort.store(true, Ordering::Relaxed);
        })
    };
    let mut results = Vec::with_capacity(tasks.len());
    for t in tasks {
        results.push(t.await??);
    }
    let drain_seconds = drain_start.elapsed().as_secs_f64();
    abort.abort();
    let mut lag = lag_histogram()?;
    let mut r = WatchReport {
        kind: kind.into(),
        watchers: args.watchers,
        metadata_only: args.metadata_only,
        target_events_per_second: args.events_per_second,
        duration_seconds: churn_report.elapsed_seconds,
        events_sent: sent,
        sent_events_per_second: sent as f64 / churn_report.elapsed_seconds.max(1e-9),
        received_min: u64::MAX,
        drain_seconds,
        ..WatchReport::default()
    };
    for w in &results {
        lag.add(&w.lag_us)?;
        r.received_min = r.received_min.min(w.events);
        r.received_max = r.received_max.max(w.events);
        r.received_total += w.events;
        let dropped = sent.saturating_sub(w.events);
        r.dropped_total += dropped;
        r.watchers_with_drops += usize::from(dropped > 0);
        r.error_events += w.errors;
        r.lag_samples_over_1s += w.over_1s;
        r.bytes_received += w.bytes;
    }
    if results.is_empty() {
        r.received_min = 0;
    }
    r.lag_samples = lag.len();
    r.lag_p50_us = lag.value_at_quantile(0.5);
    r.lag_p99_us = lag.value_at_quantile(0.99);
    r.lag_max_us = lag.max();
    r.mb_per_second_received = r.bytes_received as f64 / 1e6 / r.duration_seconds.max(1e-9);
    r.sim_watches_lagged = handle.stats().watches_lagged - lagged_before;
    Ok(r)
}

fn print_table(r: &Report) {
    println!();
    println!(
        "kinformer-sim benchmark (load average before: {})",
        r.load_average_before
    );
    println!("{:<34} {:>16}  target", "figure", "value");
    let row = |name: &str, value: String, target: &str| {
        println!("{name:<34} {value:>16}  {target}");
    };
    if let Some(f) = &r.fill {
        row("fill pods", f.objects.to_string(), "");
        row("fill seconds", format!("{:.1}", f.seconds), "≤ 60 s for 1M");
        row("fill pods/s", format!("{:.0}", f.objects_per_second), "");
        row("bytes per pod", format!("{:.0}", f.bytes_per_object), "");
    }
    if let Some(l) = &r.list {
        row(
            "list pods (pages × limit)",
            format!("{} ({} × {})", l.objects, l.pages, l.limit),
            "",
        );
        row("list MB", format!("{:.1}", l.bytes as f64 / 1e6), "");
        row("list seconds", format!("{:.3}", l.seconds), "");
        row("list MB/s", format!("{:.0}", l.mb_per_second), "≥ 200 MB/s");
        row("list first page ms", format!("{:.1}", l.first_page_ms), "");
        if let Some(d) = l.decode_seconds {
            row("list decode seconds (k8s-openapi)", format!("{d:.3}"), "");
        }
    }
    if let Some(w) = &r.watch {
        row("watch kind", w.kind.clone(), "");
        row("watchers", w.watchers.to_string(), "100");
        row("metadata only", w.metadata_only.to_string(), "");
        row(
            "events sent (events/s)",
            format!("{} ({:.0})", w.events_sent, w.sent_events_per_second),
            "10k/s",
        );
        row(
            "received per watcher min/max",
            format!("{}/{}", w.received_min, w.received_max),
            "= sent",
        );
        row(
            "undelivered after 10 s drain (watchers)",
            format!("{} ({})", w.dropped_total, w.watchers_with_drops),
            "0",
        );
        row("error events", w.error_events.to_string(), "0");
        row(
            "lag samples (oldest event per chunk)",
            w.lag_samples.to_string(),
            "",
        );
        row("lag samples > 1 s", w.lag_samples_over_1s.to_string(), "0");
        row(
            "lag p50 ms",
            format!("{:.1}", w.lag_p50_us as f64 / 1e3),
            "",
        );
        row(
            "lag p99 ms",
            format!("{:.1}", w.lag_p99_us as f64 / 1e3),
            "",
        );
        row(
            "lag max ms",
            format!("{:.1}", w.lag_max_us as f64 / 1e3),
            "≤ 1000 ms",
        );
        row(
            "received MB/s (all watchers)",
            format!("{:.0}", w.mb_per_second_received),
            "",
        );
        row(
            "sim watches cut as lagged",
            w.sim_watches_lagged.to_string(),
            "0",
        );
    }
}

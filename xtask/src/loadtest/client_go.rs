//! `--impl client-go`: client-go's shared informer in a child process
//! (`xtask/clientgo/`, built here with Go once and cached), driven through
//! its line protocol (see that program's doc), measured from outside.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use parking_lot::Mutex;
use serde::Deserialize;

use super::measure::LagStats;
use super::process::Proc;
use super::{LoadtestArgs, TransformArg};
use crate::apiserver::build::{BuildArgs, cache_root, find_go, go_build, has_nice};

/// The client-go release the harness pins (must match `xtask/clientgo/go.mod`).
pub const CLIENT_GO_VERSION: &str = "v0.37.2";

/// `xtask/clientgo/`, the harness's Go module.
fn module_dir() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("clientgo")
}

/// FNV-1a of the module's files: a cached binary built from other sources
/// is rebuilt.
fn source_stamp() -> anyhow::Result<String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in ["go.mod", "go.sum", "main.go", "controller.go"] {
        let bytes = std::fs::read(module_dir().join(f)).with_context(|| format!("reading {f}"))?;
        for b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    Ok(format!("{h:016x}"))
}

/// Builds the harness unless the cache has it for these sources; returns
/// its path (`<cache>/client-go-<version>/<stamp>/kinformer-client-go`).
pub fn ensure_built() -> anyhow::Result<PathBuf> {
    let dir = cache_root(&BuildArgs::default())
        .join(format!("client-go-{CLIENT_GO_VERSION}"))
        .join(source_stamp()?);
    let bin = dir.join("kinformer-client-go");
    if bin.is_file() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let go = find_go()?;
    eprintln!(
        "building the client-go {CLIENT_GO_VERSION} harness into {}",
        dir.display()
    );
    let tmp = dir.join(format!(".build-{}", std::process::id()));
    let status = go_build(&go, has_nice(), &module_dir())
        .arg("-o")
        .arg(&tmp)
        .arg(".")
        .status()
        .with_context(|| format!("running {} build", go.display()))?;
    if !status.success() {
        bail!(
            "`go build` of the client-go harness failed ({status}) in {}",
            module_dir().display()
        );
    }
    std::fs::rename(&tmp, &bin).with_context(|| format!("moving it to {}", bin.display()))?;
    Ok(bin)
}

/// What `status` replies.
#[derive(Deserialize, Default, Clone, Copy)]
pub struct Status {
    /// The informer and every handler registration synced.
    pub synced: bool,
    /// The newest resourceVersion every handler was called with.
    pub seen_rv: u64,
    /// Objects in the store (asked for by `status len` only).
    #[serde(default)]
    pub len: usize,
    /// Watches that ended in an error (the reflector's watch error handler).
    pub watch_errors: u64,
    /// Of those, the 410s (each followed by a relist).
    pub expired: u64,
}

/// What `finish` replies.
#[derive(Deserialize)]
struct Finished {
    recorded: u64,
    reads: u64,
}

/// The running harness.
pub struct ClientGo {
    child: Mutex<Child>,
    io: Mutex<(ChildStdin, BufReader<ChildStdout>)>,
    pid: u32,
    /// Where the harness writes the lag samples and the cache's keys.
    scratch: PathBuf,
}

impl ClientGo {
    /// Builds (if needed) and starts the harness against `url` (the
    /// simulator) or `--kubeconfig`, with `extra` arguments; its informer
    /// waits for [`Self::start`].
    pub fn spawn(
        args: &LoadtestArgs,
        url: Option<&str>,
        namespace: Option<&str>,
        extra: &[String],
    ) -> anyhow::Result<Self> {
        let bin = ensure_built()?;
        let mut cmd = Command::new(bin);
        cmd.args(extra);
        match (url, &args.kubeconfig) {
            (_, Some(kubeconfig)) => cmd.arg("--kubeconfig").arg(kubeconfig),
            (Some(url), None) => cmd.arg("--server").arg(url),
            (None, None) => bail!("--impl client-go needs the simulator or --kubeconfig"),
        };
        if let Some(ns) = namespace {
            cmd.arg("--namespace").arg(ns);
        }
        if args.metadata_only {
            cmd.arg("--metadata-only");
        }
        if args.transform != TransformArg::None {
            cmd.arg("--strip-managed-fields");
        }
        cmd.arg("--handlers").arg(args.handlers.max(1).to_string());
        // client-go reads its feature gates from the environment.
        cmd.env(
            "KUBE_FEATURE_WatchListClient",
            if args.no_watch_list { "false" } else { "true" },
        );
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting the client-go harness")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("the client-go harness has no pipes");
        };
        let scratch = std::env::temp_dir().join(format!("kinformer-client-go-{}", child.id()));
        std::fs::create_dir_all(&scratch)?;
        Ok(Self {
            pid: child.id(),
            child: Mutex::new(child),
            io: Mutex::new((stdin, BufReader::new(stdout))),
            scratch,
        })
    }

    /// The process to measure.
    pub fn process(&self) -> Proc {
        Proc::Child(self.pid)
    }

    /// Sends `command` and decodes its reply.
    pub fn request<T: serde::de::DeserializeOwned>(&self, command: &str) -> anyhow::Result<T> {
        let mut io = self.io.lock();
        writeln!(io.0, "{command}").context("writing to the client-go harness")?;
        io.0.flush()?;
        let mut line = String::new();
        if io.1.read_line(&mut line)? == 0 {
            bail!("the client-go harness exited (see its messages above)");
        }
        serde_json::from_str(&line)
            .with_context(|| format!("the client-go harness's reply to {command}: {line:?}"))
    }

    /// Sends `command`, whose reply says only that it was done.
    pub fn ok(&self, command: &str) -> anyhow::Result<()> {
        self.request::<serde_json::Value>(command).map(drop)
    }

    /// Starts the informer (the sync's clock).
    pub fn start(&self) -> anyhow::Result<()> {
        self.ok("start")
    }

    /// The informer's state now (the default when the harness failed, which
    /// is logged: the waits then run out and say so).
    pub fn status(&self) -> Status {
        self.status_of("status")
    }

    /// [`Self::status`] with the objects cached counted (which copies
    /// every key in the harness).
    pub fn status_with_len(&self) -> Status {
        self.status_of("status len")
    }

    fn status_of(&self, command: &str) -> Status {
        self.request(command).unwrap_or_else(|e| {
            tracing::error!(error = %e, "client-go status");
            Status::default()
        })
    }

    /// Counts events from now on, recording the lag of changes committed
    /// `lag_warmup` from now on; `None`: counts only (a burst).
    pub fn record(&self, lag_warmup: Option<Duration>) -> anyhow::Result<()> {
        match lag_warmup {
            Some(w) => {
                let from = super::measure::now_unix_nanos() + w.as_nanos();
                self.ok(&format!("record {from}"))
            }
            None => self.ok("count"),
        }
    }

    /// Starts `n` readers in the harness.
    pub fn start_readers(&self, n: usize) -> anyhow::Result<()> {
        self.ok(&format!("readers {n}"))
    }

    /// Stops counting and reading; the events counted and their lags go
    /// into `stats` as the load test's own handler records them. Returns
    /// the reads made.
    pub fn finish(&self, stats: &LagStats) -> anyhow::Result<u64> {
        let path = self.scratch.join("lag");
        let f: Finished = self.request(&format!("finish {}", path.display()))?;
        stats.recorded.store(f.recorded, Ordering::Relaxed);
        let mut lag = stats.lag.lock();
        for line in std::fs::read_to_string(&path)?.lines() {
            let mut it = line.split(' ').map(str::parse::<u64>);
            if let (Some(Ok(since)), Some(Ok(us))) = (it.next(), it.next()) {
                lag.record(Duration::from_nanos(since), us);
            }
        }
        Ok(f.reads)
    }

    /// A file of the harness's scratch directory (removed with it).
    pub fn scratch_file(&self, name: &str) -> PathBuf {
        self.scratch.join(name)
    }

    /// The cache's keys and resourceVersions.
    pub fn keys_and_versions(&self) -> anyhow::Result<Vec<(String, Option<String>)>> {
        let path = self.scratch.join("keys");
        self.ok(&format!("dump {}", path.display()))?;
        Ok(std::fs::read_to_string(&path)?
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect())
    }

    /// Ends the harness.
    pub fn shutdown(&self) {
        let _ = self.ok("quit");
        let mut child = self.child.lock();
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

impl Drop for ClientGo {
    fn drop(&mut self) {
        let child = self.child.get_mut();
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

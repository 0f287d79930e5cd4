//! Stopping and starting again the kube-apiserver that `cargo xtask apiserver start` (or `cargo
//! xtask e2e`) started, while etcd keeps running: for tests of what an informer sees across an
//! apiserver restart.
//!
//! `start` records the apiserver's PID, binary, log and arguments in `state.json` of its state
//! directory ([`STATE_DIR_ENV`]). [`Apiserver::stop`] ends that process; [`Apiserver::start`] runs
//! the same binary with the same arguments (same port, certificates, token file and etcd), appends
//! to the same log, records the new PID in `state.json` (so that `cargo xtask apiserver stop` ends
//! the new process) and waits for `/readyz`.
//!
//! A restart breaks every other test talking to the server at that moment: tests that restart it
//! live in their own test binary, which `cargo xtask e2e` runs after all others.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::{raw, real_client};

/// Variable naming the state directory of `cargo xtask apiserver` (set by `cargo xtask e2e`).
pub const STATE_DIR_ENV: &str = "KINFORMER_E2E_STATE_DIR";

/// How long [`Apiserver::start`] waits for `/readyz`.
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// How long [`StopMode::Graceful`] waits for the process to exit once its port refuses
/// connections, before SIGKILL.
pub const GRACEFUL_TIMEOUT: Duration = Duration::from_secs(2);

/// How to stop kube-apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// SIGTERM, as in a rolling restart. kube-apiserver fails `/readyz`, stops listening and
    /// stops its controllers within milliseconds, but keeps open watch connections until its HTTP
    /// shutdown timeout (about a minute; `--shutdown-watch-termination-grace-period` is 0 in the
    /// harness, so it does not end them itself). So: SIGTERM, wait until the port refuses
    /// connections, give the process [`GRACEFUL_TIMEOUT`] to exit, then SIGKILL, which cuts the
    /// watches. Clients that reconnect then find nothing listening ("connection refused").
    Graceful,
    /// SIGKILL, as in a crash: connections are cut mid-stream, and a client reconnecting at that
    /// very moment may have its connection reset rather than refused.
    Kill,
}

/// The kube-apiserver recorded in a state directory of `cargo xtask apiserver`.
#[derive(Debug)]
pub struct Apiserver {
    dir: PathBuf,
    binary: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    /// `--secure-port`.
    port: u16,
    pid: u32,
    /// The process when this handle started it (to reap it once stopped).
    child: Option<Child>,
}

impl Apiserver {
    /// The server recorded in the state directory named by [`STATE_DIR_ENV`].
    pub fn from_env() -> anyhow::Result<Self> {
        let dir = std::env::var_os(STATE_DIR_ENV)
            .map(PathBuf::from)
            .with_context(|| {
                format!(
                    "{STATE_DIR_ENV} is not set: tests that restart kube-apiserver need the state \
                 directory of `cargo xtask apiserver start`; run them with `cargo xtask e2e` (or \
                 export the variables that `cargo xtask apiserver env` prints)"
                )
            })?;
        Self::load(&dir)
    }

    /// The server recorded in `dir/state.json`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let state = read_state(dir)?;
        let proc = &state["apiserver"];
        let pid = proc["pid"]
            .as_u64()
            .and_then(|p| u32::try_from(p).ok())
            .context("state.json: no apiserver.pid")?;
        let binary = proc["binary"]
            .as_str()
            .map(PathBuf::from)
            .context("state.json: no apiserver.binary")?;
        let log = proc["log"]
            .as_str()
            .map(PathBuf::from)
            .context("state.json: no apiserver.log")?;
        let args: Vec<String> = match proc["args"].as_array() {
            Some(a) if !a.is_empty() => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .context("state.json: apiserver.args holds a non-string")?,
            _ => bail!(
                "state.json in {} records no apiserver arguments (written by an older xtask): \
                 start the server again with `cargo xtask apiserver start`",
                dir.display()
            ),
        };
        let port = args
            .iter()
            .find_map(|a| a.strip_prefix("--secure-port="))
            .and_then(|p| p.parse().ok())
            .context("state.json: no --secure-port=<port> among the apiserver arguments")?;
        Ok(Self {
            dir: dir.to_path_buf(),
            binary,
            args,
            log,
            port,
            pid,
            child: None,
        })
    }

    /// The PID of the current (or last) kube-apiserver process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The kube-apiserver log.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Whether the recorded process is alive and runs the recorded binary.
    pub fn is_running(&mut self) -> bool {
        if let Some(c) = &mut self.child
            && let Ok(Some(_)) = c.try_wait()
        {
            return false;
        }
        process_runs(self.pid, &self.binary)
    }

    /// Stops kube-apiserver and waits until the process is gone (etcd keeps running). Nothing to
    /// do when it is not running.
    pub async fn stop(&mut self, mode: StopMode) -> anyhow::Result<()> {
        if !self.is_running() {
            return Ok(());
        }
        let started = Instant::now();
        match mode {
            StopMode::Graceful => {
                signal(self.pid, "-TERM")?;
                self.wait_not_listening(Duration::from_secs(30)).await?;
                if !self.wait_gone(GRACEFUL_TIMEOUT).await {
                    signal(self.pid, "-KILL")?;
                }
            }
            StopMode::Kill => signal(self.pid, "-KILL")?,
        }
        if !self.wait_gone(Duration::from_secs(10)).await {
            bail!("kube-apiserver (pid {}) did not exit", self.pid);
        }
        append_log(
            &self.log,
            &format!(
                "--- kinformer-e2e: kube-apiserver (pid {}) stopped ({mode:?}) in {:.1?} ---",
                self.pid,
                started.elapsed()
            ),
        );
        Ok(())
    }

    /// Waits until a connection to the apiserver's port is refused (or the process is gone).
    async fn wait_not_listening(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        loop {
            if !self.is_running() {
                return Ok(());
            }
            let connect = tokio::time::timeout(
                Duration::from_millis(500),
                tokio::net::TcpStream::connect(addr),
            )
            .await;
            if let Ok(Err(e)) = connect
                && e.kind() == std::io::ErrorKind::ConnectionRefused
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "kube-apiserver (pid {}) still listens on {addr} {timeout:?} after SIGTERM",
                    self.pid
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_gone(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.is_running() {
                // Reap it when it is ours.
                if let Some(mut c) = self.child.take() {
                    let _ = c.wait();
                }
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// Starts kube-apiserver again with the recorded binary and arguments, records its PID in
    /// `state.json` and waits until `/readyz` answers 200. Fails when it is already running.
    pub async fn start(&mut self) -> anyhow::Result<Duration> {
        if self.is_running() {
            bail!("kube-apiserver (pid {}) is already running", self.pid);
        }
        let started = Instant::now();
        append_log(
            &self.log,
            "--- kinformer-e2e: starting kube-apiserver again ---",
        );
        let out = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let err = out.try_clone()?;
        let child = Command::new(&self.binary)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group, as `cargo xtask apiserver start` does.
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        self.pid = child.id();
        self.child = Some(child);
        record_pid(&self.dir, self.pid)?;
        self.wait_ready(started).await?;
        Ok(started.elapsed())
    }

    /// [`stop`](Self::stop) then [`start`](Self::start); returns the downtime.
    pub async fn restart(&mut self, mode: StopMode) -> anyhow::Result<Duration> {
        let started = Instant::now();
        self.stop(mode).await?;
        self.start().await?;
        Ok(started.elapsed())
    }

    /// Starts kube-apiserver when it is not running (e.g. after a test failed while it was
    /// stopped), else only waits for `/readyz`.
    pub async fn ensure_running(&mut self) -> anyhow::Result<()> {
        if self.is_running() {
            self.wait_ready(Instant::now()).await
        } else {
            self.start().await.map(|_| ())
        }
    }

    async fn wait_ready(&mut self, started: Instant) -> anyhow::Result<()> {
        let deadline = started + READY_TIMEOUT;
        loop {
            if !self.is_running() {
                bail!(
                    "kube-apiserver (pid {}) exited while starting; last lines of {}:\n{}",
                    self.pid,
                    self.log.display(),
                    tail(&self.log, 25)
                );
            }
            // A fresh client each time: no pooled connection to a previous process.
            let last = match real_client(false).await {
                Ok(c) => match raw(&c, "GET", "/readyz", None, Some("text/plain")).await {
                    Ok(r) if r.status == 200 => return Ok(()),
                    Ok(r) => format!("/readyz {}: {}", r.status, r.text()),
                    Err(e) => format!("/readyz: {e:#}"),
                },
                Err(e) => format!("client: {e:#}"),
            };
            if Instant::now() > deadline {
                bail!(
                    "kube-apiserver not ready after {READY_TIMEOUT:?}; last answer: {last}; last \
                     lines of {}:\n{}",
                    self.log.display(),
                    tail(&self.log, 25)
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn read_state(dir: &Path) -> anyhow::Result<Value> {
    let f = dir.join("state.json");
    let bytes = std::fs::read(&f).with_context(|| {
        format!(
            "no kube-apiserver recorded in {} (run `cargo xtask apiserver start`)",
            f.display()
        )
    })?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", f.display()))
}

/// Writes the new PID into `state.json` (atomically) and `kube-apiserver.pid`.
fn record_pid(dir: &Path, pid: u32) -> anyhow::Result<()> {
    let mut state = read_state(dir)?;
    state["apiserver"]["pid"] = pid.into();
    let f = dir.join("state.json");
    let tmp = dir.join("state.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&state)?)?;
    std::fs::rename(&tmp, &f).with_context(|| format!("replacing {}", f.display()))?;
    std::fs::write(dir.join("kube-apiserver.pid"), format!("{pid}\n"))?;
    Ok(())
}

/// Whether `pid` is a live (not zombie) process running `binary` (checked against PID reuse).
fn process_runs(pid: u32, binary: &Path) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the parenthesized command name.
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().next());
    if matches!(state, None | Some("Z" | "X")) {
        return false;
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"));
    let want = std::fs::canonicalize(binary).unwrap_or_else(|_| binary.to_path_buf());
    exe.is_ok_and(|e| e == want)
}

fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill {sig} {pid}: {status}");
    }
    Ok(())
}

fn append_log(log: &Path, line: &str) {
    if let Ok(mut f) = OpenOptions::new().append(true).open(log) {
        let _ = writeln!(f, "{line}");
    }
}

/// The last `n` lines of a log file, for failure messages.
fn tail(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

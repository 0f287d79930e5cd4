//! The simulator as a child process, so the informer's memory and CPU
//! figures are this process's alone.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use super::LoadtestArgs;

/// A running `kinformer-sim` child.
pub struct SimProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

/// A simulator binary to run instead of building the workspace's (to
/// compare two simulators under one harness).
const SIM_BINARY_ENV: &str = "KINFORMER_SIM_BINARY";

/// Builds the workspace's simulator (release) and returns its path.
fn build() -> anyhow::Result<PathBuf> {
    let root = crate::workspace_root();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(&root)
        .args([
            "build",
            "--quiet",
            "--release",
            "-p",
            "kinformer-sim",
            "--bin",
            "kinformer-sim",
        ])
        .status()
        .context("building kinformer-sim")?;
    if !status.success() {
        bail!("building kinformer-sim failed: {status}");
    }
    Ok(root.join("target/release/kinformer-sim"))
}

impl SimProcess {
    /// Builds (if needed) and starts the simulator filled with `--objects`
    /// Pods; returns once it listens. With `KINFORMER_SIM_BINARY` set, runs
    /// that binary instead of building one.
    pub fn start(args: &LoadtestArgs) -> anyhow::Result<Self> {
        let bin = match std::env::var_os(SIM_BINARY_ENV) {
            Some(bin) => PathBuf::from(bin),
            None => build()?,
        };
        let mut command = Command::new(&bin);
        if args.protobuf() {
            // A protobuf sync then costs the simulator a copy per object, as
            // a JSON one does (kube-apiserver encodes protobuf cheaply).
            command.arg("--protobuf-on-commit");
        }
        let mut child = command
            .args(["--listen", "127.0.0.1:0", "--kind", "pods"])
            .args(["--objects", &args.objects.to_string()])
            .args(["--namespaces", &super::pods::NAMESPACES.to_string()])
            .args(["--faults", args.faults.as_deref().unwrap_or("none")])
            .args(["--bookmark-interval", "5"])
            .args(["--history", &args.sim_history.to_string()])
            .args(["--watch-chunks", args.sim_watch_chunks.as_str()])
            .arg("--exit-with-parent")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let stdout = child.stdout.take().context("sim stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let fill = super::progress::spinner(
            args.quiet,
            format!("filling the simulator with {} objects", args.objects),
        );
        let line = rx
            .recv_timeout(Duration::from_secs(900))
            .context("the simulator did not report its address");
        fill.finish();
        let line = line?;
        let Some(url) = line.trim().strip_prefix("LISTENING ") else {
            let _ = child.kill();
            bail!("unexpected first line from the simulator: {line:?}");
        };
        Ok(Self {
            url: url.to_string(),
            child,
        })
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

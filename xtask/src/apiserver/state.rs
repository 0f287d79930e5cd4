//! The state directory of a running server and what `start` records in it (`state.json`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// `target/apiserver/` of the workspace (or of `$CARGO_TARGET_DIR`).
pub fn default_state_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap_or_else(|| Path::new("."))
                .join("target")
        },
        PathBuf::from,
    );
    target.join("apiserver")
}

/// One started process.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proc {
    /// Its PID.
    pub pid: u32,
    /// The binary (checked against `/proc/<pid>/exe` before signalling, against PID reuse).
    pub binary: PathBuf,
    /// Its log file (stdout and stderr).
    pub log: PathBuf,
    /// The arguments it was started with, so that it can be started again the same way (the
    /// e2e suite's apiserver-restart tests do; they then record the new PID here).
    #[serde(default)]
    pub args: Vec<String>,
}

/// What `start` set up.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// The state directory.
    pub dir: PathBuf,
    /// Kubernetes version of the binaries.
    pub k8s_version: String,
    /// etcd.
    pub etcd: Proc,
    /// kube-apiserver.
    pub apiserver: Proc,
    /// etcd client port (plain HTTP on 127.0.0.1).
    pub etcd_port: u16,
    /// kube-apiserver secure port on 127.0.0.1.
    pub apiserver_port: u16,
    /// The kubeconfig written for the test user.
    pub kubeconfig: PathBuf,
    /// The test user's bearer token.
    pub token: String,
    /// Whether the WatchList feature gate is on.
    pub watch_list: bool,
    /// Whether the ShardedListAndWatch feature gate is on.
    #[serde(default)]
    pub sharded_list_and_watch: bool,
}

impl State {
    /// `state.json` in `dir`.
    pub fn file(dir: &Path) -> PathBuf {
        dir.join("state.json")
    }

    /// Read the state of the server started in `dir`.
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let f = Self::file(dir);
        let bytes = std::fs::read(&f).with_context(|| {
            format!(
                "no running kube-apiserver recorded in {} (run `cargo xtask apiserver start`)",
                f.display()
            )
        })?;
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", f.display()))
    }

    /// Write `state.json` and the two PID files.
    pub fn save(&self) -> anyhow::Result<()> {
        std::fs::write(Self::file(&self.dir), serde_json::to_vec_pretty(self)?)?;
        std::fs::write(self.dir.join("etcd.pid"), format!("{}\n", self.etcd.pid))?;
        std::fs::write(
            self.dir.join("kube-apiserver.pid"),
            format!("{}\n", self.apiserver.pid),
        )?;
        Ok(())
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// `http://127.0.0.1:PORT` of etcd.
    pub fn etcd_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.etcd_port)
    }

    /// `NAME=value` lines for the environment of clients and the e2e suite.
    pub fn env_lines(&self) -> Vec<String> {
        let kc = self.kubeconfig.display();
        vec![
            format!("KUBECONFIG={kc}"),
            format!("KINFORMER_E2E_KUBECONFIG={kc}"),
            format!("KINFORMER_E2E_ETCD_URL={}", self.etcd_url()),
            format!("KINFORMER_E2E_STATE_DIR={}", self.dir.display()),
        ]
    }
}

/// The last `n` lines of a log file, for failure messages.
pub fn tail(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

//! `cargo xtask apiserver build|start|stop|env`: upstream kube-apiserver and etcd, built from the
//! published Go modules pinned in `xtask/apiserver/go.mod`, run on loopback for the e2e suite.
//!
//! - [`build`]: `go build` of both binaries once, cached in `~/.cache/kinformer/<k8s-version>/`;
//! - [`certs`]: CA, serving certificate and service-account key, generated with rcgen;
//! - [`start`]: etcd + kube-apiserver on 127.0.0.1, kubeconfig, wait for `/readyz`;
//! - [`stop`]: end both by their PIDs;
//! - [`state`]: the state directory (`target/apiserver/`) and what `start` records there;
//! - [`https`]: a minimal blocking HTTPS client for readiness and bootstrap requests.

pub mod build;
pub mod certs;
pub mod https;
pub mod start;
pub mod state;
pub mod stop;

use std::path::PathBuf;

use clap::{Args, Subcommand};

/// The Kubernetes release built (must match `xtask/apiserver/go.mod`).
pub const K8S_VERSION: &str = "v1.37.2";
/// The etcd release built (must match `xtask/apiserver/go.mod`; the one k8s.io/kubernetes requires).
pub const ETCD_VERSION: &str = "v3.7.0";

/// Options of `cargo xtask apiserver`.
#[derive(Args)]
pub struct ApiserverArgs {
    #[command(subcommand)]
    command: ApiserverCommand,
}

#[derive(Subcommand)]
enum ApiserverCommand {
    /// Build kube-apiserver and etcd (once; cached binaries are reused).
    Build(build::BuildArgs),
    /// Start etcd and kube-apiserver on loopback and write a kubeconfig.
    Start(start::StartArgs),
    /// Stop both processes by their PIDs.
    Stop(StateDirArg),
    /// Print `KUBECONFIG=...` (and the e2e variables) for the running server.
    Env(StateDirArg),
}

/// The state directory option shared by the subcommands.
#[derive(Args, Clone, Debug)]
pub struct StateDirArg {
    /// Where the running server's certificates, kubeconfig, logs and PIDs live (default
    /// `$KINFORMER_APISERVER_STATE_DIR`, else `target/apiserver/`).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
}

impl StateDirArg {
    /// The chosen state directory, or `target/apiserver/` of the workspace.
    pub fn resolve(&self) -> PathBuf {
        self.state_dir
            .clone()
            .or_else(|| std::env::var_os("KINFORMER_APISERVER_STATE_DIR").map(PathBuf::from))
            .unwrap_or_else(state::default_state_dir)
    }
}

/// Runs `cargo xtask apiserver ...`.
pub fn run(args: &ApiserverArgs) -> anyhow::Result<()> {
    match &args.command {
        ApiserverCommand::Build(b) => {
            let bins = build::ensure_built(b)?;
            println!("kube-apiserver: {}", bins.kube_apiserver.display());
            println!("etcd:           {}", bins.etcd.display());
            Ok(())
        }
        ApiserverCommand::Start(s) => {
            let st = start::start(s)?;
            println!("kube-apiserver {K8S_VERSION} ready at {}", st.server_url());
            for line in st.env_lines() {
                println!("{line}");
            }
            Ok(())
        }
        ApiserverCommand::Stop(d) => stop::stop(&d.resolve()),
        ApiserverCommand::Env(d) => {
            let st = state::State::load(&d.resolve())?;
            for line in st.env_lines() {
                println!("{line}");
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_match_go_mod() {
        let go_mod = std::fs::read_to_string(build::go_module_dir().join("go.mod")).unwrap();
        assert!(go_mod.contains(&format!("k8s.io/kubernetes {K8S_VERSION}")));
        assert!(go_mod.contains(&format!("go.etcd.io/etcd/server/v3 {ETCD_VERSION}")));
        let staging = K8S_VERSION.replacen("v1.", "v0.", 1);
        assert!(go_mod.contains(&format!("k8s.io/api => k8s.io/api {staging}")));
    }
}

//! `cargo xtask e2e`: build (or reuse) and start the real kube-apiserver, run the ignored tests of
//! `kinformer-e2e` against it, and stop it in every case.

use std::process::Command;

use anyhow::{Context, bail};

use crate::apiserver::start::{self, StartArgs};
use crate::apiserver::state::State;
use crate::apiserver::stop::stop_state;

/// Options of `cargo xtask e2e`.
#[derive(clap::Args)]
pub struct E2eArgs {
    #[command(flatten)]
    start: StartArgs,
    /// Leave the server running afterwards (stop it with `cargo xtask apiserver stop`).
    #[arg(long)]
    keep_running: bool,
    /// Skip the load test against the real server after the suite.
    #[arg(long)]
    skip_loadtest: bool,
    /// Extra arguments for the test binaries (after `--ignored --test-threads=1`), e.g. a filter.
    #[arg(trailing_var_arg = true)]
    test_args: Vec<String>,
}

/// Stops the server when dropped: on success, test failure, error or panic alike.
struct Running(Option<State>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(st) = self.0.take() {
            stop_state(&st);
        }
    }
}

/// Runs `cargo xtask e2e`.
pub fn run(args: &E2eArgs) -> anyhow::Result<()> {
    let st = start::start(&args.start)?;
    eprintln!(
        "kube-apiserver {} at {} (WatchList={})",
        st.k8s_version,
        st.server_url(),
        st.watch_list
    );
    let mut guard = Running(Some(st.clone()));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "test",
            "-p",
            "kinformer-e2e",
            "--",
            "--ignored",
            "--test-threads=1",
        ])
        .args(&args.test_args)
        .env("KINFORMER_E2E_KUBECONFIG", &st.kubeconfig)
        .env("KINFORMER_E2E_ETCD_URL", st.etcd_url())
        .env("KINFORMER_E2E_STATE_DIR", &st.dir)
        .env("KINFORMER_E2E_WATCH_LIST", st.watch_list.to_string())
        .env("KINFORMER_E2E_APISERVER_LOG", &st.apiserver.log)
        .status()
        .context("running cargo test -p kinformer-e2e");
    // The load test against the real server: small N, the cache must match.
    let loadtest = match &status {
        Ok(s) if s.success() && !args.skip_loadtest => Some(real_server_loadtest(&st.kubeconfig)),
        _ => None,
    };
    if args.keep_running {
        guard.0 = None;
        eprintln!("left running; `cargo xtask apiserver stop` ends it");
    }
    drop(guard);
    let status = status?;
    if !status.success() {
        bail!(
            "e2e tests failed ({status}); server logs: {} and {}",
            st.apiserver.log.display(),
            st.etcd.log.display()
        );
    }
    if let Some(result) = loadtest {
        result.with_context(|| {
            format!(
                "load test against kube-apiserver failed; server logs: {} and {}",
                st.apiserver.log.display(),
                st.etcd.log.display()
            )
        })?;
    }
    Ok(())
}

/// `cargo xtask loadtest --kubeconfig FILE --objects 2000 --duration 5`.
fn real_server_loadtest(kubeconfig: &std::path::Path) -> anyhow::Result<()> {
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: crate::loadtest::LoadtestArgs,
    }
    let kubeconfig = kubeconfig.to_string_lossy();
    let args = <Wrapper as clap::Parser>::try_parse_from([
        "loadtest",
        "--kubeconfig",
        &kubeconfig,
        "--objects",
        "2000",
        "--duration",
        "5",
        "--quiet",
    ])?
    .args;
    eprintln!("load test against kube-apiserver: 2000 Pods, 5 s of churn");
    crate::loadtest::run(&args)
}

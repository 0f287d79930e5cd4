//! `cargo xtask e2e`: build (or reuse) and start the real kube-apiserver, run the ignored tests of
//! `kinformer-e2e` against it, and stop it in every case.
//!
//! The test binaries that restart kube-apiserver ([`DISRUPTIVE_TESTS`]) run last, in a `cargo
//! test` of their own, so that no other test sees the server go away.

use std::path::Path;
use std::process::{Command, ExitStatus};

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
    /// Extra arguments for the test binaries (after `--ignored --test-threads=1`), e.g. a filter;
    /// they go to both `cargo test` runs (the regular tests, then the restart tests).
    #[arg(trailing_var_arg = true)]
    test_args: Vec<String>,
}

/// Test binaries of `kinformer-e2e` (`tests/<name>.rs`) that stop and restart kube-apiserver
/// (etcd keeps running): they run after every other test binary, one `cargo test` each.
pub const DISRUPTIVE_TESTS: &[&str] = &["restart"];

/// Stops the server when dropped: on success, test failure, error or panic alike.
struct Running(Option<State>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(st) = self.0.take() {
            // A restart test records the PID of the kube-apiserver it started in the state
            // directory: stop what is recorded there now.
            let current = State::load(&st.dir).unwrap_or(st);
            stop_state(&current);
        }
    }
}

/// `--lib` and `--test <name>` for every test binary of `kinformer-e2e` but the disruptive ones.
fn regular_targets() -> anyhow::Result<Vec<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/kinformer-e2e/tests");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "rs")
            && let Some(stem) = path.file_stem().and_then(|s| s.to_str())
            && !DISRUPTIVE_TESTS.contains(&stem)
        {
            names.push(stem.to_string());
        }
    }
    names.sort();
    let mut targets = vec!["--lib".to_string()];
    for n in names {
        targets.push("--test".into());
        targets.push(n);
    }
    Ok(targets)
}

/// `cargo test -p kinformer-e2e <targets> -- --ignored --test-threads=1 <test_args>` against `st`.
fn cargo_test(st: &State, targets: &[String], test_args: &[String]) -> anyhow::Result<ExitStatus> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(&cargo)
        .args(["test", "-p", "kinformer-e2e"])
        .args(targets)
        .args(["--", "--ignored", "--test-threads=1"])
        .args(test_args)
        .env("KINFORMER_E2E_KUBECONFIG", &st.kubeconfig)
        .env("KINFORMER_E2E_ETCD_URL", st.etcd_url())
        .env("KINFORMER_E2E_STATE_DIR", &st.dir)
        .env("KINFORMER_E2E_WATCH_LIST", st.watch_list.to_string())
        .env(
            "KINFORMER_E2E_SHARDED_LIST_AND_WATCH",
            st.sharded_list_and_watch.to_string(),
        )
        .env("KINFORMER_E2E_APISERVER_LOG", &st.apiserver.log)
        .status()
        .with_context(|| format!("running cargo test -p kinformer-e2e {}", targets.join(" ")))
}

/// Runs `cargo xtask e2e`.
pub fn run(args: &E2eArgs) -> anyhow::Result<()> {
    let st = start::start(&args.start)?;
    eprintln!(
        "kube-apiserver {} at {} (WatchList={}, ShardedListAndWatch={})",
        st.k8s_version,
        st.server_url(),
        st.watch_list,
        st.sharded_list_and_watch
    );
    let mut guard = Running(Some(st.clone()));
    let mut results = vec![(
        "e2e tests".to_string(),
        regular_targets().and_then(|t| cargo_test(&st, &t, &args.test_args)),
    )];
    // Then, serially and last, the tests that restart kube-apiserver.
    for name in DISRUPTIVE_TESTS {
        let targets = ["--test".to_string(), (*name).to_string()];
        results.push((
            format!("e2e tests `{name}` (restarting kube-apiserver)"),
            cargo_test(&st, &targets, &args.test_args),
        ));
    }
    let passed = results
        .iter()
        .all(|(_, r)| r.as_ref().is_ok_and(ExitStatus::success));
    // The load test against the real server: small N, the cache must match.
    let loadtest = (passed && !args.skip_loadtest).then(|| real_server_loadtest(&st.kubeconfig));
    if args.keep_running {
        guard.0 = None;
        eprintln!("left running; `cargo xtask apiserver stop` ends it");
    }
    drop(guard);
    for (what, result) in results {
        let status = result?;
        if !status.success() {
            bail!(
                "{what} failed ({status}); server logs: {} and {}",
                st.apiserver.log.display(),
                st.etcd.log.display()
            );
        }
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
    let kubeconfig = kubeconfig.to_string_lossy();
    eprintln!("load test against kube-apiserver: 2000 Pods, 5 s of churn");
    crate::loadtest::run_with(&[
        "--kubeconfig",
        &kubeconfig,
        "--objects",
        "2000",
        "--duration",
        "5",
        "--quiet",
    ])
    .map(drop)
}

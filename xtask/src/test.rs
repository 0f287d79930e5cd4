//! `cargo xtask test`: every test of the workspace, in one command: the unit,
//! integration and doc tests of every crate, the loom models, the unsafe
//! code's tests under Miri (when the nightly Miri component is installed,
//! see [`crate::miri`]), a short chaos
//! load test against the simulator, then the end-to-end suite
//! against a real kube-apiserver built from the published Go modules, with
//! the WatchList feature on and off.

use std::process::Command;

use anyhow::{Context, bail};
use clap::Parser;

use crate::e2e;

/// Options of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Skip the end-to-end suite (needs Go; CI always runs it).
    #[arg(long)]
    skip_e2e: bool,
    /// Extra arguments passed to `cargo test`.
    #[arg(trailing_var_arg = true)]
    cargo_args: Vec<String>,
}

/// The loom models (`--cfg loom`, in a target directory of their own so
/// that the flag does not rebuild the workspace's main one).
fn loom_models(cargo: &str) -> anyhow::Result<()> {
    let status = Command::new(cargo)
        .args(["test", "--release", "-p", "kinformer-alloc", "--lib"])
        .env("RUSTFLAGS", "--cfg loom")
        .current_dir(crate::workspace_root())
        .env(
            "CARGO_TARGET_DIR",
            crate::workspace_root().join("target/loom"),
        )
        .status()
        .context("running the loom models")?;
    if !status.success() {
        bail!("the loom models failed: {status}");
    }
    Ok(())
}

/// Short load tests against the simulator with every kind of fault
/// (`--faults chaos`: watches closed, a restart that drops the history,
/// 429s and 500s, malformed and truncated lines), on the plain store and on
/// the compact one (`--compact`): the informer must end with the
/// simulator's objects, having met faults and relisted.
fn chaos_loadtest() -> anyhow::Result<()> {
    for (store, seconds) in [(None, "40"), (Some("--compact"), "20")] {
        eprintln!(
            "chaos load test: 3000 Pods, {seconds} s of churn under --faults chaos {store:?}"
        );
        let mut args = vec![
            "--objects",
            "3000",
            "--duration",
            seconds,
            "--churn",
            "500",
            "--faults",
            "chaos",
            "--settle",
            "0",
            "--quiet",
        ];
        args.extend(store);
        let report = crate::loadtest::run_with(&args)?;
        if report.faults_injected == 0 || report.relists == 0 {
            bail!(
                "the chaos load test met {} faults and {} relists: the faults did not reach the informer",
                report.faults_injected,
                report.relists
            );
        }
    }
    Ok(())
}

/// Short load tests of client-go's informers (`--impl client-go`, its Go
/// harness built on the first run): typed Pods in JSON, then metadata-only
/// Pods through metadatainformer in protobuf; each must end with the
/// simulator's objects, having counted the churn.
fn client_go_loadtests() -> anyhow::Result<()> {
    for extra in [&[][..], &["--metadata-only"][..]] {
        eprintln!("client-go load test: 3000 Pods, 5 s of churn {extra:?}");
        let mut args = vec![
            "--impl",
            "client-go",
            "--objects",
            "3000",
            "--duration",
            "5",
            "--churn",
            "500",
            "--settle",
            "0",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let report = crate::loadtest::run_with(&args)?;
        if report.updates_per_second <= 0.0 || report.lag_p99_us == 0 {
            bail!(
                "client-go's handler counted {} updates/s with a lag p99 of {} µs: it saw no churn",
                report.updates_per_second,
                report.lag_p99_us
            );
        }
    }
    Ok(())
}

/// `cargo xtask e2e` with its default options.
#[derive(Parser)]
struct DefaultE2e {
    #[command(flatten)]
    e2e: e2e::E2eArgs,
}

/// Runs the workspace tests, then the end-to-end suite.
pub fn run(args: &TestArgs) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(["test", "--workspace"])
        .args(&args.cargo_args)
        .status()
        .context("running cargo test")?;
    if !status.success() {
        bail!("cargo test failed: {status}");
    }
    loom_models(&cargo)?;
    if crate::miri::installed() {
        crate::miri::run()?;
    } else {
        eprintln!(
            "Miri skipped: the nightly toolchain has no Miri component \
             (rustup component add --toolchain nightly miri rust-src)"
        );
    }
    chaos_loadtest()?;
    client_go_loadtests()?;
    if args.skip_e2e {
        if std::env::var_os("CI").is_some() {
            bail!("--skip-e2e is not allowed in CI");
        }
        eprintln!("end-to-end suite skipped (--skip-e2e)");
        return Ok(());
    }
    // WatchList streaming on (the default), then off: the LIST path.
    // Both feature gates on, then both off (the alpha sharding gate on
    // with WatchList, so sharded WatchList streams are covered).
    e2e::run(&DefaultE2e::parse_from(["e2e", "--sharded-list-and-watch", "true"]).e2e)?;
    e2e::run(&DefaultE2e::parse_from(["e2e", "--watch-list", "false", "--skip-loadtest"]).e2e)
}

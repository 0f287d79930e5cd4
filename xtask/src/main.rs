//! `cargo xtask`: the project's automation.
//!
//! - `cargo xtask test`: the whole test suite (the README's test command).
//! - `cargo xtask loadtest`: fill, sync, churn and verify an informer at scale.
//! - `cargo xtask controllerbench`: kinformer-controller against kube-rs's controller.
//! - `cargo xtask apiserver build|start|stop|env`: upstream kube-apiserver + etcd for e2e tests.
//! - `cargo xtask e2e`: the end-to-end suite against that real kube-apiserver.
//! - `cargo xtask fuzz --seconds N`: the fuzz targets of `fuzz/`, N seconds each.
//! - `cargo xtask miri`: the tests of the library's unsafe code under Miri.
//! - `cargo xtask simbench`: kinformer-sim against its scale targets.

mod apiserver;
mod controllerbench;
mod e2e;
mod fuzz;
mod loadtest;
mod miri;
mod simbench;
mod test;

use clap::{Parser, Subcommand};

/// mimalloc, wrapped in the object arenas that `cargo xtask loadtest
/// --object-arenas` turns on (see `kinformer_alloc`; off, every allocation
/// goes to mimalloc).
#[global_allocator]
static GLOBAL: kinformer_alloc::ObjectArenas<mimalloc::MiMalloc> =
    kinformer_alloc::ObjectArenas::new(mimalloc::MiMalloc);

/// kinformer project automation.
#[derive(Parser)]
#[command(name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every test of the workspace.
    Test(test::TestArgs),
    /// Load-test the informer stack and report figures.
    Loadtest(loadtest::LoadtestArgs),
    /// Benchmark kinformer-controller's Controller against kube-rs's on the simulator.
    Controllerbench(controllerbench::ControllerbenchArgs),
    /// Build, start, stop the upstream kube-apiserver and etcd used by the e2e suite.
    Apiserver(apiserver::ApiserverArgs),
    /// Run the end-to-end suite against a real kube-apiserver (started and stopped here).
    E2e(e2e::E2eArgs),
    /// Measure kinformer-sim against its scale targets (fill, paged LIST, watch fan-out).
    Simbench(simbench::SimbenchArgs),
    /// Run the fuzz targets of the decoders for a bounded time each.
    Fuzz(fuzz::FuzzArgs),
    /// Run the tests of the library's unsafe code under Miri.
    Miri,
}

/// The workspace's root directory (xtask's parent).
fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(
            || std::path::PathBuf::from("."),
            std::path::Path::to_path_buf,
        )
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Test(args) => test::run(&args),
        Command::Loadtest(args) => loadtest::run(&args),
        Command::Controllerbench(args) => controllerbench::run(&args),
        Command::Apiserver(args) => apiserver::run(&args),
        Command::E2e(args) => e2e::run(&args),
        Command::Simbench(args) => simbench::run(&args),
        Command::Fuzz(args) => fuzz::run(&args),
        Command::Miri => miri::run(),
    }
}

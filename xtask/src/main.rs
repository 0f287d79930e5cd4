//! `cargo xtask`: the project's automation.
//!
//! - `cargo xtask test`: the whole test suite (the README's test command).
//! - `cargo xtask loadtest`: fill, sync, churn and verify an informer at scale.

mod loadtest;
mod test;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    }
}

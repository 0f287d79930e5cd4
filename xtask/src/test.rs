//! `cargo xtask test`: every test of the workspace, in one command.

use std::process::Command;

use anyhow::{Context, bail};

/// Options of `cargo xtask test`.
#[derive(clap::Args)]
pub struct TestArgs {
    /// Extra arguments passed to `cargo test`.
    #[arg(trailing_var_arg = true)]
    cargo_args: Vec<String>,
}

/// Runs the unit, integration and doc tests of every crate.
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
    Ok(())
}

//! `cargo xtask fuzz --seconds N`: runs every cargo-fuzz target of `fuzz/`
//! (the decoders of what a server sends) for N seconds each, from its seed
//! corpus in `fuzz/corpus/TARGET`, and reports the executions of each.
//! Fails on any crash, leak or timeout (libFuzzer writes the input to
//! `fuzz/artifacts/TARGET/`). Needs the nightly toolchain (run through
//! `rustup run nightly`); installs `cargo-fuzz` from crates.io when it is
//! missing.

use std::process::Command;

use anyhow::{Context, bail};

/// The targets, as `fuzz/Cargo.toml` names them.
const TARGETS: &[&str] = &[
    "watch_line",
    "object",
    "list_page",
    "watch_body",
    "protobuf",
    "direct_response",
];

/// Options of `cargo xtask fuzz`.
#[derive(clap::Args)]
pub struct FuzzArgs {
    /// Seconds of fuzzing per target.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Only this target (repeatable; default: all).
    #[arg(long)]
    target: Vec<String>,
}

/// `cargo` of the nightly toolchain, through rustup (the `cargo` that
/// runs xtask is the stable toolchain's own binary, which knows no
/// `+nightly`).
pub(crate) fn nightly_cargo() -> Command {
    let mut c = Command::new("rustup");
    c.args(["run", "nightly", "cargo"]);
    c
}

fn cargo_fuzz_installed() -> bool {
    nightly_cargo()
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs the targets (see the module docs).
pub fn run(args: &FuzzArgs) -> anyhow::Result<()> {
    let nightly = nightly_cargo().arg("--version").output();
    if !nightly.as_ref().is_ok_and(|o| o.status.success()) {
        bail!(
            "the nightly toolchain is needed (`rustup toolchain install nightly`): {}",
            nightly.map_or_else(
                |e| e.to_string(),
                |o| String::from_utf8_lossy(&o.stderr).into_owned()
            )
        );
    }
    if !cargo_fuzz_installed() {
        eprintln!("installing cargo-fuzz");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(&cargo)
            .args(["install", "cargo-fuzz", "--locked"])
            .status()
            .context("installing cargo-fuzz")?;
        if !status.success() {
            bail!("cargo install cargo-fuzz failed: {status}");
        }
    }
    let root = crate::workspace_root();
    let targets: Vec<&str> = TARGETS
        .iter()
        .copied()
        .filter(|t| args.target.is_empty() || args.target.iter().any(|a| a == t))
        .collect();
    if targets.is_empty() {
        bail!("no such target; the targets are {}", TARGETS.join(", "));
    }
    let mut results = Vec::new();
    for target in targets {
        // New inputs go to a corpus under target/, the seeds stay as committed.
        let work = root.join("target/fuzz-corpus").join(target);
        std::fs::create_dir_all(&work)?;
        let seeds = root.join("fuzz/corpus").join(target);
        eprintln!("fuzzing {target} for {} s", args.seconds);
        let out = nightly_cargo()
            .args(["fuzz", "run", target])
            .arg(&work)
            .arg(&seeds)
            .args([
                "--",
                &format!("-max_total_time={}", args.seconds),
                "-rss_limit_mb=4096",
                "-timeout=10",
            ])
            .current_dir(&root)
            .output()
            .with_context(|| format!("running cargo fuzz run {target}"))?;
        let log = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            bail!(
                "fuzz target {target} failed ({}):\n{}",
                out.status,
                tail.join("\n")
            );
        }
        let runs = executions(&log)
            .with_context(|| format!("no execution count in the output of {target}"))?;
        let corpus = std::fs::read_dir(&work).map_or(0, |d| d.count());
        results.push((target, runs, corpus));
    }
    println!(
        "{:<16} {:>12} {:>10} {:>8}",
        "target", "executions", "per s", "corpus"
    );
    for (target, runs, corpus) in results {
        let rate = runs / args.seconds.max(1);
        println!("{target:<16} {runs:>12} {rate:>10} {corpus:>8}");
    }
    println!("0 crashes");
    Ok(())
}

/// The run count of libFuzzer's closing line `Done N runs in S second(s)`.
fn executions(log: &str) -> Option<u64> {
    log.lines()
        .rev()
        .find_map(|l| l.strip_prefix("Done ")?.split(' ').next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_closing_line_gives_the_executions() {
        let log = "#2\tINITED\n#4096\tpulse\nDone 123456 runs in 31 second(s)\n";
        assert_eq!(super::executions(log), Some(123_456));
        assert_eq!(super::executions("crash"), None);
    }
}

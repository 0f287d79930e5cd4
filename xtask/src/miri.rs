//! `cargo xtask miri`: the tests of the library's `unsafe` code under Miri
//! (undefined behaviour, aliasing, leaks): the Indexer's trie and its index
//! id sets through their model proptests, and the object arenas. `cargo xtask test` runs it when the nightly toolchain has
//! the Miri component (`rustup component add --toolchain nightly miri
//! rust-src`) and says that it skipped it otherwise.

use std::process::Command;

use anyhow::{Context, bail};

use crate::fuzz::nightly_cargo;

/// One `cargo miri test` run.
struct MiriRun {
    what: &'static str,
    package: &'static str,
    args: &'static [&'static str],
    /// Proptest cases (each is a whole model run under Miri: minutes).
    cases: &'static str,
    flags: &'static str,
}

const RUNS: &[MiriRun] = &[
    MiriRun {
        what: "the trie's model (40 keys, three hash kinds)",
        package: "kinformer-core",
        args: &["--lib", "trie::tests::many_keys"],
        cases: "1",
        flags: "",
    },
    MiriRun {
        what: "the index id sets' model",
        package: "kinformer-core",
        args: &["--lib", "indexer::idset"],
        cases: "2",
        // proptest looks up the working directory for its failure files.
        flags: "-Zmiri-disable-isolation",
    },
    MiriRun {
        what: "the object arenas",
        package: "kinformer-alloc",
        args: &["--lib", "--tests"],
        cases: "1",
        // The reserved range is never given back, by design.
        flags: "-Zmiri-ignore-leaks -Zmiri-disable-isolation",
    },
];

/// Whether the nightly toolchain has Miri.
pub fn installed() -> bool {
    nightly_cargo()
        .args(["miri", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs every Miri run (see the module docs).
pub fn run() -> anyhow::Result<()> {
    if !installed() {
        bail!(
            "Miri is not installed: rustup toolchain install nightly && \
             rustup component add --toolchain nightly miri rust-src"
        );
    }
    for r in RUNS {
        eprintln!(
            "miri: {} (cargo miri test -p {} {})",
            r.what,
            r.package,
            r.args.join(" ")
        );
        let mut cmd: Command = nightly_cargo();
        let status = cmd
            .args(["miri", "test", "-p", r.package])
            .args(r.args)
            .env("PROPTEST_CASES", r.cases)
            .env("MIRIFLAGS", r.flags)
            .current_dir(crate::workspace_root())
            .status()
            .with_context(|| format!("running Miri over {}", r.what))?;
        if !status.success() {
            bail!("Miri failed over {}: {status}", r.what);
        }
    }
    Ok(())
}

//! `cargo xtask loadtest --shards N`: one unsharded informer, then N
//! informers of one shard each (`ShardSelector::uid_shard(i, N)`), each a
//! replica process of its own started one after the other on the same
//! simulator, so each is measured as if on a machine of its own. Each
//! replica is this program's load test with hidden options (`--sim-url`,
//! `--shard-of`, `--keys-out`), no churn, and writes its figures and its
//! cache's keys; this process compares the shards' union with the source
//! (every object in exactly one shard, at its version) and reports
//! per-replica figures against the unsharded one's.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use clap::ValueEnum;
use serde::Serialize;

use super::admin::SimAdmin;
use super::report::Report;
use super::sim_process::SimProcess;
use super::{Impl, LoadtestArgs, Source};

/// The figures of `--shards N`.
#[derive(Debug, Serialize)]
pub struct ShardedReport {
    /// N.
    pub shards: u32,
    /// Objects in the source.
    pub objects: usize,
    /// "protobuf" or "json".
    pub encoding: String,
    /// Whether the simulator applied the selector (false with
    /// `--sim-ignores-shards`: the informers filtered on their side).
    pub server_side_sharding: bool,
    /// Peak RSS of each replica process.
    pub per_replica_peak_rss_bytes: Vec<u64>,
    /// RSS growth of each replica from before its informer started to its
    /// sync: its cache, queues and decode buffers.
    pub per_replica_cache_bytes: Vec<u64>,
    /// Each replica's initial sync.
    pub per_replica_sync_seconds: Vec<f64>,
    /// Each replica's CPU time (user + system).
    pub per_replica_cpu_seconds: Vec<f64>,
    /// The unsharded informer's peak RSS.
    pub unsharded_peak_rss_bytes: u64,
    /// Its RSS growth to its sync.
    pub unsharded_cache_bytes: u64,
    /// Its initial sync.
    pub unsharded_sync_seconds: f64,
    /// Its CPU time.
    pub unsharded_cpu_seconds: f64,
    /// The largest replica's cache against the unsharded cache × N (the
    /// target is at most 1.1).
    pub worst_cache_share_ratio: f64,
    /// Every object of the source in exactly one shard, at its version.
    pub union_matches_source: bool,
    /// The unsharded informer's cache equals the source.
    pub unsharded_matches_source: bool,
}

/// Runs `--shards N` and prints (and with `--json`, writes) the figures.
pub fn run(args: &LoadtestArgs) -> anyhow::Result<()> {
    let n = args.shards.unwrap_or(1).max(1);
    if args.source != Source::Sim || args.kubeconfig.is_some() {
        bail!("--shards needs the sim source");
    }
    if args.implementation != Impl::Kinformer {
        bail!("--shards needs --impl kinformer");
    }
    if args.burst.is_some() || args.informers > 1 || args.relist {
        bail!("--shards takes no --burst, --informers or --relist");
    }
    let sim = SimProcess::start(args)?;
    let dir = tempfile_dir()?;
    let unsharded = replica(args, &sim.url, None, &dir)?;
    let mut shards = Vec::new();
    for i in 0..n {
        shards.push(replica(args, &sim.url, Some((i, n)), &dir)?);
    }
    let truth = source(&sim.url)?;
    let union_matches_source = union_matches(&truth, shards.iter().map(|r| r.keys.as_path()))?;
    let unsharded_matches_source = union_matches(&truth, [unsharded.keys.as_path()])?;
    let cache = |r: &Replica| r.report.steady_rss_bytes.saturating_sub(r.rss_before);
    let unsharded_cache = cache(&unsharded);
    let worst = shards.iter().map(cache).max().unwrap_or(0);
    let report = ShardedReport {
        shards: n,
        objects: args.objects,
        encoding: unsharded.report.encoding.clone().unwrap_or_default(),
        server_side_sharding: !args.sim_ignores_shards,
        per_replica_peak_rss_bytes: shards.iter().map(|r| r.report.peak_rss_bytes).collect(),
        per_replica_cache_bytes: shards.iter().map(cache).collect(),
        per_replica_sync_seconds: shards
            .iter()
            .map(|r| r.report.initial_sync_seconds)
            .collect(),
        per_replica_cpu_seconds: shards.iter().map(|r| r.report.cpu_seconds).collect(),
        unsharded_peak_rss_bytes: unsharded.report.peak_rss_bytes,
        unsharded_cache_bytes: unsharded_cache,
        unsharded_sync_seconds: unsharded.report.initial_sync_seconds,
        unsharded_cpu_seconds: unsharded.report.cpu_seconds,
        worst_cache_share_ratio: worst as f64 * f64::from(n) / unsharded_cache.max(1) as f64,
        union_matches_source,
        unsharded_matches_source,
    };
    print(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
        eprintln!("figures written to {}", path.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !union_matches_source || !unsharded_matches_source {
        bail!("the caches do not match the source");
    }
    Ok(())
}

fn print(r: &ShardedReport) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "shards {} of {} objects ({}), server-side sharding {}",
        r.shards, r.objects, r.encoding, r.server_side_sharding
    );
    println!(
        "unsharded   sync {:6.2} s  CPU {:6.1} s  peak RSS {:8.0} MiB  cache {:8.0} MiB",
        r.unsharded_sync_seconds,
        r.unsharded_cpu_seconds,
        mib(r.unsharded_peak_rss_bytes),
        mib(r.unsharded_cache_bytes)
    );
    for i in 0..r.per_replica_peak_rss_bytes.len() {
        println!(
            "shard {i:<4} sync {:6.2} s  CPU {:6.1} s  peak RSS {:8.0} MiB  cache {:8.0} MiB",
            r.per_replica_sync_seconds[i],
            r.per_replica_cpu_seconds[i],
            mib(r.per_replica_peak_rss_bytes[i]),
            mib(r.per_replica_cache_bytes[i])
        );
    }
    println!(
        "largest shard's cache × N / unsharded cache: {:.3}",
        r.worst_cache_share_ratio
    );
    println!("union matches source: {}", r.union_matches_source);
}

/// A finished replica: its figures, its RSS before its informer started,
/// and the file of its cache's keys.
struct Replica {
    report: Report,
    rss_before: u64,
    keys: PathBuf,
}

/// Runs one replica process to its end.
fn replica(
    args: &LoadtestArgs,
    url: &str,
    shard: Option<(u32, u32)>,
    dir: &Path,
) -> anyhow::Result<Replica> {
    let name = shard.map_or("unsharded".to_string(), |(i, _)| format!("shard-{i}"));
    let (json, keys) = (
        dir.join(format!("{name}.json")),
        dir.join(format!("{name}.keys")),
    );
    let exe = std::env::current_exe().context("this program's path")?;
    let transform = args
        .transform
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_else(|| "none".into());
    let mut cmd = Command::new(exe);
    cmd.arg("loadtest")
        .args(["--sim-url", url])
        .args(["--objects", &args.objects.to_string()])
        .args(["--churn", "0", "--duration", "0", "--readers", "0"])
        .args(["--settle", &args.settle.to_string()])
        .args(["--transform", &transform])
        .arg("--quiet")
        .arg("--json")
        .arg(&json)
        .arg("--keys-out")
        .arg(&keys);
    for (on, flag) in [
        (args.metadata_only, "--metadata-only"),
        (args.no_protobuf, "--no-protobuf"),
        (args.no_watch_list, "--no-watch-list"),
        (args.no_builtin_indexes, "--no-builtin-indexes"),
    ] {
        if on {
            cmd.arg(flag);
        }
    }
    if let Some((i, n)) = shard {
        cmd.args(["--shard-of", &format!("{i}/{n}")]);
    }
    eprintln!("{name}: starting");
    let status = cmd.status().with_context(|| format!("running {name}"))?;
    if !status.success() {
        bail!("{name} failed: {status}");
    }
    let report: Report = serde_json::from_slice(&std::fs::read(&json)?)
        .with_context(|| format!("reading {name}'s figures"))?;
    let rss_before = report.rss_before_bytes;
    Ok(Replica {
        report,
        rss_before,
        keys,
    })
}

/// The source's objects: key → resourceVersion.
fn source(url: &str) -> anyhow::Result<HashMap<String, String>> {
    let rt = super::http_source::runtime()?;
    rt.block_on(async {
        let config = kube::Config::new(url.parse().context("simulator URL")?);
        let admin = SimAdmin {
            client: kube::Client::try_from(config)?,
        };
        admin.truth().await
    })
}

/// Whether the key files hold every object of `truth` exactly once, each
/// at its version.
fn union_matches<'a>(
    truth: &HashMap<String, String>,
    files: impl IntoIterator<Item = &'a Path>,
) -> anyhow::Result<bool> {
    let mut seen = HashSet::new();
    for file in files {
        let text = std::fs::read_to_string(file)?;
        for line in text.lines() {
            let (key, rv) = line.split_once(' ').unwrap_or((line, ""));
            if truth.get(key).map(String::as_str) != Some(rv) {
                tracing::warn!(key, rv, "a cached object not in the source at this version");
                return Ok(false);
            }
            if !seen.insert(key.to_string()) {
                tracing::warn!(key, "an object cached by two shards");
                return Ok(false);
            }
        }
    }
    Ok(seen.len() == truth.len())
}

fn tempfile_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kinformer-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

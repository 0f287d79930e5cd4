//! `cargo xtask controllerbench`: kinformer-controller's `Controller`
//! against kube-runtime's `Controller` and client-go's workqueue with
//! worker goroutines ([`client_go`]), on the load test's simulator.
//!
//! One run, one implementation:
//!
//! 1. the memory a key waiting in a fresh work queue takes (RSS growth of
//!    this process, measured before anything else runs in it);
//! 2. the simulator is started and filled with `--objects` Pods (the load
//!    test's [`connect`](crate::loadtest::http_source::connect)), the
//!    informer and controller are started, and the startup pass is timed
//!    until every key was reconciled once;
//! 3. a full reconcile (`ControllerHandle::reconcile_all`, or kube-rs's
//!    `reconcile_all_on`) is timed until N more reconciles completed;
//! 4. the simulator churns at `--churn` changes/s for `--duration` s; the
//!    time from each change's commit (the simulator's commit-time
//!    annotation, the load test's clock) to the start of the first
//!    reconcile that sees it is recorded;
//! 5. once every key's newest state was reconciled (or 120 s passed), the
//!    keys never reconciled at their newest state are counted and the
//!    controller's cache is compared with the simulator's objects.
//!
//! The reconcile is a no-op: it reads its object from the cache (kinformer:
//! the object it is given and the informer's `Indexer::get`; kube-rs:
//! `Store::get`), records the key as in flight, yields once to the runtime
//! (so that two reconciles of a key running at once would overlap and be
//! counted), and returns "await change".

mod client_go;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Debug;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Context as TaskContext;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{FutureExt, Stream, StreamExt};
use hdrhistogram::Histogram;
use k8s_openapi::api::core::v1::Pod;
use kinformer::controller::{Action, Controller, ControllerStats, ObjectKey, WorkQueue};
use kinformer::{SharedIndexInformer, SharedInformerFactory};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::controller::{ReconcileReason, ReconcileRequest};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::scheduler::{ScheduleRequest, scheduler};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::loadtest::http_source::{self, Connection, Server};
use crate::loadtest::measure::{compare, now_unix_nanos, wait_for};
use crate::loadtest::pods::{self, COMMIT_ANNOTATION};
use crate::loadtest::process::{Proc, reset_peak_rss, rss_bytes};
use crate::loadtest::{Impl, LoadtestArgs, TransformArg, host};

/// Options of `cargo xtask controllerbench`.
#[derive(clap::Args, Debug, Clone)]
pub struct ControllerbenchArgs {
    /// Pods the simulator is filled with.
    #[arg(long, default_value_t = 100_000)]
    pub objects: usize,
    /// Cache and reconcile `PartialObjectMeta<Pod>` instead of `Pod`.
    #[arg(long)]
    pub metadata_only: bool,
    /// Churn rate of the latency phase, changes per second (0 = as fast as
    /// the simulator goes).
    #[arg(long, default_value_t = 10_000)]
    pub churn: u64,
    /// Duration of the latency phase, seconds (0 skips it).
    #[arg(long, default_value_t = 20.0)]
    pub duration: f64,
    /// Reconciles at once (default: each library's own default: 16 for
    /// kinformer-controller, unbounded for kube-rs; client-go has none, and
    /// runs 16 workers).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// The controller under test.
    #[arg(long = "impl", value_enum, default_value = "kinformer")]
    pub implementation: Impl,
    /// Transform applied before caching, as the load test's (non-default;
    /// kube-rs strips `managedFields` after decoding in both cases).
    #[arg(long, value_enum, default_value = "none")]
    pub transform: TransformArg,
    /// Write the figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Hide progress bars.
    #[arg(long)]
    pub quiet: bool,
}

/// The controller's counters, as `kinformer::controller::ControllerStats`
/// (kinformer only).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StatsReport {
    /// Reconciles started.
    pub reconciles: u64,
    /// Reconciles that returned `Ok`.
    pub succeeded: u64,
    /// Reconciles that returned an error.
    pub failed: u64,
    /// Reconciles that panicked.
    pub panicked: u64,
    /// Reconciles that timed out.
    pub timed_out: u64,
    /// Keys taken whose object was not cached (deleted).
    pub skipped_missing: u64,
    /// Reconciles cancelled at shutdown.
    pub cancelled_at_shutdown: u64,
}

impl From<ControllerStats> for StatsReport {
    fn from(s: ControllerStats) -> Self {
        Self {
            reconciles: s.reconciles,
            succeeded: s.succeeded,
            failed: s.failed,
            panicked: s.panicked,
            timed_out: s.timed_out,
            skipped_missing: s.skipped_missing,
            cancelled_at_shutdown: s.cancelled_at_shutdown,
        }
    }
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// "kinformer" or "kube-rs".
    #[serde(rename = "impl")]
    pub implementation: String,
    /// Pods in the simulator at the start.
    pub objects: usize,
    /// Whether `PartialObjectMeta<Pod>` was cached.
    pub metadata_only: bool,
    /// The encoding the informer listed and watched in.
    pub encoding: String,
    /// Requested churn of the latency phase, changes/s (0 = flat out).
    pub churn: u64,
    /// Length of the latency phase, seconds.
    pub duration_seconds: f64,
    /// Reconciles at once (`None`: the library's default).
    pub concurrency: Option<usize>,
    /// What `concurrency: null` means for this implementation.
    pub concurrency_default: String,
    /// Options that are not the libraries' defaults.
    pub non_defaults: Vec<String>,
    /// Seconds waited for the hypervisor to leave the VM alone first.
    pub settle_seconds: f64,
    /// Seconds from the informer's and controller's start to the cache's
    /// initial sync (kinformer; kube-rs does not say).
    pub initial_sync_seconds: Option<f64>,
    /// Seconds from the controller's start (the informer's start, before
    /// its LIST) until every one of the N keys was reconciled once.
    pub startup_seconds: f64,
    /// N / `startup_seconds`.
    pub startup_reconciles_per_second: f64,
    /// Seconds of the full reconcile after the startup (until N more
    /// reconciles completed).
    pub reconcile_all_seconds: f64,
    /// N / `reconcile_all_seconds`: the figure compared.
    pub reconciles_per_second: f64,
    /// Changes committed by the simulator during the latency phase.
    pub changes_made: u64,
    /// Reconciles that saw a change committed during the latency phase
    /// (the latency's sample count).
    pub latency_samples: u64,
    /// Commit on the server → start of the reconcile, median, µs.
    pub queue_latency_p50_us: u64,
    /// Commit on the server → start of the reconcile, 99th percentile, µs.
    pub queue_latency_p99_us: u64,
    /// Commit on the server → start of the reconcile, maximum, µs.
    pub queue_latency_max_us: u64,
    /// Seconds from the end of the churn until every key's newest state was
    /// reconciled (or the 120 s wait ran out).
    pub catch_up_seconds: f64,
    /// Heap growth per key added to a fresh, empty work queue (kinformer:
    /// `WorkQueue<ObjectKey>`; kube-rs: its scheduler's queue of
    /// `ReconcileRequest`s), the key's own allocation included.
    pub bytes_per_queued_key: Option<f64>,
    /// Heap growth per key of building the same keys alone (no queue): the
    /// part of `bytes_per_queued_key` that is the key itself.
    pub bytes_per_key_alone: Option<f64>,
    /// How `bytes_per_queued_key` was measured.
    pub bytes_per_queued_key_method: String,
    /// Keys added for `bytes_per_queued_key`.
    pub queued_keys_measured: usize,
    /// Peak resident memory of this process after the queue measurement
    /// (VmHWM, reset before the simulator started), before the final check.
    pub peak_rss_bytes: u64,
    /// Keys of the simulator's objects at the end whose newest
    /// resourceVersion was never reconciled.
    pub keys_lost: usize,
    /// Times a reconcile started while another of the same key was running.
    pub concurrent_reconciles_of_one_key: u64,
    /// Whether the controller's primary cache holds exactly the simulator's
    /// objects (key and resourceVersion) at the end.
    pub cache_matches_source: bool,
    /// Reconciles counted by the reconcile function, in all.
    pub reconciles_total: u64,
    /// Distinct keys reconciled at least once.
    pub distinct_keys_reconciled: u64,
    /// kinformer-controller's own counters at the end (kinformer only).
    pub controller_stats: Option<StatsReport>,
}

/// A key's state as the reconcile function saw it.
#[derive(Default)]
struct KeyState {
    /// The newest resourceVersion reconciled.
    newest_rv: u64,
    /// Reconciles of the key running now.
    running: u32,
}

/// Shards of the per-key table (the reconciles of different keys rarely
/// wait for each other).
const SHARDS: usize = 64;

/// What every reconcile records: per-key newest version and in-flight
/// count, counts, and the commit → reconcile latency.
struct Tracker {
    shards: Vec<Mutex<HashMap<String, KeyState>>>,
    reconciles: AtomicU64,
    distinct: AtomicU64,
    concurrent: AtomicU64,
    recording: AtomicBool,
    /// Latency is recorded for changes committed from this time on (ns
    /// since the Unix epoch).
    record_from: AtomicU64,
    latency: Mutex<Histogram<u64>>,
}

impl Tracker {
    fn new(objects: usize) -> anyhow::Result<Self> {
        let per = objects / SHARDS + 16;
        Ok(Self {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(HashMap::with_capacity(per)))
                .collect(),
            reconciles: AtomicU64::new(0),
            distinct: AtomicU64::new(0),
            concurrent: AtomicU64::new(0),
            recording: AtomicBool::new(false),
            record_from: AtomicU64::new(u64::MAX),
            latency: Mutex::new(Histogram::new_with_bounds(1, 3_600_000_000, 3)?),
        })
    }

    fn shard(&self, key: &str) -> &Mutex<HashMap<String, KeyState>> {
        // FNV-1a: cheap, and spreads the simulator's names well enough.
        let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        &self.shards[(h % SHARDS as u64) as usize]
    }

    /// A reconcile of `obj` (keyed `key`) starts at `now` (ns since the
    /// Unix epoch).
    fn begin<K: Resource>(&self, key: &str, obj: &K, now: u128) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        let rv: u64 = obj
            .meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let newer = {
            let mut shard = self.shard(key).lock();
            let state = match shard.get_mut(key) {
                Some(s) => s,
                None => {
                    self.distinct.fetch_add(1, Ordering::Relaxed);
                    shard.entry(key.to_owned()).or_default()
                }
            };
            if state.running > 0 {
                self.concurrent.fetch_add(1, Ordering::Relaxed);
            }
            state.running += 1;
            let newer = rv > state.newest_rv;
            state.newest_rv = state.newest_rv.max(rv);
            newer
        };
        if !newer || !self.recording.load(Ordering::Relaxed) {
            return;
        }
        let commit = obj
            .meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(COMMIT_ANNOTATION))
            .and_then(|v| v.parse::<u128>().ok());
        let from = u128::from(self.record_from.load(Ordering::Relaxed));
        if let Some(commit) = commit.filter(|c| *c >= from) {
            let us = u64::try_from(now.saturating_sub(commit) / 1000).unwrap_or(u64::MAX);
            let _ = self.latency.lock().record(us.clamp(1, 3_600_000_000));
        }
    }

    /// The reconcile of `key` ends.
    fn end(&self, key: &str) {
        if let Some(s) = self.shard(key).lock().get_mut(key) {
            s.running = s.running.saturating_sub(1);
        }
    }

    /// The whole reconcile: record, yield once, end.
    async fn reconcile<K: Resource>(&self, key: &str, obj: &K, now: u128) {
        self.begin(key, obj, now);
        tokio::task::yield_now().await;
        self.end(key);
    }

    fn start_recording(&self) {
        let from = u64::try_from(now_unix_nanos()).unwrap_or(u64::MAX);
        self.record_from.store(from, Ordering::SeqCst);
        self.recording.store(true, Ordering::SeqCst);
    }

    /// Keys of `truth` whose newest version was not reconciled.
    fn lost(&self, truth: &HashMap<String, String>) -> usize {
        truth
            .iter()
            .filter(|(key, rv)| {
                let want: u64 = rv.parse().unwrap_or(0);
                self.shard(key)
                    .lock()
                    .get(key.as_str())
                    .is_none_or(|s| s.newest_rv < want)
            })
            .count()
    }
}

/// What the benchmark reads of the reconciles: this process's [`Tracker`],
/// or the one in client-go's harness.
trait Reconciled {
    /// Distinct keys reconciled at least once.
    fn distinct(&self) -> u64;
    /// Reconciles started.
    fn reconciles(&self) -> u64;
    /// Records the latency of changes committed from now on.
    fn start_recording(&self) -> anyhow::Result<()>;
    /// Keys of `truth` whose newest version was not reconciled.
    fn lost(&self, truth: &HashMap<String, String>) -> anyhow::Result<usize>;
    /// The figures at the end.
    fn figures(&self) -> anyhow::Result<Figures>;
}

/// What a [`Reconciled`] says at the end.
struct Figures {
    /// Commit → reconcile latency, µs.
    latency: Histogram<u64>,
    /// Reconciles that started while another of the same key ran.
    concurrent: u64,
    /// Reconciles started.
    reconciles: u64,
    /// Distinct keys reconciled.
    distinct: u64,
}

impl Reconciled for Tracker {
    fn distinct(&self) -> u64 {
        self.distinct.load(Ordering::Relaxed)
    }
    fn reconciles(&self) -> u64 {
        self.reconciles.load(Ordering::SeqCst)
    }
    fn start_recording(&self) -> anyhow::Result<()> {
        Tracker::start_recording(self);
        Ok(())
    }
    fn lost(&self, truth: &HashMap<String, String>) -> anyhow::Result<usize> {
        Ok(Tracker::lost(self, truth))
    }
    fn figures(&self) -> anyhow::Result<Figures> {
        Ok(Figures {
            latency: self.latency.lock().clone(),
            concurrent: self.concurrent.load(Ordering::SeqCst),
            reconciles: self.reconciles.load(Ordering::SeqCst),
            distinct: self.distinct.load(Ordering::SeqCst),
        })
    }
}

/// The `namespace/name` key of an object.
fn key_of<K: Resource>(obj: &K) -> ObjectKey {
    let m = obj.meta();
    ObjectKey::new(
        m.namespace.as_deref(),
        m.name.as_deref().unwrap_or_default(),
    )
}

/// A controller under test, started.
struct Running {
    /// Asks for a full reconcile.
    reconcile_all: Box<dyn Fn()>,
    /// Every cached (key, resourceVersion).
    cache: Box<dyn Fn() -> Vec<(String, Option<String>)>>,
    /// Whether the informer's cache has synced (`None`: not known, kube-rs).
    synced: Box<dyn Fn() -> Option<bool>>,
    /// Shuts the controller (and its informer) down; its counters.
    stop: StopFn,
    /// The process whose memory is measured.
    process: Proc,
}

/// Shuts a controller under test down on the runtime given; its counters
/// (kinformer only).
type StopFn = Box<dyn FnOnce(&tokio::runtime::Runtime) -> anyhow::Result<Option<ControllerStats>>>;

/// Runs the benchmark and prints (and optionally writes) the figures.
pub fn run(args: &ControllerbenchArgs) -> anyhow::Result<()> {
    kinformer_alloc::set_enabled(false);
    let queued_keys = args.objects.max(1);
    let bytes_per_queued_key = match args.implementation {
        Impl::Kinformer => Some(kinformer_queue_bytes(queued_keys)),
        Impl::KubeRs => Some(kube_rs_queue_bytes(queued_keys)?),
        Impl::ClientGo => Some(client_go::queue_bytes(queued_keys)?),
    };
    if !reset_peak_rss() {
        tracing::warn!("cannot reset the peak RSS; it includes the queue measurement");
    }
    let mut lt_args = vec![
        "--objects".to_string(),
        args.objects.to_string(),
        "--churn".into(),
        args.churn.to_string(),
        "--duration".into(),
        args.duration.to_string(),
        "--impl".into(),
        args.implementation.as_str().into(),
    ];
    if args.metadata_only {
        lt_args.push("--metadata-only".into());
    }
    let transform = match args.transform {
        TransformArg::None => "none",
        TransformArg::StripManagedFields => "strip-managed-fields",
        TransformArg::SkipManagedFields => "skip-managed-fields",
    };
    lt_args.extend(["--transform".to_string(), transform.to_string()]);
    if args.quiet {
        lt_args.push("--quiet".into());
    }
    let lt_refs: Vec<&str> = lt_args.iter().map(String::as_str).collect();
    let lt = crate::loadtest::parse_args(&lt_refs)?;
    let rt = http_source::runtime()?;
    let (server, conn) = http_source::connect(&lt, &rt)?;
    let settled = host::settle(lt.settle_max());
    let mut report = if args.metadata_only {
        bench::<PartialObjectMeta<Pod>>(args, &lt, &rt, &conn, &server, |f| {
            f.metadata_informer::<Pod>()
        })?
    } else {
        bench::<Pod>(args, &lt, &rt, &conn, &server, |f| f.informer::<Pod>())?
    };
    report.settle_seconds = settled.waited.as_secs_f64();
    report.bytes_per_queued_key = bytes_per_queued_key.map(|b| b.per_queued_key);
    report.bytes_per_key_alone = bytes_per_queued_key.map(|b| b.per_key_alone);
    report.queued_keys_measured = queued_keys;
    report.encoding = if lt.protobuf() { "protobuf" } else { "json" }.into();
    print_table(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("figures written to {}", path.display());
    }
    if !report.cache_matches_source {
        bail!("the controller's cache does not match the source");
    }
    Ok(())
}

/// One run against an already filled source.
fn bench<K>(
    args: &ControllerbenchArgs,
    lt: &LoadtestArgs,
    rt: &tokio::runtime::Runtime,
    conn: &Connection,
    server: &Server,
    informer: impl Fn(&SharedInformerFactory) -> SharedIndexInformer<K>,
) -> anyhow::Result<BenchReport>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let n = args.objects;
    let t0 = Instant::now();
    let (tracker, running): (Arc<dyn Reconciled>, Running) = match args.implementation {
        Impl::Kinformer => {
            let tracker = Arc::new(Tracker::new(n)?);
            let running = start_kinformer(args, lt, rt, conn, server, &informer, &tracker)?;
            (tracker, running)
        }
        Impl::KubeRs => {
            let tracker = Arc::new(Tracker::new(n)?);
            (
                tracker.clone(),
                start_kube_rs::<K>(args, rt, conn, &tracker)?,
            )
        }
        Impl::ClientGo => {
            let (tracker, running) = client_go::start(args, lt, server)?;
            (tracker, running)
        }
    };

    // (a) The startup pass.
    let bar = crate::loadtest::progress::bar(args.quiet, n as u64, "startup reconciles");
    let mut sync_seconds = None;
    let mut polls = 0u64;
    let started = wait_for(Duration::from_secs(900), || {
        polls += 1;
        if sync_seconds.is_none() && (running.synced)() == Some(true) {
            sync_seconds = Some(t0.elapsed().as_secs_f64());
        }
        let done = tracker.distinct();
        if polls.is_multiple_of(20) {
            bar.set_position(done);
        }
        done >= n as u64
    });
    let startup_seconds = t0.elapsed().as_secs_f64();
    bar.finish();
    if !started {
        let _ = (running.stop)(rt);
        bail!("the startup pass did not reconcile every key within 900 s");
    }

    // (b) The full reconcile.
    let before = tracker.reconciles();
    let t1 = Instant::now();
    (running.reconcile_all)();
    let passed = wait_for(Duration::from_secs(600), || {
        tracker.reconciles() >= before + n as u64
    });
    let reconcile_all_seconds = t1.elapsed().as_secs_f64();
    if !passed {
        let _ = (running.stop)(rt);
        bail!("the full reconcile did not reach {n} reconciles within 600 s");
    }
    // Let the pass's stragglers (none are expected) finish before the churn.
    std::thread::sleep(Duration::from_millis(200));

    // (c) Latency under churn.
    tracker.start_recording()?;
    let changes_made = if args.duration > 0.0 {
        let bar = crate::loadtest::progress::bar(
            args.quiet,
            u64::try_from(lt.churn_duration().as_millis()).unwrap_or(u64::MAX),
            "churn ms",
        );
        let _ticker = crate::loadtest::progress::Ticker::start(bar);
        rt.block_on(server.churn(lt))?
    } else {
        0
    };
    let churn_end = Instant::now();
    let peak_rss = running.process.peak_rss_bytes();
    let truth = rt.block_on(server.truth())?;
    let caught_up = wait_for(Duration::from_secs(120), || {
        std::thread::sleep(Duration::from_millis(95));
        tracker.lost(&truth).unwrap_or(usize::MAX) == 0
    });
    let catch_up_seconds = churn_end.elapsed().as_secs_f64();
    if !caught_up {
        tracing::warn!("some keys' newest state was not reconciled within 120 s");
    }
    let keys_lost = tracker.lost(&truth)?;
    let mut mismatches = usize::MAX;
    for attempt in 0..10 {
        let pairs = (running.cache)();
        mismatches = compare(
            pairs.iter().map(|(k, v)| (k.as_str(), v.as_deref())),
            &truth,
        );
        if mismatches == 0 {
            break;
        }
        tracing::info!(attempt, mismatches, "cache not yet converged");
        std::thread::sleep(Duration::from_secs(1));
    }
    let figures = tracker.figures()?;
    let stats = (running.stop)(rt)?;
    let (p50, p99, max, samples) = {
        let h = &figures.latency;
        (
            h.value_at_quantile(0.5),
            h.value_at_quantile(0.99),
            h.max(),
            h.len(),
        )
    };
    let mut non_defaults = Vec::new();
    if let Some(c) = args.concurrency {
        non_defaults.push(format!("concurrency {c}"));
    }
    Ok(BenchReport {
        implementation: args.implementation.as_str().into(),
        objects: n,
        metadata_only: args.metadata_only,
        encoding: String::new(),
        churn: args.churn,
        duration_seconds: args.duration,
        concurrency: args.concurrency,
        concurrency_default: match args.implementation {
            Impl::Kinformer => format!("{}", kinformer::controller::DEFAULT_CONCURRENCY),
            Impl::KubeRs => "unbounded".into(),
            Impl::ClientGo => format!(
                "{} workers (client-go has no default; kinformer-controller's)",
                client_go::DEFAULT_WORKERS
            ),
        },
        non_defaults,
        settle_seconds: 0.0,
        initial_sync_seconds: sync_seconds,
        startup_seconds,
        startup_reconciles_per_second: n as f64 / startup_seconds,
        reconcile_all_seconds,
        reconciles_per_second: n as f64 / reconcile_all_seconds,
        changes_made,
        latency_samples: samples,
        queue_latency_p50_us: p50,
        queue_latency_p99_us: p99,
        queue_latency_max_us: max,
        catch_up_seconds,
        bytes_per_queued_key: None,
        bytes_per_key_alone: None,
        bytes_per_queued_key_method: match args.implementation {
            Impl::ClientGo => "RSS growth (VmRSS, after a GC) of a fresh harness process from \
                adding N freshly built namespace/name keys to an empty workqueue"
                .into(),
            _ => "RSS growth (VmRSS) of this process, before the simulator and informer start, \
                from adding N freshly built namespace/name keys to an empty queue"
                .into(),
        },
        queued_keys_measured: 0,
        peak_rss_bytes: peak_rss,
        keys_lost,
        concurrent_reconciles_of_one_key: figures.concurrent,
        cache_matches_source: mismatches == 0,
        reconciles_total: figures.reconciles,
        distinct_keys_reconciled: figures.distinct,
        controller_stats: stats.map(StatsReport::from),
    })
}

/// What kinformer's reconcile shares.
struct KinformerCtx<K: Resource + Send + Sync + 'static> {
    indexer: kinformer::Indexer<K>,
    tracker: Arc<Tracker>,
}

/// The load test's kinformer informer, with a `kinformer_controller`
/// controller over it.
fn start_kinformer<K>(
    args: &ControllerbenchArgs,
    lt: &LoadtestArgs,
    rt: &tokio::runtime::Runtime,
    conn: &Connection,
    server: &Server,
    informer: &impl Fn(&SharedInformerFactory) -> SharedIndexInformer<K>,
    tracker: &Arc<Tracker>,
) -> anyhow::Result<Running>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let factory = http_source::kinformer_factory(lt, rt, conn, server);
    let informer = informer(&factory);
    let mut controller = Controller::new(&informer);
    if let Some(c) = args.concurrency {
        controller = controller.concurrency(c);
    }
    let handle = controller.handle();
    let ctx = Arc::new(KinformerCtx {
        indexer: informer.indexer(),
        tracker: Arc::clone(tracker),
    });
    // The controller first, so that its handler is there before the list.
    let task = rt.spawn(controller.run(
        |obj: Arc<K>, ctx: Arc<KinformerCtx<K>>| async move {
            let now = now_unix_nanos();
            let key = key_of(&*obj);
            let cached = ctx.indexer.get(key.as_str());
            let seen = cached.as_deref().unwrap_or(&*obj);
            ctx.tracker.reconcile(key.as_str(), seen, now).await;
            Ok::<_, Infallible>(Action::await_change())
        },
        |_, _: &Infallible, _| Action::backoff(),
        ctx,
    ));
    factory.start()?;
    let synced_informer = informer.clone();
    let cache_informer = informer.clone();
    let all = handle.clone();
    Ok(Running {
        reconcile_all: Box::new(move || all.reconcile_all()),
        cache: Box::new(move || {
            cache_informer
                .indexer()
                .snapshot()
                .iter()
                .map(|(k, o)| (k.to_string(), o.meta().resource_version.clone()))
                .collect()
        }),
        synced: Box::new(move || Some(synced_informer.has_synced())),
        process: Proc::This,
        stop: Box::new(move |rt| {
            handle.shutdown();
            let stats = rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(60), task).await })
                .context("the controller did not stop within 60 s")?
                .context("the controller task")?
                .context("the controller")?;
            factory.shutdown_blocking();
            Ok(Some(stats))
        }),
    })
}

/// What kube-rs's reconcile shares.
struct KubeRsCtx<K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static> {
    store: Store<K>,
    tracker: Arc<Tracker>,
}

/// kube-runtime's `Controller::new` over `Api::all` (its own watcher and
/// reflector `Store`, with kube's defaults).
fn start_kube_rs<K>(
    args: &ControllerbenchArgs,
    rt: &tokio::runtime::Runtime,
    conn: &Connection,
    tracker: &Arc<Tracker>,
) -> anyhow::Result<Running>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let api: Api<K> = Api::all(conn.client.clone());
    let (all_tx, all_rx) = futures::channel::mpsc::unbounded::<()>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let controller = if args.transform == TransformArg::None {
        kube::runtime::Controller::new(api, watcher::Config::default())
    } else {
        // What `Controller::new` runs, with `managedFields` cleared before
        // the store (kube-rs has no decode-time pruning).
        let (reader, writer) = kube::runtime::reflector::store();
        let objects = watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|o| o.managed_fields_mut().clear())
            .reflect(writer)
            .applied_objects();
        kube::runtime::Controller::for_stream(objects, reader)
    };
    let mut controller = controller
        .reconcile_all_on(all_rx)
        .graceful_shutdown_on(stop_rx.map(|_| ()));
    if let Some(c) = args.concurrency {
        controller = controller.with_config(
            kube::runtime::controller::Config::default()
                .concurrency(u16::try_from(c).context("--concurrency above 65535")?),
        );
    }
    let store = controller.store();
    let ctx = Arc::new(KubeRsCtx {
        store: store.clone(),
        tracker: Arc::clone(tracker),
    });
    let task = rt.spawn(
        controller
            .run(
                |obj: Arc<K>, ctx: Arc<KubeRsCtx<K>>| async move {
                    let now = now_unix_nanos();
                    let key = key_of(&*obj);
                    let cached = ctx.store.get(&ObjectRef::from_obj(&*obj));
                    let seen = cached.as_deref().unwrap_or(&*obj);
                    ctx.tracker.reconcile(key.as_str(), seen, now).await;
                    Ok::<_, Infallible>(kube::runtime::controller::Action::await_change())
                },
                |_, _: &Infallible, _| kube::runtime::controller::Action::await_change(),
                ctx,
            )
            .for_each(|r| {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "kube-rs controller");
                }
                std::future::ready(())
            }),
    );
    let cache_store = store.clone();
    Ok(Running {
        reconcile_all: Box::new(move || {
            let _ = all_tx.unbounded_send(());
        }),
        cache: Box::new(move || {
            cache_store
                .state()
                .iter()
                .map(|o| (key_of(&**o).to_string(), o.resource_version()))
                .collect()
        }),
        synced: Box::new(|| None),
        process: Proc::This,
        stop: Box::new(move |rt| {
            let _ = stop_tx.send(());
            rt.block_on(async { tokio::time::timeout(Duration::from_secs(60), task).await })
                .context("the kube-rs controller did not stop within 60 s")?
                .context("the kube-rs controller task")?;
            Ok(None)
        }),
    })
}

/// Per-key RSS growth of a queue measurement: with the keys' own
/// allocations, and of the keys alone.
#[derive(Debug, Clone, Copy)]
struct QueueBytes {
    /// Bytes per key added to the empty queue, the key's allocation included.
    per_queued_key: f64,
    /// Bytes per key of building the same keys alone (into a vector
    /// allocated beforehand).
    per_key_alone: f64,
}

/// RSS growth per key of `make(i)` for `0..n`, kept in a vector allocated
/// before the first measurement (returned, to be dropped after the queue's
/// measurement: freed memory would be reused by it).
fn keys_alone<T>(n: usize, make: impl Fn(usize) -> T) -> (f64, Vec<T>) {
    let mut keys = Vec::with_capacity(n);
    let before = rss_bytes();
    keys.extend((0..n).map(make));
    let after = rss_bytes();
    (after.saturating_sub(before) as f64 / n as f64, keys)
}

/// Bytes of RSS growth per key from adding `n` fresh keys to an empty
/// `kinformer::controller::WorkQueue`.
fn kinformer_queue_bytes(n: usize) -> QueueBytes {
    let make = |i: usize| ObjectKey::new(Some(&pods::namespace(i)), &pods::name(i));
    let (per_key_alone, alone) = keys_alone(n, make);
    let queue: WorkQueue = WorkQueue::new();
    let before = rss_bytes();
    for i in 0..n {
        queue.add(make(i));
    }
    let after = rss_bytes();
    check_len(queue.len(), n);
    drop(queue);
    drop(alone);
    QueueBytes {
        per_queued_key: after.saturating_sub(before) as f64 / n as f64,
        per_key_alone,
    }
}

/// Bytes of RSS growth per key from scheduling `n` fresh
/// `ReconcileRequest`s (an hour ahead, so none is emitted) in kube-rs's
/// scheduler, the queue of its controller.
fn kube_rs_queue_bytes(n: usize) -> anyhow::Result<QueueBytes> {
    let make = |i: usize| ReconcileRequest {
        obj_ref: ObjectRef::<Pod>::new(&pods::name(i)).within(&pods::namespace(i)),
        reason: ReconcileReason::ObjectUpdated,
    };
    let (per_key_alone, alone) = keys_alone(n, make);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let _entered = rt.enter();
    let run_at = tokio::time::Instant::now() + Duration::from_secs(3600);
    let before = rss_bytes();
    let requests = futures::stream::iter((0..n).map(move |i| ScheduleRequest {
        message: make(i),
        run_at,
    }))
    // The scheduler ends with its requests: they never end.
    .chain(futures::stream::pending());
    let mut queue = Box::pin(scheduler(requests));
    let waker = futures::task::noop_waker();
    let mut cx = TaskContext::from_waker(&waker);
    // One poll takes every request into the queue (the requests are ready
    // until the pending tail) and emits nothing (every deadline is an hour
    // away).
    let polled = Pin::as_mut(&mut queue).poll_next(&mut cx);
    let after = rss_bytes();
    if polled.is_ready() {
        bail!("kube-rs's scheduler emitted or ended early");
    }
    drop(queue);
    drop(alone);
    Ok(QueueBytes {
        per_queued_key: after.saturating_sub(before) as f64 / n as f64,
        per_key_alone,
    })
}

/// Warns when the queue holds another number of keys than added.
fn check_len(len: usize, n: usize) {
    if len != n {
        tracing::warn!(len, n, "the work queue holds another number of keys");
    }
}

/// Prints the figures as a table on stdout.
fn print_table(r: &BenchReport) {
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
    let rows: Vec<(&str, String)> = vec![
        ("impl", r.implementation.clone()),
        ("objects", r.objects.to_string()),
        ("metadata only", r.metadata_only.to_string()),
        ("encoding", r.encoding.clone()),
        (
            "concurrency",
            r.concurrency.map_or_else(
                || format!("default ({})", r.concurrency_default),
                |c| c.to_string(),
            ),
        ),
        ("initial sync s", opt(r.initial_sync_seconds)),
        ("startup pass s", format!("{:.2}", r.startup_seconds)),
        (
            "startup reconciles/s",
            format!("{:.0}", r.startup_reconciles_per_second),
        ),
        ("reconcile_all s", format!("{:.3}", r.reconcile_all_seconds)),
        ("reconciles/s", format!("{:.0}", r.reconciles_per_second)),
        (
            "churn /s, s",
            format!("{}, {}", r.churn, r.duration_seconds),
        ),
        ("changes made", r.changes_made.to_string()),
        ("latency samples", r.latency_samples.to_string()),
        ("queue latency p50 µs", r.queue_latency_p50_us.to_string()),
        ("queue latency p99 µs", r.queue_latency_p99_us.to_string()),
        ("queue latency max µs", r.queue_latency_max_us.to_string()),
        ("catch-up s", format!("{:.2}", r.catch_up_seconds)),
        ("bytes/queued key", opt(r.bytes_per_queued_key)),
        ("bytes/key alone", opt(r.bytes_per_key_alone)),
        (
            "peak RSS MiB",
            format!("{:.0}", r.peak_rss_bytes as f64 / 1048576.0),
        ),
        ("keys lost", r.keys_lost.to_string()),
        (
            "concurrent reconciles of a key",
            r.concurrent_reconciles_of_one_key.to_string(),
        ),
        ("cache matches source", r.cache_matches_source.to_string()),
        ("reconciles in all", r.reconciles_total.to_string()),
    ];
    for (k, v) in rows {
        println!("{k:<32} {v}");
    }
    if let Some(s) = r.controller_stats {
        println!("{:<32} {s:?}", "controller stats");
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn cm(name: &str, rv: u64, commit: u128) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm.metadata.resource_version = Some(rv.to_string());
        cm.metadata.annotations = Some(
            [(COMMIT_ANNOTATION.to_string(), commit.to_string())]
                .into_iter()
                .collect(),
        );
        cm
    }

    #[test]
    fn a_second_reconcile_of_a_running_key_is_counted() {
        let t = Tracker::new(10).unwrap();
        let a = cm("a", 1, 0);
        t.begin("ns/a", &a, 0);
        t.begin("ns/b", &cm("b", 1, 0), 0);
        assert_eq!(t.concurrent.load(Ordering::Relaxed), 0);
        t.begin("ns/a", &a, 0);
        assert_eq!(t.concurrent.load(Ordering::Relaxed), 1);
        t.end("ns/a");
        t.end("ns/a");
        t.begin("ns/a", &a, 0);
        assert_eq!(t.concurrent.load(Ordering::Relaxed), 1);
        assert_eq!(t.distinct.load(Ordering::Relaxed), 2);
        assert_eq!(t.reconciles.load(Ordering::Relaxed), 4);
    }

    #[test]
    fn latency_is_recorded_once_per_new_version_committed_while_recording() {
        let t = Tracker::new(10).unwrap();
        let now = now_unix_nanos();
        t.begin("ns/a", &cm("a", 1, now), now + 5_000_000);
        t.end("ns/a");
        assert_eq!(t.latency.lock().len(), 0, "not recording yet");
        t.start_recording();
        let commit = now_unix_nanos();
        t.begin("ns/a", &cm("a", 2, commit), commit + 3_000_000);
        t.end("ns/a");
        t.begin("ns/a", &cm("a", 2, commit), commit + 9_000_000);
        t.end("ns/a");
        let h = t.latency.lock();
        assert_eq!(h.len(), 1, "the same version again is not a new sample");
        assert!((2_990..=3_010).contains(&h.max()));
    }

    #[test]
    fn keys_whose_newest_version_was_not_reconciled_are_lost() {
        let t = Tracker::new(10).unwrap();
        t.begin("ns/a", &cm("a", 5, 0), 0);
        t.begin("ns/b", &cm("b", 3, 0), 0);
        let truth: HashMap<String, String> = [("ns/a", "5"), ("ns/b", "4"), ("ns/c", "1")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(t.lost(&truth), 2);
    }
}

//! The load test's figures: a summary table and the JSON document.

use serde::{Deserialize, Serialize};

use super::measure::worst_tick;

/// Everything a load test measured.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Report {
    /// "sim", "synthetic" or "kubeconfig".
    pub source: String,
    /// Implementation under test ("kinformer" or "kube-rs").
    pub implementation: String,
    /// Resource kind.
    pub kind: String,
    /// Objects filled before the initial sync.
    pub objects: usize,
    /// Whether decoded objects were laid out in per-object chunks
    /// (`kinformer_alloc`'s object arenas; kinformer only).
    pub object_arenas: bool,
    /// Watch events the simulator kept for resuming watches (sim source).
    pub sim_history: Option<usize>,
    /// How the simulator cut watch events into chunks (sim source).
    pub sim_watch_chunks: Option<String>,
    /// The encoding the informer listed and watched in (`json`,
    /// `protobuf`); `-` without HTTP.
    pub encoding: Option<String>,
    /// How kinformer's watches reached the server (`direct`, `client`);
    /// `-` for kube-rs and without HTTP.
    pub watch_transport: Option<String>,
    /// Informers run side by side.
    pub informers: usize,
    /// Handlers per informer.
    pub handlers: usize,
    /// Seconds waited for the hypervisor to leave the VM alone before the
    /// informers started (`--settle`).
    pub settle_seconds: f64,
    /// False when `--settle` ran out with the hypervisor still at work.
    pub settled: bool,
    /// CPU seconds the hypervisor took from the VM's CPUs during the
    /// initial sync (all CPUs; `None` where the kernel does not say).
    pub stolen_sync_seconds: Option<f64>,
    /// CPU seconds the hypervisor took during the churn or burst.
    pub stolen_churn_seconds: Option<f64>,
    /// Seconds from the start of the list until every informer and handler synced.
    pub initial_sync_seconds: f64,
    /// Changes the source made during churn.
    pub changes_made: u64,
    /// Whether the changes were a `--burst` (committed while the watches
    /// were held, timed from their release).
    pub burst: bool,
    /// Changes per second observed by the first handler during churn.
    pub updates_per_second: f64,
    /// Source commit → handler call latency, median, microseconds.
    pub lag_p50_us: u64,
    /// Source commit → handler call latency, 99th percentile, microseconds.
    pub lag_p99_us: u64,
    /// Seconds at the start of the churn left out of the lag percentiles.
    pub lag_warmup_seconds: f64,
    /// The worst lag (µs) of the changes committed in each 100 ms of the
    /// lag window (0: none recorded in it).
    pub lag_worst_per_tick_us: Vec<u64>,
    /// Lister reads per second during churn (all reader threads).
    pub reads_per_second: f64,
    /// Peak resident memory of this process while the informers synced,
    /// churned and relisted: up to the final comparison with the source,
    /// whose truth map and key lists belong to the harness.
    pub peak_rss_bytes: u64,
    /// Peak resident memory of this process including the final comparison.
    pub peak_rss_with_check_bytes: u64,
    /// Resident memory before the informers started.
    pub rss_before_bytes: u64,
    /// Resident memory after the initial sync.
    pub steady_rss_bytes: u64,
    /// With `--relist`: RSS just before the forced relist.
    pub relist_rss_before_bytes: Option<u64>,
    /// With `--relist`: peak RSS during the forced relist.
    pub relist_peak_rss_bytes: Option<u64>,
    /// With `--relist`: relist peak RSS / RSS before it.
    pub relist_peak_ratio: Option<f64>,
    /// (steady RSS − RSS before the fill) / objects.
    pub bytes_per_object: u64,
    /// CPU seconds (user + system) of this process.
    pub cpu_seconds: f64,
    /// Full relists performed.
    pub relists: u64,
    /// Watch restarts.
    pub watch_restarts: u64,
    /// Faults injected by the source.
    pub faults_injected: u64,
    /// Handler panics caught.
    pub handler_panics: u64,
    /// Deltas per batch the first informer's pool applied while the clock
    /// ran (`None` for kube-rs, or when no batch was published then).
    pub deltas_per_batch: Option<f64>,
    /// True only after every key and resourceVersion of the cache was
    /// compared with the source.
    pub cache_matches_source: bool,
    /// Whether the cache was a compact one (`--compact`).
    pub compact: bool,
    /// Lister `get` of an object not read lately (compact store: one that
    /// decoded), median and 99th percentile, ns; `None` where not measured
    /// (kube-rs, client-go, the synthetic source).
    pub get_cold_p50_ns: Option<u64>,
    /// The 99th percentile of the cold gets, ns.
    pub get_cold_p99_ns: Option<u64>,
    /// Lister `get` of a few objects read again and again (the median of
    /// per-round means), ns.
    pub get_hot_p50_ns: Option<u64>,
}

impl Report {
    /// Prints the summary table.
    pub fn print_table(&self) {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let rows: Vec<(&str, String)> = vec![
            ("source", self.source.clone()),
            ("implementation", self.implementation.clone()),
            ("kind", self.kind.clone()),
            ("objects", self.objects.to_string()),
            (
                "store",
                if self.compact { "compact" } else { "plain" }.to_string(),
            ),
            (
                "object arenas",
                if self.object_arenas { "on" } else { "off" }.to_string(),
            ),
            (
                "sim history (events)",
                self.sim_history.map_or("-".into(), |n| n.to_string()),
            ),
            (
                "sim watch chunks",
                self.sim_watch_chunks.clone().unwrap_or_else(|| "-".into()),
            ),
            (
                "encoding",
                self.encoding.clone().unwrap_or_else(|| "-".into()),
            ),
            (
                "watch transport",
                self.watch_transport.clone().unwrap_or_else(|| "-".into()),
            ),
            (
                "informers x handlers",
                format!("{} x {}", self.informers, self.handlers),
            ),
            (
                "host settle",
                format!(
                    "{:.1} s{}",
                    self.settle_seconds,
                    if self.settled {
                        ""
                    } else {
                        " (host still busy)"
                    }
                ),
            ),
            (
                "CPU stolen: sync / churn",
                match (self.stolen_sync_seconds, self.stolen_churn_seconds) {
                    (Some(a), Some(b)) => format!("{a:.2} s / {b:.2} s"),
                    _ => "-".into(),
                },
            ),
            (
                "initial sync",
                format!("{:.2} s", self.initial_sync_seconds),
            ),
            (
                if self.burst {
                    "changes made (burst)"
                } else {
                    "changes made"
                },
                self.changes_made.to_string(),
            ),
            (
                "updates/s (handler)",
                format!("{:.0}", self.updates_per_second),
            ),
            (
                "lag p50 / p99",
                if self.burst {
                    "- (burst: includes the hold)".into()
                } else if self.lag_warmup_seconds > 0.0 {
                    format!(
                        "{} us / {} us (after {} s)",
                        self.lag_p50_us, self.lag_p99_us, self.lag_warmup_seconds
                    )
                } else {
                    format!("{} us / {} us", self.lag_p50_us, self.lag_p99_us)
                },
            ),
            (
                "worst lag (committed at)",
                match (self.burst, worst_tick(&self.lag_worst_per_tick_us)) {
                    (false, Some((at, us))) => {
                        format!("{us} us (in the 100 ms from {at:.1} s)")
                    }
                    _ => "-".into(),
                },
            ),
            ("reads/s", format!("{:.0}", self.reads_per_second)),
            (
                "get cold p50 / p99, hot p50",
                match (
                    self.get_cold_p50_ns,
                    self.get_cold_p99_ns,
                    self.get_hot_p50_ns,
                ) {
                    (Some(a), Some(b), Some(c)) => format!("{a} ns / {b} ns, {c} ns"),
                    _ => "-".into(),
                },
            ),
            ("peak RSS", format!("{:.1} MiB", mib(self.peak_rss_bytes))),
            (
                "peak RSS with the check",
                format!("{:.1} MiB", mib(self.peak_rss_with_check_bytes)),
            ),
            (
                "steady RSS",
                format!("{:.1} MiB", mib(self.steady_rss_bytes)),
            ),
            ("bytes/object", self.bytes_per_object.to_string()),
            (
                "relist peak / before",
                match (self.relist_peak_rss_bytes, self.relist_peak_ratio) {
                    (Some(p), Some(r)) => format!("{:.1} MiB ({r:.2}x)", mib(p)),
                    _ => "-".into(),
                },
            ),
            ("CPU", format!("{:.1} s", self.cpu_seconds)),
            (
                "deltas per batch",
                self.deltas_per_batch
                    .map_or_else(|| "-".into(), |d| format!("{d:.0}")),
            ),
            (
                "relists / watch restarts",
                format!("{} / {}", self.relists, self.watch_restarts),
            ),
            ("faults injected", self.faults_injected.to_string()),
            ("handler panics", self.handler_panics.to_string()),
            (
                "cache matches source",
                self.cache_matches_source.to_string(),
            ),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        println!("{:-<1$}", "", width + 24);
        for (k, v) in rows {
            println!("{k:<width$}  {v}");
        }
        println!("{:-<1$}", "", width + 24);
    }
}

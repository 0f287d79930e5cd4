//! Measuring instruments shared by every load-test source: a handler that
//! records lag and counts events, reader threads, and the final comparison.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use kinformer_core::{DeletedObject, ResourceEventHandler};
use kube_core::Resource;
use parking_lot::Mutex;

use super::pods::COMMIT_ANNOTATION;

/// Nanoseconds since the Unix epoch.
pub fn now_unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// What a [`LagHandler`] observed; shared with the driver.
pub struct LagStats {
    /// Events delivered.
    pub events: AtomicU64,
    /// Events delivered while recording (during churn).
    pub recorded: AtomicU64,
    /// Whether events are being counted in [`LagStats::recorded`] (churn or
    /// burst phase).
    pub recording: AtomicBool,
    /// Whether their lag is recorded too (churn phase; a burst's lag
    /// includes the hold and is not reported, so it is not recorded).
    pub recording_lag: AtomicBool,
    /// Lag is recorded only for changes committed from this time on
    /// (nanoseconds since the Unix epoch; see `--lag-warmup`).
    pub lag_from_unix_nanos: AtomicU64,
    /// Commit → handler latency, recorded during churn.
    pub lag: Mutex<LagRecord>,
}

/// The lag figures of a run (see [`LagRecord`]).
pub struct LagFigures {
    /// Median, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// [`LagRecord::worst_per_tick_us`].
    pub worst_per_tick_us: Vec<u64>,
}

/// Commits per step of [`LagRecord::worst_per_tick_us`].
pub const LAG_TICK: Duration = Duration::from_millis(100);

/// Ticks kept at most (an hour of churn).
const MAX_TICKS: usize = 36_000;

/// Commit → handler latency recorded during churn: its distribution, and
/// the worst lag of the changes committed in each [`LAG_TICK`], which says
/// where in the churn a tail comes from (the host taking back freed memory,
/// for one, shows as spikes about 2 s apart).
pub struct LagRecord {
    /// Latency in microseconds.
    pub histogram: Histogram<u64>,
    /// Worst latency (µs) of the changes committed in each tick from the
    /// start of the lag window (the churn's start plus `--lag-warmup`); 0
    /// where none was recorded.
    pub worst_per_tick_us: Vec<u64>,
}

impl LagRecord {
    fn new() -> anyhow::Result<Self> {
        Ok(Self {
            histogram: Histogram::new_with_bounds(1, 3_600_000_000, 3)?,
            worst_per_tick_us: Vec::new(),
        })
    }

    /// Records `lag_us` for a change committed `since_start` after the
    /// start of the lag window.
    pub fn record(&mut self, since_start: Duration, lag_us: u64) {
        let lag_us = lag_us.clamp(1, 3_600_000_000);
        let _ = self.histogram.record(lag_us);
        let tick = (since_start.as_nanos() / LAG_TICK.as_nanos()) as usize;
        if tick < MAX_TICKS {
            if tick >= self.worst_per_tick_us.len() {
                self.worst_per_tick_us.resize(tick + 1, 0);
            }
            let worst = &mut self.worst_per_tick_us[tick];
            *worst = (*worst).max(lag_us);
        }
    }

    /// What the report shows of it.
    pub fn figures(&self) -> LagFigures {
        LagFigures {
            p50_us: self.histogram.value_at_quantile(0.5),
            p99_us: self.histogram.value_at_quantile(0.99),
            worst_per_tick_us: self.worst_per_tick_us.clone(),
        }
    }
}

/// The tick with the worst lag in `worst_per_tick_us` (see
/// [`LagRecord::worst_per_tick_us`]): its start in seconds from the start
/// of the lag window, and the lag in microseconds.
pub fn worst_tick(worst_per_tick_us: &[u64]) -> Option<(f64, u64)> {
    let (i, &lag) = worst_per_tick_us
        .iter()
        .enumerate()
        .max_by_key(|&(_, lag)| *lag)?;
    (lag > 0).then(|| ((i as u128 * LAG_TICK.as_millis()) as f64 / 1000.0, lag))
}

impl LagStats {
    /// Empty statistics.
    pub fn new() -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Self {
            events: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            recording: AtomicBool::new(false),
            recording_lag: AtomicBool::new(false),
            lag_from_unix_nanos: AtomicU64::new(0),
            lag: Mutex::new(LagRecord::new()?),
        }))
    }

    /// Starts counting events; lag is recorded for changes committed
    /// `lag_warmup` from now on.
    pub fn start_recording(&self, lag_warmup: Duration) {
        let from = now_unix_nanos() + lag_warmup.as_nanos();
        self.lag_from_unix_nanos
            .store(u64::try_from(from).unwrap_or(u64::MAX), Ordering::SeqCst);
        self.recording_lag.store(true, Ordering::SeqCst);
        self.recording.store(true, Ordering::SeqCst);
    }

    /// Starts counting events without recording their lag (a burst): the
    /// handler then does not read each object's commit time, nor take the
    /// clock and the histogram's lock per event, for a figure the report
    /// leaves out.
    pub fn start_counting(&self) {
        self.recording_lag.store(false, Ordering::SeqCst);
        self.recording.store(true, Ordering::SeqCst);
    }
}

/// A handler that counts events and records commit → call latency.
pub struct LagHandler(pub Arc<LagStats>);

impl LagHandler {
    /// Counts one event for `obj` and records its lag while recording.
    pub fn observe<K: Resource>(&self, obj: &K) {
        self.0.events.fetch_add(1, Ordering::Relaxed);
        if !self.0.recording.load(Ordering::Relaxed) {
            return;
        }
        self.0.recorded.fetch_add(1, Ordering::Relaxed);
        if !self.0.recording_lag.load(Ordering::Relaxed) {
            return;
        }
        let commit = obj
            .meta()
            .annotations
            .as_ref()
            .and_then(|a| a.get(COMMIT_ANNOTATION))
            .and_then(|v| v.parse::<u128>().ok());
        let lag_from = u128::from(self.0.lag_from_unix_nanos.load(Ordering::Relaxed));
        if let Some(commit) = commit.filter(|c| *c >= lag_from) {
            let lag_us = now_unix_nanos().saturating_sub(commit) / 1000;
            let since_start = u64::try_from(commit - lag_from).unwrap_or(u64::MAX);
            self.0.lag.lock().record(
                Duration::from_nanos(since_start),
                u64::try_from(lag_us).unwrap_or(u64::MAX),
            );
        }
    }
}

impl<K: Resource + Send + Sync + 'static> ResourceEventHandler<K> for LagHandler {
    fn on_add(&mut self, obj: &Arc<K>, _: bool) {
        self.observe(&**obj);
    }
    fn on_update(&mut self, _: &Arc<K>, new: &Arc<K>) {
        self.observe(&**new);
    }
    fn on_delete(&mut self, obj: &DeletedObject<K>) {
        self.observe(&**obj.object());
    }
}

/// Threads reading a cache by key until stopped.
pub struct Readers {
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Readers {
    /// Starts `n` readers calling `read(key)` over `keys` in a scattered order.
    pub fn start(
        n: usize,
        keys: Vec<String>,
        read: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let keys = Arc::new(keys);
        let read = Arc::new(read);
        let threads = (0..n)
            .map(|t| {
                let (stop, reads, keys, read) =
                    (stop.clone(), reads.clone(), keys.clone(), read.clone());
                std::thread::spawn(move || {
                    if keys.is_empty() {
                        return;
                    }
                    let mut i = t * 7919;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1000 {
                            i = i.wrapping_add(104_729);
                            std::hint::black_box(read(&keys[i % keys.len()]));
                        }
                        reads.fetch_add(1000, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        Self {
            stop,
            reads,
            threads,
        }
    }

    /// Stops the readers and returns the number of reads made.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        self.reads.load(Ordering::Relaxed)
    }
}

/// Compares a cache's (key, resourceVersion) pairs with the truth. Returns
/// the number of differences (0 = identical).
pub fn compare<'a>(
    cache: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    truth: &HashMap<String, String>,
) -> usize {
    let mut seen = 0usize;
    let mut mismatches = 0usize;
    for (key, rv) in cache {
        match truth.get(key) {
            Some(want) if Some(want.as_str()) == rv => seen += 1,
            other => {
                if mismatches < 5 {
                    tracing::error!(key, want = ?other, got = ?rv, "cache differs from the source");
                }
                mismatches += 1;
            }
        }
    }
    mismatches + truth.len().saturating_sub(seen)
}

/// Polls `cond` every 5 ms until true or the timeout expires.
pub fn wait_for(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = std::time::Instant::now();
    while !cond() {
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    fn committed_now() -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.annotations = Some(
            [(COMMIT_ANNOTATION.to_string(), now_unix_nanos().to_string())]
                .into_iter()
                .collect(),
        );
        cm
    }

    #[test]
    fn changes_committed_during_the_lag_warmup_count_but_are_not_in_the_lag() {
        let stats = LagStats::new().unwrap();
        let handler = LagHandler(Arc::clone(&stats));
        handler.observe(&committed_now());
        assert_eq!(
            stats.recorded.load(Ordering::Relaxed),
            0,
            "not recording yet"
        );
        stats.start_recording(Duration::from_secs(3600));
        handler.observe(&committed_now());
        assert_eq!(stats.recorded.load(Ordering::Relaxed), 1);
        assert_eq!(
            stats.lag.lock().histogram.len(),
            0,
            "committed within the warm-up"
        );
        stats.start_recording(Duration::ZERO);
        handler.observe(&committed_now());
        assert_eq!(stats.recorded.load(Ordering::Relaxed), 2);
        assert_eq!(stats.lag.lock().histogram.len(), 1);
        assert_eq!(stats.events.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn a_burst_counts_events_without_recording_their_lag() {
        let stats = LagStats::new().unwrap();
        let handler = LagHandler(Arc::clone(&stats));
        stats.start_counting();
        handler.observe(&committed_now());
        handler.observe(&committed_now());
        assert_eq!(stats.recorded.load(Ordering::Relaxed), 2);
        assert_eq!(stats.lag.lock().histogram.len(), 0);
    }

    #[test]
    fn the_worst_lag_is_kept_per_tick_of_commit_time() {
        let mut lag = LagRecord::new().unwrap();
        assert_eq!(worst_tick(&lag.worst_per_tick_us), None, "nothing recorded");
        lag.record(Duration::from_millis(30), 2_000);
        lag.record(Duration::from_millis(250), 9_000);
        lag.record(Duration::from_millis(260), 120_000);
        lag.record(Duration::from_millis(299), 4_000);
        assert_eq!(lag.worst_per_tick_us, vec![2_000, 0, 120_000]);
        assert_eq!(worst_tick(&lag.worst_per_tick_us), Some((0.2, 120_000)));
        assert_eq!(lag.histogram.len(), 4);
        // Past the last tick kept: in the histogram only.
        lag.record(LAG_TICK * MAX_TICKS as u32, 7);
        assert_eq!(lag.worst_per_tick_us.len(), 3);
        assert_eq!(lag.histogram.len(), 5);
    }
}

//! Measuring instruments shared by every load-test source: a handler that
//! records lag and counts events, reader threads, and the final comparison.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{DeletedObject, Indexer, NAMESPACE_INDEX, ResourceEventHandler};
use parking_lot::Mutex;

use super::pods::{COMMIT_ANNOTATION, NAMESPACES};

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
    /// Whether lag is being recorded (churn phase).
    pub recording: AtomicBool,
    /// Commit → handler latency in microseconds, recorded during churn.
    pub lag_us: Mutex<Histogram<u64>>,
}

impl LagStats {
    /// Empty statistics.
    pub fn new() -> anyhow::Result<Arc<Self>> {
        Ok(Arc::new(Self {
            events: AtomicU64::new(0),
            recorded: AtomicU64::new(0),
            recording: AtomicBool::new(false),
            lag_us: Mutex::new(Histogram::new_with_bounds(1, 3_600_000_000, 3)?),
        }))
    }
}

/// A handler that counts events and records commit → call latency.
pub struct LagHandler(pub Arc<LagStats>);

impl LagHandler {
    fn observe(&self, pod: &Pod) {
        self.0.events.fetch_add(1, Ordering::Relaxed);
        if !self.0.recording.load(Ordering::Relaxed) {
            return;
        }
        self.0.recorded.fetch_add(1, Ordering::Relaxed);
        let commit = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(COMMIT_ANNOTATION))
            .and_then(|v| v.parse::<u128>().ok());
        if let Some(commit) = commit {
            let lag_us = now_unix_nanos().saturating_sub(commit) / 1000;
            let _ = self
                .0
                .lag_us
                .lock()
                .record(lag_us.clamp(1, 3_600_000_000) as u64);
        }
    }
}

impl ResourceEventHandler<Pod> for LagHandler {
    fn on_add(&mut self, obj: &Arc<Pod>, _: bool) {
        self.observe(obj);
    }
    fn on_update(&mut self, _: &Arc<Pod>, new: &Arc<Pod>) {
        self.observe(new);
    }
    fn on_delete(&mut self, obj: &DeletedObject<Pod>) {
        self.observe(obj.object());
    }
}

/// Threads reading the cache (a get and a namespace list in turn) until stopped.
pub struct Readers {
    stop: Arc<AtomicBool>,
    reads: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Readers {
    /// Starts `n` readers over keys `key(0..objects)`.
    pub fn start(
        n: usize,
        indexer: &Indexer<Pod>,
        objects: usize,
        key: fn(usize) -> String,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let keys: Arc<Vec<String>> = Arc::new((0..objects.min(100_000)).map(key).collect());
        let threads = (0..n)
            .map(|t| {
                let (stop, reads, keys, indexer) =
                    (stop.clone(), reads.clone(), keys.clone(), indexer.clone());
                std::thread::spawn(move || {
                    let mut i = t * 7919;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..1000 {
                            i = i.wrapping_add(104_729);
                            std::hint::black_box(indexer.get(&keys[i % keys.len().max(1)]));
                        }
                        let ns = format!("ns-{}", i % NAMESPACES);
                        std::hint::black_box(
                            indexer
                                .index_keys(NAMESPACE_INDEX, &ns)
                                .map(|k| k.len())
                                .ok(),
                        );
                        reads.fetch_add(1001, Ordering::Relaxed);
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

/// Compares every key and resourceVersion of the cache with the truth.
/// Returns the number of mismatches (0 = identical).
pub fn compare(indexer: &Indexer<Pod>, truth: &HashMap<String, String>) -> usize {
    let snapshot = indexer.snapshot();
    let mut mismatches = 0;
    for (key, rv) in truth {
        match snapshot.get(key) {
            Some(obj) if obj.metadata.resource_version.as_deref() == Some(rv.as_str()) => {}
            other => {
                if mismatches < 5 {
                    tracing::error!(key, want = rv, got = ?other.map(|o| o.metadata.resource_version.clone()), "cache differs");
                }
                mismatches += 1;
            }
        }
    }
    let extra = snapshot
        .keys()
        .filter(|k| !truth.contains_key(k.as_str()))
        .count();
    mismatches + extra
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

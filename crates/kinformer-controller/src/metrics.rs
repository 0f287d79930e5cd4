//! Metrics: client-go's workqueue metrics, read in code or exported to
//! Prometheus.
//!
//! The hot path pays little: counters are plain integers updated under the
//! queue's mutex, which add/get/done hold anyway, and the two histograms are
//! lock-free (three relaxed atomic adds an observation), observed after the
//! mutex is released. Depth, unfinished work and the
//! longest-running item are not maintained at all: they are computed from the
//! queue's state when read, which costs one pass over the items being
//! processed (as many as there are workers).
//!
//! Exported names, each with the label `name` (the queue's name):
//!
//! | metric | type | meaning |
//! | --- | --- | --- |
//! | `workqueue_depth` | gauge | items ready to be handed out |
//! | `workqueue_adds_total` | counter | adds that made an item dirty |
//! | `workqueue_queue_duration_seconds` | histogram | from add to get |
//! | `workqueue_work_duration_seconds` | histogram | from get to done |
//! | `workqueue_unfinished_work_seconds` | gauge | summed age of work in progress |
//! | `workqueue_longest_running_processor_seconds` | gauge | age of the oldest work in progress |
//! | `workqueue_retries_total` | counter | delayed adds (rate-limited ones included) |

use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Weak};

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::queue::{Shared, WorkQueue};

/// Count and sum of a duration histogram.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DurationStats {
    /// Observations.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
}

/// A reading of a queue's metrics, from [`WorkQueue::metrics`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WorkQueueMetrics {
    /// The queue's name.
    pub name: String,
    /// Items ready to be handed out (`workqueue_depth`).
    pub depth: usize,
    /// Items handed out and not yet done.
    pub processing: usize,
    /// Items waiting for a delay to pass.
    pub delayed: usize,
    /// Adds that made an item dirty (`workqueue_adds_total`); adds of an item
    /// already waiting are not counted.
    pub adds_total: u64,
    /// Delayed adds, rate-limited ones included (`workqueue_retries_total`).
    pub retries_total: u64,
    /// Time from add to get (`workqueue_queue_duration_seconds`).
    pub queue_duration: DurationStats,
    /// Time from get to done (`workqueue_work_duration_seconds`).
    pub work_duration: DurationStats,
    /// Summed age of the work in progress (`workqueue_unfinished_work_seconds`).
    pub unfinished_work_seconds: f64,
    /// Age of the oldest work in progress
    /// (`workqueue_longest_running_processor_seconds`).
    pub longest_running_processor_seconds: f64,
}

/// Upper bounds of the histogram buckets, in nanoseconds: client-go's 10 ns
/// to 10 s by factors of 10 (an implicit `+Inf` bucket follows).
const BUCKET_BOUNDS_NS: [u64; 10] = [
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    10_000_000_000,
];

/// A lock-free duration histogram: one atomic add per bucket, count and sum.
#[derive(Debug, Default)]
pub(crate) struct DurationHistogram {
    /// Per bucket (not cumulative); the last is `+Inf`.
    buckets: [AtomicU64; BUCKET_BOUNDS_NS.len() + 1],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl DurationHistogram {
    pub(crate) fn observe_ns(&self, ns: u64) {
        let bucket = BUCKET_BOUNDS_NS
            .iter()
            .position(|bound| ns <= *bound)
            .unwrap_or(BUCKET_BOUNDS_NS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> DurationStats {
        DurationStats {
            count: self.count.load(Ordering::Relaxed),
            sum_seconds: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    pub(crate) fn encode(&self, mut encoder: MetricEncoder<'_>) -> fmt::Result {
        let stats = self.stats();
        let buckets: Vec<(f64, u64)> = BUCKET_BOUNDS_NS
            .iter()
            .map(|bound| *bound as f64 / 1e9)
            .chain(std::iter::once(f64::INFINITY))
            .zip(&self.buckets)
            .map(|(bound, count)| (bound, count.load(Ordering::Relaxed)))
            .collect();
        encoder.encode_histogram::<NoLabelSet>(stats.sum_seconds, stats.count, &buckets, None)
    }
}

/// What a collector reads from a queue, whatever its item type.
trait Source: Send + Sync {
    fn snapshot(&self) -> WorkQueueMetrics;
    fn queue_duration(&self) -> &DurationHistogram;
    fn work_duration(&self) -> &DurationHistogram;
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Source for Shared<T> {
    fn snapshot(&self) -> WorkQueueMetrics {
        let now_ns = self.now_ns();
        let state = self.state.lock();
        let (mut unfinished_ns, mut longest_ns) = (0u128, 0u64);
        for started_ns in state.processing.values() {
            let age = now_ns.saturating_sub(*started_ns);
            unfinished_ns += u128::from(age);
            longest_ns = longest_ns.max(age);
        }
        WorkQueueMetrics {
            name: self.name.clone(),
            depth: state.len(),
            processing: state.processing.len(),
            delayed: state.delay.len(),
            adds_total: state.adds_total,
            retries_total: state.retries_total,
            queue_duration: self.queue_duration.stats(),
            work_duration: self.work_duration.stats(),
            unfinished_work_seconds: unfinished_ns as f64 / 1e9,
            longest_running_processor_seconds: longest_ns as f64 / 1e9,
        }
    }

    fn queue_duration(&self) -> &DurationHistogram {
        &self.queue_duration
    }

    fn work_duration(&self) -> &DurationHistogram {
        &self.work_duration
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// Reads the queue's metrics now.
    ///
    /// ```
    /// use kinformer_controller::WorkQueue;
    ///
    /// let queue: WorkQueue<u32> = WorkQueue::new();
    /// queue.add(1);
    /// queue.add(1);
    /// queue.add(2);
    /// let metrics = queue.metrics();
    /// assert_eq!((metrics.depth, metrics.adds_total), (2, 2));
    /// ```
    pub fn metrics(&self) -> WorkQueueMetrics {
        self.shared().snapshot()
    }

    /// Exports this queue's metrics from `registry`, named `workqueue_*` with
    /// the label `name` (see the table in the [`WorkQueueCollector`] docs).
    ///
    /// Each call adds one collector that writes its own metric families: to
    /// export several queues from one registry, add them to one
    /// [`WorkQueueCollector`] instead, so that each family appears once.
    ///
    /// ```
    /// use kinformer_controller::WorkQueue;
    /// use prometheus_client::{encoding::text::encode, registry::Registry};
    ///
    /// let queue: WorkQueue<u32> = WorkQueue::builder().name("pods").build();
    /// let mut registry = Registry::default();
    /// queue.register(&mut registry);
    /// queue.add(7);
    ///
    /// let mut text = String::new();
    /// encode(&mut text, &registry).unwrap();
    /// assert!(text.contains(r#"workqueue_depth{name="pods"} 1"#));
    /// ```
    pub fn register(&self, registry: &mut Registry) {
        let collector = WorkQueueCollector::new();
        collector.add(self);
        registry.register_collector(Box::new(collector));
    }
}

/// Exports the metrics of several queues as one set of metric families.
///
/// A Prometheus [`Collector`]: register it once, then add queues (before or
/// after registering; it is a shared handle). It holds the queues weakly: a
/// dropped queue stops being exported.
///
/// | metric | type | meaning |
/// | --- | --- | --- |
/// | `workqueue_depth` | gauge | items ready to be handed out |
/// | `workqueue_adds_total` | counter | adds that made an item dirty |
/// | `workqueue_queue_duration_seconds` | histogram | from add to get |
/// | `workqueue_work_duration_seconds` | histogram | from get to done |
/// | `workqueue_unfinished_work_seconds` | gauge | summed age of work in progress |
/// | `workqueue_longest_running_processor_seconds` | gauge | age of the oldest work in progress |
/// | `workqueue_retries_total` | counter | delayed adds (rate-limited ones included) |
///
/// ```
/// use kinformer_controller::{WorkQueue, WorkQueueCollector};
/// use prometheus_client::{encoding::text::encode, registry::Registry};
///
/// let pods: WorkQueue<u32> = WorkQueue::builder().name("pods").build();
/// let nodes: WorkQueue<u32> = WorkQueue::builder().name("nodes").build();
/// let collector = WorkQueueCollector::new();
/// collector.add(&pods);
/// collector.add(&nodes);
/// let mut registry = Registry::default();
/// collector.register(&mut registry);
///
/// let mut text = String::new();
/// encode(&mut text, &registry).unwrap();
/// assert_eq!(text.matches("# TYPE workqueue_depth gauge").count(), 1);
/// assert!(text.contains(r#"workqueue_depth{name="nodes"} 0"#));
/// ```
#[derive(Clone, Default)]
pub struct WorkQueueCollector {
    queues: Arc<Mutex<Vec<Weak<dyn Source>>>>,
}

impl WorkQueueCollector {
    /// A collector exporting no queue yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Exports `queue` too.
    pub fn add<T: Eq + Hash + Clone + Send + Sync + 'static>(&self, queue: &WorkQueue<T>) {
        let shared: Arc<dyn Source> = Arc::clone(queue.shared()) as Arc<dyn Source>;
        self.queues.lock().push(Arc::downgrade(&shared));
    }

    /// Registers this collector (a clone of the handle) with `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }

    fn live_queues(&self) -> Vec<Arc<dyn Source>> {
        let mut queues = self.queues.lock();
        queues.retain(|queue| queue.strong_count() > 0);
        queues.iter().filter_map(Weak::upgrade).collect()
    }
}

impl fmt::Debug for WorkQueueCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueCollector")
            .field("queues", &self.queues.lock().len())
            .finish()
    }
}

/// One queue's reading, with what the histograms need.
struct Reading {
    source: Arc<dyn Source>,
    metrics: WorkQueueMetrics,
}

fn encode_each(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    metric_type: MetricType,
    readings: &[Reading],
    mut write: impl FnMut(&Reading, MetricEncoder<'_>) -> fmt::Result,
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
    for reading in readings {
        let labels = [("name", reading.metrics.name.as_str())];
        write(reading, family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for WorkQueueCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let readings: Vec<Reading> = self
            .live_queues()
            .into_iter()
            .map(|source| Reading {
                metrics: source.snapshot(),
                source,
            })
            .collect();
        if readings.is_empty() {
            return Ok(());
        }
        let enc = &mut encoder;
        encode_each(
            enc,
            "workqueue_depth",
            "Current depth of the work queue: items ready to be handed out.",
            MetricType::Gauge,
            &readings,
            |r, mut m| m.encode_gauge(&r.metrics.depth),
        )?;
        encode_each(
            enc,
            "workqueue_adds",
            "Adds that made an item dirty.",
            MetricType::Counter,
            &readings,
            |r, mut m| m.encode_counter::<NoLabelSet, _, u64>(&r.metrics.adds_total, None),
        )?;
        encode_each(
            enc,
            "workqueue_queue_duration_seconds",
            "Seconds an item waits in the work queue before a worker takes it.",
            MetricType::Histogram,
            &readings,
            |r, m| r.source.queue_duration().encode(m),
        )?;
        encode_each(
            enc,
            "workqueue_work_duration_seconds",
            "Seconds a worker spends on an item, from get to done.",
            MetricType::Histogram,
            &readings,
            |r, m| r.source.work_duration().encode(m),
        )?;
        encode_each(
            enc,
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress, summed over the items not yet done; \
             a value that keeps growing suggests stuck workers.",
            MetricType::Gauge,
            &readings,
            |r, mut m| m.encode_gauge(&r.metrics.unfinished_work_seconds),
        )?;
        encode_each(
            enc,
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest-running item in progress has been processed.",
            MetricType::Gauge,
            &readings,
            |r, mut m| m.encode_gauge(&r.metrics.longest_running_processor_seconds),
        )?;
        encode_each(
            enc,
            "workqueue_retries",
            "Delayed adds handled by the work queue, rate-limited ones included.",
            MetricType::Counter,
            &readings,
            |r, mut m| m.encode_counter::<NoLabelSet, _, u64>(&r.metrics.retries_total, None),
        )?;
        Ok(())
    }
}

//! [`ControllerStats`]: what a controller has done so far, read in code or
//! exported to Prometheus ([`ControllerCollector`]).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::controller::ControllerHandle;
use crate::metrics::{DurationHistogram, DurationStats, WorkQueueCollector};

/// The live counters behind [`ControllerStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) reconciles: AtomicU64,
    pub(crate) succeeded: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) panicked: AtomicU64,
    pub(crate) timed_out: AtomicU64,
    pub(crate) skipped_missing: AtomicU64,
    pub(crate) mapper_panics: AtomicU64,
    pub(crate) error_policy_panics: AtomicU64,
    pub(crate) in_flight: AtomicU64,
    pub(crate) cancelled_at_shutdown: AtomicU64,
    pub(crate) max_concurrency: AtomicU64,
    pub(crate) reconcile_time: DurationHistogram,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> ControllerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ControllerStats {
            reconciles: get(&self.reconciles),
            succeeded: get(&self.succeeded),
            failed: get(&self.failed),
            panicked: get(&self.panicked),
            timed_out: get(&self.timed_out),
            skipped_missing: get(&self.skipped_missing),
            mapper_panics: get(&self.mapper_panics),
            error_policy_panics: get(&self.error_policy_panics),
            in_flight: get(&self.in_flight),
            cancelled_at_shutdown: get(&self.cancelled_at_shutdown),
            reconcile_time: self.reconcile_time.stats(),
        }
    }
}

/// Counts of a controller's reconciles and of what went wrong around them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ControllerStats {
    /// Reconciles started.
    pub reconciles: u64,
    /// Reconciles that returned `Ok`.
    pub succeeded: u64,
    /// Reconciles that returned an error (handed to the error policy).
    pub failed: u64,
    /// Reconciles that panicked (caught; the key is retried with backoff).
    pub panicked: u64,
    /// Reconciles cancelled by the per-reconcile timeout (the key is retried
    /// with backoff).
    pub timed_out: u64,
    /// Keys taken from the queue whose object is not in the primary cache
    /// (deleted, or never existed: a mapper's key of no object). Not
    /// reconciled, and not an error.
    pub skipped_missing: u64,
    /// Key mappers (`watches`) that panicked; the event was dropped.
    pub mapper_panics: u64,
    /// Error policies that panicked; the key was retried with backoff.
    pub error_policy_panics: u64,
    /// Reconciles running now.
    pub in_flight: u64,
    /// Reconciles still running when the shutdown timeout expired, and
    /// cancelled.
    pub cancelled_at_shutdown: u64,
    /// Time spent in reconciles that finished (returned, panicked or timed
    /// out).
    pub reconcile_time: DurationStats,
}

/// A controller's name and counters, as a collector holds them.
type Exported = (Arc<str>, Weak<Counters>);

/// Exports controllers' counters, and their work queues' metrics, as one
/// set of metric families, with controller-runtime's names (label
/// `controller`: the controller's name, its queue's) so that its dashboards
/// apply; the queues' are client-go's `workqueue_*` (label `name`).
///
/// | metric | type | meaning |
/// | --- | --- | --- |
/// | `controller_runtime_reconcile_total` | counter | reconciles finished, by `result`: `success`, `error`, `panic`, `timeout` |
/// | `controller_runtime_reconcile_errors_total` | counter | reconciles that failed, panicked or timed out |
/// | `controller_runtime_reconcile_panics_total` | counter | reconciles that panicked |
/// | `controller_runtime_reconcile_time_seconds` | histogram | time in a reconcile |
/// | `controller_runtime_active_workers` | gauge | reconciles running |
/// | `controller_runtime_max_concurrent_reconciles` | gauge | the concurrency |
/// | `kinformer_controller_skipped_total` | counter | keys of objects not cached, not reconciled |
/// | `kinformer_controller_mapper_panics_total` | counter | key mappers that panicked |
///
/// Register one collector per registry and add every controller to it (a
/// shared handle; controllers are held weakly).
///
/// ```
/// use prometheus_client::registry::Registry;
/// use kinformer_controller::ControllerCollector;
///
/// let collector = ControllerCollector::new();
/// let mut registry = Registry::default();
/// collector.register(&mut registry);
/// // collector.add(&controller.handle());
/// ```
#[derive(Clone, Default)]
pub struct ControllerCollector {
    controllers: Arc<Mutex<Vec<Exported>>>,
    queues: WorkQueueCollector,
}

impl ControllerCollector {
    /// A collector exporting no controller yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Exports the controller of `handle` and its work queue too.
    pub fn add(&self, handle: &ControllerHandle) {
        self.controllers
            .lock()
            .push((Arc::clone(&handle.name), Arc::downgrade(&handle.counters)));
        self.queues.add(&handle.queue);
    }

    /// Registers this collector (a clone of the handle) with `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }
}

impl fmt::Debug for ControllerCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerCollector")
            .field("controllers", &self.controllers.lock().len())
            .finish_non_exhaustive()
    }
}

impl Collector for ControllerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let live: Vec<(Arc<str>, Arc<Counters>)> = {
            let mut controllers = self.controllers.lock();
            controllers.retain(|(_, c)| c.strong_count() > 0);
            controllers
                .iter()
                .filter_map(|(n, c)| Some((Arc::clone(n), c.upgrade()?)))
                .collect()
        };
        if !live.is_empty() {
            encode_controllers(&mut encoder, &live)?;
        }
        self.queues.encode(encoder)
    }
}

fn encode_controllers(
    encoder: &mut DescriptorEncoder<'_>,
    live: &[(Arc<str>, Arc<Counters>)],
) -> fmt::Result {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    {
        let mut family = encoder.encode_descriptor(
            "controller_runtime_reconcile",
            "Reconciles finished, by result.",
            None,
            MetricType::Counter,
        )?;
        for (name, c) in live {
            for (result, n) in [
                ("success", get(&c.succeeded)),
                ("error", get(&c.failed)),
                ("panic", get(&c.panicked)),
                ("timeout", get(&c.timed_out)),
            ] {
                let labels = [("controller", &**name), ("result", result)];
                family
                    .encode_family(&labels)?
                    .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
            }
        }
    }
    type Read = fn(&Counters) -> u64;
    let counters: [(&str, &str, Read); 4] = [
        (
            "controller_runtime_reconcile_errors",
            "Reconciles that failed, panicked or timed out.",
            |c| {
                c.failed.load(Ordering::Relaxed)
                    + c.panicked.load(Ordering::Relaxed)
                    + c.timed_out.load(Ordering::Relaxed)
            },
        ),
        (
            "controller_runtime_reconcile_panics",
            "Reconciles that panicked.",
            |c| c.panicked.load(Ordering::Relaxed),
        ),
        (
            "kinformer_controller_skipped",
            "Keys taken whose object is not in the primary cache: not reconciled.",
            |c| c.skipped_missing.load(Ordering::Relaxed),
        ),
        (
            "kinformer_controller_mapper_panics",
            "Key mappers that panicked (the event was dropped).",
            |c| c.mapper_panics.load(Ordering::Relaxed),
        ),
    ];
    for (metric, help, read) in counters {
        let mut family = encoder.encode_descriptor(metric, help, None, MetricType::Counter)?;
        for (name, c) in live {
            family
                .encode_family(&[("controller", &**name)])?
                .encode_counter::<NoLabelSet, _, u64>(&read(c), None)?;
        }
    }
    {
        let mut family = encoder.encode_descriptor(
            "controller_runtime_reconcile_time_seconds",
            "Seconds in a reconcile.",
            None,
            MetricType::Histogram,
        )?;
        for (name, c) in live {
            c.reconcile_time
                .encode(family.encode_family(&[("controller", &**name)])?)?;
        }
    }
    let gauges: [(&str, &str, Read); 2] = [
        (
            "controller_runtime_active_workers",
            "Reconciles running.",
            |c| c.in_flight.load(Ordering::Relaxed),
        ),
        (
            "controller_runtime_max_concurrent_reconciles",
            "Reconciles allowed to run at once.",
            |c| c.max_concurrency.load(Ordering::Relaxed),
        ),
    ];
    for (metric, help, read) in gauges {
        let mut family = encoder.encode_descriptor(metric, help, None, MetricType::Gauge)?;
        for (name, c) in live {
            family
                .encode_family(&[("controller", &**name)])?
                .encode_gauge(&(read(c) as i64))?;
        }
    }
    Ok(())
}

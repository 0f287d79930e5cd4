//! [`ControllerStats`]: what a controller has done so far.

use std::sync::atomic::{AtomicU64, Ordering};

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
        }
    }
}

/// Counts of a controller's reconciles and of what went wrong around them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
}

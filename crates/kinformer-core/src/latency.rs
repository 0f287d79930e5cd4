//! Latency histograms the pipeline records: how long a key's oldest delta
//! waited in the queue before the cache held it (`event to cache`), and
//! how long a notification waited for its handler (`handler wait`, a
//! handler's lag).
//!
//! Both are **sampled**: one key in [`SAMPLE_EVERY`] entering the queue is
//! stamped with the clock, and one take in [`SAMPLE_EVERY`] of a handler's
//! thread records the wait of the oldest notification it takes. Everything
//! else reads no clock and touches no histogram, so that the hot path pays
//! for a distribution, not for a sample per event: a histogram's `count` is
//! the number of samples, not of events (the informer's and the handlers'
//! counters have those). The buckets are fixed atomic counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The buckets' upper bounds, in seconds (a last bucket holds the rest).
pub const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// One event in this many is a latency sample.
pub const SAMPLE_EVERY: u64 = 64;

/// Whether the event numbered `seq` (counted from 0) is a sample; the first
/// is, so that a quiet informer still has one.
pub(crate) fn sampled(seq: u64) -> bool {
    seq.is_multiple_of(SAMPLE_EVERY)
}

/// Where `d` falls among [`BUCKETS`] (`BUCKETS.len()`: past the last).
fn bucket_of(d: Duration) -> usize {
    let s = d.as_secs_f64();
    BUCKETS
        .iter()
        .position(|b| s <= *b)
        .unwrap_or(BUCKETS.len())
}

/// A histogram's state at one moment.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct LatencyHistogram {
    /// Per bucket, its upper bound in seconds and the number of samples at
    /// or below it (cumulative, as Prometheus has them); the samples past
    /// the last bound are in `count` only.
    pub buckets: Vec<(f64, u64)>,
    /// The sum of the samples, in seconds.
    pub sum_seconds: f64,
    /// The number of samples.
    pub count: u64,
}

/// Samples of one batch, kept locally until [`Histogram::add`].
#[derive(Default)]
pub(crate) struct Samples {
    counts: [u64; BUCKETS.len() + 1],
    sum_nanos: u64,
}

impl Samples {
    /// `n` samples of `d`.
    pub(crate) fn record(&mut self, d: Duration, n: u64) {
        if n == 0 {
            return;
        }
        self.counts[bucket_of(d)] += n;
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos = self.sum_nanos.saturating_add(nanos.saturating_mul(n));
    }
}

/// A histogram shared by the threads that record into it.
#[derive(Default)]
pub(crate) struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Adds a batch's samples.
    pub(crate) fn add(&self, s: &Samples) {
        for (c, n) in self.counts.iter().zip(s.counts) {
            if n > 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
        if s.sum_nanos > 0 {
            self.sum_nanos.fetch_add(s.sum_nanos, Ordering::Relaxed);
        }
    }

    /// Adds one sample.
    pub(crate) fn observe(&self, d: Duration) {
        self.counts[bucket_of(d)].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LatencyHistogram {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(BUCKETS.len());
        for (bound, c) in BUCKETS.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            buckets.push((*bound, cumulative));
        }
        let past = self.counts[BUCKETS.len()].load(Ordering::Relaxed);
        LatencyHistogram {
            buckets,
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            count: cumulative + past,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_land_in_cumulative_buckets() {
        let h = Histogram::default();
        let mut s = Samples::default();
        s.record(Duration::from_micros(100), 2);
        s.record(Duration::from_millis(20), 1);
        s.record(Duration::from_secs(100), 1);
        s.record(Duration::from_secs(1), 0);
        h.add(&s);
        let snap = h.snapshot();
        assert_eq!(snap.count, 4);
        assert_eq!(snap.buckets[0], (0.0005, 2));
        assert_eq!(snap.buckets[4], (0.01, 2));
        assert_eq!(snap.buckets[5], (0.025, 3));
        assert_eq!(
            snap.buckets.last(),
            Some(&(60.0, 3)),
            "100 s is past the last bound"
        );
        assert!(
            (snap.sum_seconds - 100.0202).abs() < 1e-9,
            "{}",
            snap.sum_seconds
        );
    }
}

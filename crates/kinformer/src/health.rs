//! The health of a factory's informers ([`SharedInformerFactory::health`]),
//! folded into the answers of readiness and liveness probes.
//!
//! - **Ready**: the factory runs, and every informer has synced (its
//!   handlers handed the initial list too) and follows the server (no informer [stale](InformerHealth::stale)).
//! - **Live**: no reflector has stopped while the factory runs (a
//!   reflector whose task returned or panicked no longer updates its
//!   cache, whatever `has_synced` says).
//!
//! ```
//! use kinformer::health::Probe;
//! # fn serve(factory: &kinformer::SharedInformerFactory) {
//! let Probe { status, body } = factory.health().readyz();
//! // Answer an HTTP GET /readyz with `status` and `body` (text/plain).
//! # let _ = (status, body); }
//! ```
//!
//! [`SharedInformerFactory::health`]: crate::SharedInformerFactory::health

use std::fmt::Write as _;
use std::time::Duration;

use kinformer_reflector::{Phase, ReflectorStatus};

/// The default of [`FactoryBuilder::stale_after`](crate::FactoryBuilder::stale_after).
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(300);

/// One informer's health.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InformerHealth {
    /// The informer's name (resource path and selectors).
    pub name: String,
    /// Whether its cache has synced and every handler registered on it
    /// has been handed the initial list.
    pub synced: bool,
    /// Its reflector's status.
    pub reflector: ReflectorStatus,
    /// Keys waiting in its queue.
    pub queue_depth: usize,
    /// The largest backlog of its handlers.
    pub handler_backlog: usize,
    /// How long the oldest notification waiting for any of its handlers
    /// has waited.
    pub oldest_handler_wait: Option<Duration>,
    /// Its cache may be out of date: its reflector stopped, or has not
    /// been watching for longer than the factory's `stale_after`.
    pub stale: bool,
}

impl InformerHealth {
    pub(crate) fn new(
        name: String,
        synced: bool,
        reflector: ReflectorStatus,
        metrics: &kinformer_core::InformerMetrics,
        stale_after: Duration,
    ) -> Self {
        let stale = reflector.phase == Phase::Stopped
            || reflector.not_watching_for.is_some_and(|d| d > stale_after);
        Self {
            name,
            synced,
            queue_depth: metrics.queue_depth,
            handler_backlog: metrics
                .handlers
                .iter()
                .map(|h| h.backlog)
                .max()
                .unwrap_or(0),
            oldest_handler_wait: metrics
                .handlers
                .iter()
                .filter_map(|h| h.oldest_pending_age)
                .max(),
            reflector,
            stale,
        }
    }

    /// Whether this informer is ready: synced, and not stale.
    pub fn is_ready(&self) -> bool {
        self.synced && !self.stale
    }
}

/// Every informer's health, with the factory's state.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FactoryHealth {
    /// Whether [`start`](crate::SharedInformerFactory::start) was called.
    pub started: bool,
    /// Whether the factory was shut down.
    pub shut_down: bool,
    /// One entry per informer.
    pub informers: Vec<InformerHealth>,
}

/// An answer to a probe: an HTTP status code and a plain-text body, one
/// line per informer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// 200 when the check passes, 503 when it fails.
    pub status: u16,
    /// `ok` or `failed`, then a line per informer.
    pub body: String,
}

impl FactoryHealth {
    /// Started, not shut down, and every informer ready.
    pub fn is_ready(&self) -> bool {
        self.started && !self.shut_down && self.informers.iter().all(InformerHealth::is_ready)
    }

    /// Not shut down, and no reflector stopped.
    pub fn is_live(&self) -> bool {
        !self.shut_down
            && self
                .informers
                .iter()
                .all(|i| i.reflector.phase != Phase::Stopped)
    }

    /// The answer to a readiness probe (`/readyz`).
    pub fn readyz(&self) -> Probe {
        self.probe(self.is_ready(), |i| match () {
            _ if !i.synced => "not synced",
            _ if i.stale => "stale",
            _ => "ready",
        })
    }

    /// The answer to a liveness probe (`/livez`).
    pub fn livez(&self) -> Probe {
        self.probe(self.is_live(), |i| match i.reflector.phase {
            Phase::Stopped => "stopped",
            _ => "running",
        })
    }

    fn probe(&self, ok: bool, verdict: impl Fn(&InformerHealth) -> &'static str) -> Probe {
        let mut body = String::from(if ok { "ok\n" } else { "failed\n" });
        if !self.started {
            body.push_str("factory not started\n");
        }
        if self.shut_down {
            body.push_str("factory shut down\n");
        }
        for i in &self.informers {
            let r = &i.reflector;
            let _ = write!(body, "{}: {} ({}", i.name, verdict(i), r.phase.as_str());
            if let Some(why) = &r.stopped {
                let _ = write!(body, ": {why}");
            }
            if let Some(d) = r.not_watching_for {
                let _ = write!(body, ", not watching for {:.1}s", d.as_secs_f64());
            }
            if let Some((kind, msg, ago)) = &r.last_error {
                let _ = write!(
                    body,
                    ", last error {:.1}s ago: {kind}: {msg}",
                    ago.as_secs_f64()
                );
            }
            body.push_str(")\n");
        }
        Probe {
            status: if ok { 200 } else { 503 },
            body,
        }
    }
}

//! The state shared by every request handler and background task.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::faults::Faults;
use crate::stats::{Counters, Stats};
use crate::store::Store;

/// Server behaviour knobs (beyond the store's).
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Interval between periodic watch bookmarks.
    pub bookmark_interval: Duration,
    /// Watch duration when the client gives no `timeoutSeconds`.
    pub default_watch_timeout: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
        }
    }
}

/// Everything a handler needs.
#[derive(Debug)]
pub struct Shared {
    /// Objects, history, snapshots.
    pub store: Store,
    /// Fault state.
    pub faults: Faults,
    /// Counters.
    pub counters: Counters,
    /// Knobs.
    pub config: ServeConfig,
}

impl Shared {
    /// Counters, store figures and fault counts together.
    pub fn stats(&self) -> Stats {
        let mut s = self.counters.read();
        s.resource_version = self.store.current_rv();
        s.objects = (0..self.store.registry().defs().len())
            .map(|r| self.store.len(r) as u64)
            .sum();
        s.faults = self.faults.counts();
        s
    }

    /// Count a successful write.
    pub fn count_write(&self) {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
    }
}

/// The shared state as handlers hold it.
pub type SharedRef = Arc<Shared>;

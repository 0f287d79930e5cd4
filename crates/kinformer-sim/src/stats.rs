//! Request and watch counters, readable through the handle and `GET /__sim/stats`.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::faults::FaultCounts;

/// Live counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// API requests received.
    pub requests: AtomicU64,
    /// LIST requests answered.
    pub lists: AtomicU64,
    /// Objects sent in LIST pages.
    pub list_items: AtomicU64,
    /// WATCH requests started.
    pub watches_started: AtomicU64,
    /// WATCH streams open now.
    pub watches_open: AtomicI64,
    /// Watch events sent (all watchers).
    pub events_sent: AtomicU64,
    /// Bookmarks sent.
    pub bookmarks_sent: AtomicU64,
    /// Watches closed because the client fell too far behind.
    pub watches_lagged: AtomicU64,
    /// Watches answered with 410 because their resourceVersion was too old.
    pub watches_too_old: AtomicU64,
    /// Successful writes (create, update, patch, delete) over HTTP or in process.
    pub writes: AtomicU64,
}

/// A readable copy of the counters plus store figures and fault counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// API requests received.
    pub requests: u64,
    /// LIST requests answered.
    pub lists: u64,
    /// Objects sent in LIST pages.
    pub list_items: u64,
    /// WATCH requests started.
    pub watches_started: u64,
    /// WATCH streams open now.
    pub watches_open: i64,
    /// Watch events sent.
    pub events_sent: u64,
    /// Bookmarks sent.
    pub bookmarks_sent: u64,
    /// Watches closed for lagging.
    pub watches_lagged: u64,
    /// Watches answered 410 for a too-old resourceVersion.
    pub watches_too_old: u64,
    /// Successful writes.
    pub writes: u64,
    /// The current resourceVersion.
    pub resource_version: u64,
    /// Objects stored, all resources.
    pub objects: u64,
    /// Injected faults.
    pub faults: FaultCounts,
}

impl Counters {
    /// Read the counters (store figures and faults are filled by the caller).
    pub fn read(&self) -> Stats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            requests: r(&self.requests),
            lists: r(&self.lists),
            list_items: r(&self.list_items),
            watches_started: r(&self.watches_started),
            watches_open: self.watches_open.load(Ordering::Relaxed),
            events_sent: r(&self.events_sent),
            bookmarks_sent: r(&self.bookmarks_sent),
            watches_lagged: r(&self.watches_lagged),
            watches_too_old: r(&self.watches_too_old),
            writes: r(&self.writes),
            ..Stats::default()
        }
    }
}

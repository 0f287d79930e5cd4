//! Counters of a reflector, readable from code while it runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::health::Health;

/// A snapshot of a reflector's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReflectorMetrics {
    /// Full lists begun (the first sync included), by LIST or WatchList: a
    /// list in progress, or one that failed, shows as `lists_started`
    /// above `lists`.
    pub lists_started: u64,
    /// Full lists completed (the first sync included), by LIST or
    /// WatchList (those are also in `watch_list_syncs`).
    pub lists: u64,
    /// Full lists completed after the first (relists).
    pub relists: u64,
    /// LIST requests (pages) sent.
    pub list_requests: u64,
    /// Syncs completed through a WatchList stream.
    pub watch_list_syncs: u64,
    /// WATCH requests sent.
    pub watches: u64,
    /// WATCH requests after the first (re-watches).
    pub watch_restarts: u64,
    /// Watches the server answered in protobuf (see
    /// [`ReflectorConfig::protobuf`](crate::ReflectorConfig::protobuf)).
    pub protobuf_watches: u64,
    /// LIST pages the server answered in protobuf.
    pub protobuf_list_pages: u64,
    /// Watches answered through a [`DirectWatch`](crate::DirectWatch).
    pub direct_watches: u64,
    /// Watch events queued (ADDED, MODIFIED, DELETED; not bookmarks, nor
    /// the initial events of a WatchList sync, which count as a list).
    pub events: u64,
    /// Bookmarks received.
    pub bookmarks: u64,
    /// Errors reported (all kinds).
    pub errors: u64,
    /// Events or objects that could not be decoded or keyed (skipped).
    pub decode_errors: u64,
    /// Objects outside the informer's shard that the server sent anyway
    /// (it did not apply the `shardSelector`), left out of the cache: above
    /// zero, the sharding happens on this side.
    pub shard_filtered: u64,
    /// Times the shard was changed while running (see
    /// [`ShardControl`](crate::ShardControl)), each ending the list or
    /// watch of the time for a list of the new shard.
    pub reshards: u64,
    /// Backoff waits.
    pub backoffs: u64,
    /// The last resourceVersion seen.
    pub last_resource_version: String,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub lists_started: AtomicU64,
    pub lists: AtomicU64,
    pub relists: AtomicU64,
    pub list_requests: AtomicU64,
    pub watch_list_syncs: AtomicU64,
    pub watches: AtomicU64,
    pub watch_restarts: AtomicU64,
    pub protobuf_watches: AtomicU64,
    pub protobuf_list_pages: AtomicU64,
    pub direct_watches: AtomicU64,
    pub events: AtomicU64,
    pub bookmarks: AtomicU64,
    pub errors: AtomicU64,
    pub decode_errors: AtomicU64,
    pub shard_filtered: AtomicU64,
    pub reshards: AtomicU64,
    pub backoffs: AtomicU64,
    pub last_rv: Mutex<String>,
    pub health: Health,
}

pub(crate) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A cheap handle to read a reflector's counters (clone it before
/// [`Reflector::run`](crate::Reflector::run) consumes the reflector).
#[derive(Debug, Clone, Default)]
pub struct MetricsHandle(pub(crate) Arc<Counters>);

impl MetricsHandle {
    /// Reads the counters.
    pub fn get(&self) -> ReflectorMetrics {
        let c = &self.0;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReflectorMetrics {
            lists_started: r(&c.lists_started),
            lists: r(&c.lists),
            relists: r(&c.relists),
            list_requests: r(&c.list_requests),
            watch_list_syncs: r(&c.watch_list_syncs),
            watches: r(&c.watches),
            watch_restarts: r(&c.watch_restarts),
            protobuf_watches: r(&c.protobuf_watches),
            protobuf_list_pages: r(&c.protobuf_list_pages),
            direct_watches: r(&c.direct_watches),
            events: r(&c.events),
            bookmarks: r(&c.bookmarks),
            errors: r(&c.errors),
            decode_errors: r(&c.decode_errors),
            shard_filtered: r(&c.shard_filtered),
            reshards: r(&c.reshards),
            backoffs: r(&c.backoffs),
            last_resource_version: c.last_rv.lock().clone(),
        }
    }
}

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
    /// How watch events are cut into the body's chunks.
    pub watch_chunks: WatchChunks,
    /// Whether `shardSelector` is applied (kube-apiserver's
    /// `ShardedListAndWatch` gate); off, it is ignored, as by a server
    /// without the gate.
    pub sharded_list_and_watch: bool,
}

/// How a watch's events are cut into HTTP chunks. Clients must not depend
/// on it, but what each chunk costs a client depends on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WatchChunks {
    /// As kube-apiserver writes them (Go's response writer buffers 2 KiB
    /// before it writes a chunk): an event of 2 KiB or more is a chunk of
    /// its own, smaller ones share a chunk up to 2 KiB.
    #[default]
    Apiserver,
    /// The events queued together go out as one chunk (up to 64 KiB): fewer
    /// chunks than kube-apiserver writes, at the cost of a copy.
    Batched,
}

impl std::str::FromStr for WatchChunks {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "apiserver" => Ok(Self::Apiserver),
            "batched" => Ok(Self::Batched),
            other => Err(format!(
                "unknown watch chunking {other:?} (apiserver, batched)"
            )),
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            watch_chunks: WatchChunks::default(),
            sharded_list_and_watch: true,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_chunks_parse_by_name_and_default_to_apiserver() {
        assert_eq!("apiserver".parse(), Ok(WatchChunks::Apiserver));
        assert_eq!("batched".parse(), Ok(WatchChunks::Batched));
        assert!("lines".parse::<WatchChunks>().is_err());
        assert_eq!(ServeConfig::default().watch_chunks, WatchChunks::Apiserver);
    }
}

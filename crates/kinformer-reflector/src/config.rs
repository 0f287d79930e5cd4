//! Configuration of a [`Reflector`](crate::Reflector).

use std::time::Duration;

use crate::backoff::BackoffConfig;

/// How a reflector lists, watches and recovers. Defaults are client-go's.
///
/// ```
/// use std::time::Duration;
/// use kinformer_reflector::ReflectorConfig;
/// let c = ReflectorConfig::default().watch_list(false).page_size(100);
/// assert_eq!(c.page_size, 100);
/// assert!(!c.watch_list);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ReflectorConfig {
    /// Objects per LIST page (default 500; 0 = unpaged).
    pub page_size: u32,
    /// Sync through a WatchList stream (`sendInitialEvents=true`) instead of
    /// LIST, falling back to LIST when the server does not support it
    /// (default on).
    pub watch_list: bool,
    /// Shortest server-side watch timeout (default 5 min).
    pub watch_timeout_min: Duration,
    /// Longest server-side watch timeout (default 10 min); each watch picks
    /// a random value in between.
    pub watch_timeout_max: Duration,
    /// Client-side idle timeout, from the moment a request is sent: a watch
    /// that sends nothing this long (no response head, no event, not even a
    /// bookmark) is abandoned and re-established; a LIST whose body stops
    /// arriving this long is abandoned and retried after a backoff
    /// (default 150 s; kube-apiserver sends a watch's bookmarks about once
    /// a minute).
    pub idle_timeout: Duration,
    /// How long a LIST may take to start answering (its response head)
    /// before it is abandoned and retried after a backoff (default 10 min):
    /// kube-apiserver answers an unpaged LIST once it has read the whole
    /// collection, from etcd after an expired continue token, which can
    /// take minutes at a million objects.
    pub list_timeout: Duration,
    /// A watch that ends sooner than this without delivering any event is
    /// "very short" and triggers a relist (default 1 s).
    pub short_watch: Duration,
    /// Backoff between failed attempts.
    pub backoff: BackoffConfig,
    /// While a full list streams in, the reader pauses whenever the queue
    /// holds more keys than this (default 16,384), so a relist replaces
    /// cached objects about as fast as it receives them instead of holding
    /// a second copy of the collection in the queue.
    pub max_queued_keys: usize,
    /// Skip `metadata.managedFields` while decoding (default off): for
    /// informers that would drop them anyway, this saves most of the
    /// decoding work and allocation of metadata (see [`crate::prune`]).
    pub skip_managed_fields: bool,
    /// Ask for Kubernetes' protobuf encoding on the LISTs and watches of
    /// metadata-only informers (`PartialObjectMetadata`), as client-go's
    /// metadata informers do (see [`crate::protobuf`]). A server that
    /// answers in JSON is read as JSON; other informers always list and
    /// watch in JSON. Default on (against JSON in the 1M metadata-only load
    /// test: the same cache, sync, peak and lag, and less CPU per update).
    pub protobuf: bool,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        Self {
            page_size: 500,
            watch_list: true,
            watch_timeout_min: Duration::from_secs(300),
            watch_timeout_max: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(150),
            list_timeout: Duration::from_secs(600),
            short_watch: Duration::from_secs(1),
            backoff: BackoffConfig::default(),
            max_queued_keys: 16_384,
            skip_managed_fields: false,
            protobuf: true,
        }
    }
}

impl ReflectorConfig {
    /// Sets [`ReflectorConfig::protobuf`].
    pub fn protobuf(mut self, on: bool) -> Self {
        self.protobuf = on;
        self
    }

    /// Sets [`ReflectorConfig::page_size`].
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = n;
        self
    }

    /// Sets [`ReflectorConfig::watch_list`].
    pub fn watch_list(mut self, on: bool) -> Self {
        self.watch_list = on;
        self
    }

    /// Sets the server-side watch timeout range.
    pub fn watch_timeout(mut self, min: Duration, max: Duration) -> Self {
        self.watch_timeout_min = min;
        self.watch_timeout_max = max.max(min);
        self
    }

    /// Sets [`ReflectorConfig::idle_timeout`].
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }

    /// Sets [`ReflectorConfig::list_timeout`].
    pub fn list_timeout(mut self, d: Duration) -> Self {
        self.list_timeout = d;
        self
    }

    /// Sets [`ReflectorConfig::short_watch`].
    pub fn short_watch(mut self, d: Duration) -> Self {
        self.short_watch = d;
        self
    }

    /// Sets [`ReflectorConfig::max_queued_keys`].
    pub fn max_queued_keys(mut self, n: usize) -> Self {
        self.max_queued_keys = n.max(1);
        self
    }

    /// Sets [`ReflectorConfig::skip_managed_fields`].
    pub fn skip_managed_fields(mut self, on: bool) -> Self {
        self.skip_managed_fields = on;
        self
    }

    /// Sets [`ReflectorConfig::backoff`].
    pub fn backoff(mut self, b: BackoffConfig) -> Self {
        self.backoff = b;
        self
    }
}

//! The [`Reflector`]: LIST (or WatchList) then WATCH, forever, feeding a
//! [`DeltaFifo`], recovering from every recoverable error as client-go's
//! `tools/cache` reflector does:
//!
//! | situation | reaction |
//! | --- | --- |
//! | first sync | paged LIST at resourceVersion `"0"` (or a WatchList stream) |
//! | relist | LIST at the last resourceVersion seen |
//! | LIST answers Expired/Gone or "too large resource version" | LIST again at `""` (quorum read) |
//! | a `continue` token expires | one unpaged LIST at `""` |
//! | watch ends cleanly / idle timeout / truncated line | re-watch from the last resourceVersion, no relist |
//! | watch answers 410 (HTTP or `ERROR` event) | back off, relist |
//! | watch answers 429, or the connection is refused | back off, re-watch, no relist |
//! | watch closes within `short_watch` without any event | back off, relist |
//! | malformed event line | back off, relist |
//! | unknown event type, object without name, undecodable object | skip it (reported, counted) |
//! | shutdown token cancelled, or the FIFO closed | return promptly |

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kinformer_core::{DeltaFifo, FifoError, ObjectKey};
use kube::Client;
use kube_core::Resource;
use rand::Rng;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::config::ReflectorConfig;
use crate::error::ReflectorError;
use crate::event::{WatchEvent, decode_event, decode_object, resource_version};
use crate::lines::Lines;
use crate::metrics::{Counters, MetricsHandle, bump};
use crate::target::ListWatchTarget;
use crate::transport::{read_body, send};

/// Called with every error the reflector recovers from (client-go's
/// `WatchErrorHandler`). Must not block.
pub type WatchErrorHandler = Arc<dyn Fn(&ReflectorError) + Send + Sync>;

/// Lists and watches one collection and feeds a [`DeltaFifo`].
///
/// ```no_run
/// use std::sync::Arc;
/// use kinformer_core::SharedIndexInformer;
/// use kinformer_reflector::{CancellationToken, ListWatchTarget, Reflector};
/// use k8s_openapi::api::core::v1::Pod;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let informer = SharedIndexInformer::<Pod>::builder().build();
/// informer.start()?;
/// let reflector = Reflector::new(client, ListWatchTarget::of::<Pod>(&(), None), Arc::clone(informer.queue()))
///     .on_watch_error(|e| eprintln!("watch error: {e}"));
/// let stop = CancellationToken::new();
/// let task = tokio::spawn(reflector.run(stop.clone()));
/// // ... later
/// stop.cancel();
/// task.await?;
/// informer.shutdown();
/// # Ok(()) }
/// ```
pub struct Reflector<K> {
    name: String,
    client: Client,
    target: ListWatchTarget,
    fifo: Arc<DeltaFifo<K>>,
    config: ReflectorConfig,
    on_error: Option<WatchErrorHandler>,
    metrics: MetricsHandle,
}

/// The reflector should return (shutdown, or the queue is closed).
struct Stop;

/// What to do after a watch ended.
enum WatchEnd {
    Rewatch,
    Relist,
}

struct State {
    last_rv: String,
    rv_unavailable: bool,
    synced_once: bool,
    watched_once: bool,
    watch_list_unsupported: bool,
    backoff: Backoff,
}

impl State {
    /// client-go's `relistResourceVersion`.
    fn relist_rv(&self) -> String {
        if self.rv_unavailable {
            String::new()
        } else if self.last_rv.is_empty() {
            "0".into()
        } else {
            self.last_rv.clone()
        }
    }
}

#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize, Default)]
struct RawListMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

async fn or_stop<F: Future>(token: &CancellationToken, f: F) -> Result<F::Output, Stop> {
    tokio::select! {
        biased;
        _ = token.cancelled() => Err(Stop),
        out = f => Ok(out),
    }
}

impl<K> Reflector<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    /// A reflector of `target` feeding `fifo`, with default configuration.
    pub fn new(client: Client, target: ListWatchTarget, fifo: Arc<DeltaFifo<K>>) -> Self {
        Self {
            name: target.url_path().to_string(),
            client,
            target,
            fifo,
            config: ReflectorConfig::default(),
            on_error: None,
            metrics: MetricsHandle::default(),
        }
    }

    /// A name for logs (default: the URL path).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Replaces the configuration.
    pub fn config(mut self, config: ReflectorConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the watch-error callback.
    pub fn on_watch_error(mut self, f: impl Fn(&ReflectorError) + Send + Sync + 'static) -> Self {
        self.on_error = Some(Arc::new(f));
        self
    }

    /// Sets the watch-error callback from a shared handler.
    pub fn on_watch_error_shared(mut self, f: Option<WatchErrorHandler>) -> Self {
        self.on_error = f;
        self
    }

    /// A handle to this reflector's counters.
    pub fn metrics(&self) -> MetricsHandle {
        self.metrics.clone()
    }

    /// Lists and watches until `shutdown` is cancelled or the FIFO is closed.
    /// Never returns because of a recoverable error.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut st = State {
            last_rv: String::new(),
            rv_unavailable: false,
            synced_once: false,
            watched_once: false,
            watch_list_unsupported: false,
            backoff: Backoff::new(self.config.backoff.clone()),
        };
        tracing::debug!(reflector = %self.name, "reflector starting");
        let mut first = true;
        loop {
            if !first && self.sleep_backoff(&mut st, &shutdown, None).await.is_err() {
                break;
            }
            first = false;
            if self.list_and_watch(&mut st, &shutdown).await.is_err() {
                break;
            }
        }
        tracing::debug!(reflector = %self.name, "reflector stopped");
    }

    fn counters(&self) -> &Counters {
        &self.metrics.0
    }

    fn report(&self, e: &ReflectorError) {
        bump(&self.counters().errors);
        tracing::warn!(reflector = %self.name, kind = e.kind(), error = %e, "list/watch error");
        if let Some(f) = &self.on_error {
            f(e);
        }
    }

    fn set_rv(&self, st: &mut State, rv: &str) {
        if !rv.is_empty() && rv != st.last_rv {
            st.last_rv = rv.to_string();
            *self.counters().last_rv.lock() = st.last_rv.clone();
        }
    }

    async fn sleep_backoff(
        &self,
        st: &mut State,
        token: &CancellationToken,
        floor: Option<Duration>,
    ) -> Result<(), Stop> {
        let mut d = st.backoff.next_delay();
        if let Some(f) = floor {
            d = d.max(f.min(self.config.backoff.max));
        }
        bump(&self.counters().backoffs);
        tracing::debug!(reflector = %self.name, delay = ?d, "backing off");
        or_stop(token, tokio::time::sleep(d)).await
    }

    fn watch_timeout(&self) -> Duration {
        let (lo, hi) = (
            self.config.watch_timeout_min.as_secs(),
            self.config.watch_timeout_max.as_secs(),
        );
        Duration::from_secs(rand::rng().random_range(lo..=hi.max(lo)))
    }

    /// One list-and-watch cycle: returns `Ok` to relist (after a backoff).
    async fn list_and_watch(&self, st: &mut State, token: &CancellationToken) -> Result<(), Stop> {
        let mut stream = None;
        if self.config.watch_list && !st.watch_list_unsupported {
            stream = self.watch_list(st, token).await?;
        }
        if stream.is_none()
            && let Err(e) = self.list(st, token).await?
        {
            self.report(&e);
            return Ok(());
        }
        loop {
            let (lines, started) = match stream.take() {
                Some(s) => s,
                None => match self
                    .open_watch(st, false, &st.last_rv.clone(), token)
                    .await?
                {
                    Ok(lines) => (lines, Instant::now()),
                    Err(e) => {
                        self.report(&e);
                        if e.is_too_many_requests() || e.is_connection_refused() {
                            let floor = match &e {
                                ReflectorError::Api { retry_after, .. } => *retry_after,
                                _ => None,
                            };
                            self.sleep_backoff(st, token, floor).await?;
                            continue;
                        }
                        return Ok(());
                    }
                },
            };
            match self.handle_watch(lines, started, st, token).await? {
                WatchEnd::Rewatch => continue,
                WatchEnd::Relist => return Ok(()),
            }
        }
    }

    async fn open_watch(
        &self,
        st: &mut State,
        watch_list: bool,
        rv: &str,
        token: &CancellationToken,
    ) -> Result<Result<Lines, ReflectorError>, Stop> {
        let req = match self
            .target
            .watch_request(rv, self.watch_timeout(), watch_list)
        {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        bump(&self.counters().watches);
        if st.watched_once {
            bump(&self.counters().watch_restarts);
        }
        st.watched_once = true;
        tracing::debug!(reflector = %self.name, rv, watch_list, "watch");
        let resp = or_stop(token, send(&self.client, req)).await?;
        Ok(resp.map(|r| Lines::new(r.into_body(), self.config.idle_timeout)))
    }

    /// Feeds one object to the queue; `Err(Stop)` when the queue is closed.
    fn apply(&self, res: Result<(), FifoError>) -> Result<(), Stop> {
        match res {
            Ok(()) => Ok(()),
            Err(FifoError::Closed) => Err(Stop),
            Err(e) => {
                bump(&self.counters().decode_errors);
                self.report(&ReflectorError::Fifo(e));
                Ok(())
            }
        }
    }

    fn skip(&self, e: &ReflectorError) {
        bump(&self.counters().decode_errors);
        self.report(e);
    }

    async fn handle_watch(
        &self,
        mut lines: Lines,
        started: Instant,
        st: &mut State,
        token: &CancellationToken,
    ) -> Result<WatchEnd, Stop> {
        let mut events = 0u64;
        loop {
            let line = match or_stop(token, lines.next_line()).await? {
                Ok(Some(line)) => line,
                Ok(None) => {
                    let lasted = started.elapsed();
                    if events == 0 && lasted < self.config.short_watch {
                        self.report(&ReflectorError::VeryShortWatch(lasted));
                        return Ok(WatchEnd::Relist);
                    }
                    tracing::debug!(reflector = %self.name, events, "watch ended; re-watching");
                    return Ok(WatchEnd::Rewatch);
                }
                Err(e) => {
                    self.report(&e);
                    let lasted = started.elapsed();
                    if events == 0 && lasted < self.config.short_watch {
                        return Ok(WatchEnd::Relist);
                    }
                    return Ok(WatchEnd::Rewatch);
                }
            };
            let event = match decode_event::<K>(&line) {
                Ok(ev) => ev,
                Err(e @ ReflectorError::MalformedEvent(_)) => {
                    self.report(&e);
                    return Ok(WatchEnd::Relist);
                }
                Err(e) => {
                    self.skip(&e);
                    continue;
                }
            };
            let rv = match &event {
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                    resource_version(o).map(str::to_string)
                }
                WatchEvent::Bookmark {
                    resource_version, ..
                } => Some(resource_version.clone()),
                WatchEvent::Error(_) => None,
            };
            match event {
                WatchEvent::Added(o) => self.apply(self.fifo.add(o))?,
                WatchEvent::Modified(o) => self.apply(self.fifo.update(o))?,
                WatchEvent::Deleted(o) => self.apply(self.fifo.delete(o))?,
                WatchEvent::Bookmark { .. } => bump(&self.counters().bookmarks),
                WatchEvent::Error(e) => {
                    self.report(&e);
                    if e.is_too_many_requests() {
                        self.sleep_backoff(st, token, None).await?;
                        return Ok(WatchEnd::Rewatch);
                    }
                    return Ok(WatchEnd::Relist);
                }
            }
            events += 1;
            bump(&self.counters().events);
            if let Some(rv) = rv {
                self.set_rv(st, &rv);
            }
        }
    }

    /// A WatchList sync: `Some(stream)` (already synced, continue watching
    /// it) or `None` to fall back to LIST for this cycle.
    async fn watch_list(
        &self,
        st: &mut State,
        token: &CancellationToken,
    ) -> Result<Option<(Lines, Instant)>, Stop> {
        let rv = if st.rv_unavailable {
            String::new()
        } else {
            st.last_rv.clone()
        };
        let mut lines = match self.open_watch(st, true, &rv, token).await? {
            Ok(l) => l,
            Err(e) => {
                if e.code()
                    .is_some_and(|c| (400..500).contains(&c) && c != 410 && c != 429)
                {
                    st.watch_list_unsupported = true;
                    self.report(&ReflectorError::WatchListUnsupported(e.to_string()));
                } else {
                    if e.is_expired() {
                        st.rv_unavailable = true;
                    }
                    self.report(&e);
                }
                return Ok(None);
            }
        };
        let started = Instant::now();
        let mut buffer: HashMap<ObjectKey, K> = HashMap::new();
        loop {
            let line = match or_stop(token, lines.next_line()).await? {
                Ok(Some(line)) => line,
                Ok(None) => {
                    self.report(&ReflectorError::WatchListIncomplete);
                    return Ok(None);
                }
                Err(e) => {
                    self.report(&e);
                    self.report(&ReflectorError::WatchListIncomplete);
                    return Ok(None);
                }
            };
            match decode_event::<K>(&line) {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => match ObjectKey::of(&o) {
                    Ok(key) => {
                        buffer.insert(key, o);
                    }
                    Err(e) => self.skip(&ReflectorError::Fifo(e.into())),
                },
                Ok(WatchEvent::Deleted(o)) => {
                    if let Ok(key) = ObjectKey::of(&o) {
                        buffer.remove(&key);
                    }
                }
                Ok(WatchEvent::Bookmark {
                    resource_version,
                    initial_events_end: true,
                }) => {
                    let n = buffer.len();
                    self.apply_replace(buffer.into_values(), &resource_version)?;
                    self.set_rv(st, &resource_version);
                    st.rv_unavailable = false;
                    self.count_sync(st);
                    bump(&self.counters().watch_list_syncs);
                    tracing::debug!(reflector = %self.name, objects = n, rv = %resource_version, "synced through watch-list");
                    return Ok(Some((lines, started)));
                }
                Ok(WatchEvent::Bookmark { .. }) => {
                    st.watch_list_unsupported = true;
                    self.report(&ReflectorError::WatchListUnsupported(
                        "bookmark without the initial-events-end annotation".into(),
                    ));
                    return Ok(None);
                }
                Ok(WatchEvent::Error(e)) => {
                    if e.is_expired() {
                        st.rv_unavailable = true;
                    }
                    self.report(&e);
                    return Ok(None);
                }
                Err(e @ ReflectorError::MalformedEvent(_)) => {
                    self.report(&e);
                    return Ok(None);
                }
                Err(e) => self.skip(&e),
            }
        }
    }

    fn apply_replace(&self, items: impl IntoIterator<Item = K>, rv: &str) -> Result<(), Stop> {
        match self.fifo.replace(items, rv) {
            Err(FifoError::Closed) => Err(Stop),
            Err(e) => {
                self.report(&ReflectorError::Fifo(e));
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    fn count_sync(&self, st: &mut State) {
        if st.synced_once {
            bump(&self.counters().relists);
        }
        st.synced_once = true;
    }

    /// A full LIST into the queue (`replace`), with client-go's choice of
    /// resourceVersion and its retry at `""` after Expired / TooLarge.
    async fn list(
        &self,
        st: &mut State,
        token: &CancellationToken,
    ) -> Result<Result<(), ReflectorError>, Stop> {
        let mut rv = st.relist_rv();
        let (items, list_rv) = loop {
            match self.list_at(&rv, token).await? {
                Ok(r) => break r,
                Err(e)
                    if (e.is_expired() || e.is_too_large_resource_version()) && !rv.is_empty() =>
                {
                    self.report(&e);
                    st.rv_unavailable = true;
                    rv = st.relist_rv();
                }
                Err(e) => return Ok(Err(e)),
            }
        };
        let n = items.len();
        self.apply_replace(items, &list_rv)?;
        st.rv_unavailable = false;
        self.set_rv(st, &list_rv);
        bump(&self.counters().lists);
        self.count_sync(st);
        tracing::debug!(reflector = %self.name, objects = n, rv = %list_rv, "listed");
        Ok(Ok(()))
    }

    /// A paged LIST at `rv`; an expired `continue` token falls back to one
    /// unpaged LIST at `""`.
    async fn list_at(
        &self,
        rv: &str,
        token: &CancellationToken,
    ) -> Result<Result<(Vec<K>, String), ReflectorError>, Stop> {
        let mut items = Vec::new();
        let mut cont: Option<String> = None;
        let mut limit = self.config.page_size;
        let mut rv = rv.to_string();
        loop {
            let page = match self.list_page(&rv, limit, cont.as_deref(), token).await? {
                Ok(p) => p,
                Err(e) if cont.is_some() && e.is_expired() => {
                    self.report(&e);
                    tracing::info!(reflector = %self.name, "continue token expired; listing in full");
                    items.clear();
                    cont = None;
                    limit = 0;
                    rv.clear();
                    continue;
                }
                Err(e) => return Ok(Err(e)),
            };
            let (page_items, page_rv, next) = page;
            items.extend(page_items);
            match next {
                Some(c) if limit > 0 => cont = Some(c),
                _ => return Ok(Ok((items, page_rv))),
            }
        }
    }

    async fn list_page(
        &self,
        rv: &str,
        limit: u32,
        cont: Option<&str>,
        token: &CancellationToken,
    ) -> Result<Result<(Vec<K>, String, Option<String>), ReflectorError>, Stop> {
        let req = match self.target.list_request(rv, limit, cont) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        bump(&self.counters().list_requests);
        tracing::debug!(reflector = %self.name, rv, limit, continued = cont.is_some(), "list");
        let resp = match or_stop(token, send(&self.client, req)).await? {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let body = match or_stop(token, read_body(resp)).await? {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        let list: RawList<'_> = match serde_json::from_slice(&body) {
            Ok(l) => l,
            Err(e) => return Ok(Err(ReflectorError::MalformedList(e.to_string()))),
        };
        let raw = list.items.unwrap_or_default();
        let mut items = Vec::with_capacity(raw.len());
        for item in raw {
            match decode_object::<K>(item.get().as_bytes()) {
                Ok(o) => items.push(o),
                Err(e) => self.skip(&e),
            }
        }
        let Some(page_rv) = list.metadata.resource_version.filter(|r| !r.is_empty()) else {
            return Ok(Err(ReflectorError::MalformedList(
                "list without metadata.resourceVersion".into(),
            )));
        };
        Ok(Ok((
            items,
            page_rv,
            list.metadata.continue_.filter(|c| !c.is_empty()),
        )))
    }
}

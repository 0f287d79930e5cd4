//! The [`Reflector`]: LIST (or WatchList) then WATCH, forever, feeding a
//! [`DeltaFifo`], recovering from every recoverable error as client-go's
//! `tools/cache` reflector does:
//!
//! | situation | reaction |
//! | --- | --- |
//! | first sync | paged LIST at resourceVersion `"0"` (or a WatchList stream) |
//! | relist | LIST at the last resourceVersion seen, unpaged (served from the watch cache) unless the first LIST came back paged |
//! | LIST answers Expired/Gone or "too large resource version" | LIST again at `""` (quorum read) |
//! | a `continue` token expires | one unpaged LIST at `""` |
//! | watch ends cleanly / idle timeout / truncated line | re-watch from the last resourceVersion, no relist |
//! | no response head within the idle timeout (a LIST: within `list_timeout`), or no more of a LIST's body within the idle timeout | abandon the request; a watch backs off and re-watches, a WatchList falls back to a LIST, a LIST backs off and lists again |
//! | watch answers 410 (HTTP or `ERROR` event) | back off, relist |
//! | watch answers 429, or the connection is refused | back off, re-watch, no relist |
//! | watch closes within `short_watch` without any event | back off, relist |
//! | malformed event line | back off, relist |
//! | unknown event type, object without name, undecodable object | skip it (reported, counted) |
//! | shutdown token cancelled, or the FIFO closed | return promptly |

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kinformer_core::{DeltaFifo, InformerError, Observed, Prepared, ReplaceSession};
use kube::Client;
use kube_core::Resource;
use rand::Rng;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::config::ReflectorConfig;
use crate::decode::DecodePool;
use crate::direct::DirectWatch;
use crate::error::ReflectorError;
use crate::event::WatchEvent;
use crate::events::{DecodedEvent, Decoder, EventStream};
use crate::health::{Phase, StopGuard};
use crate::lines::Lines;
use crate::metrics::{Counters, MetricsHandle, bump};
use crate::object_decode::Decoders;
use crate::reshard::ShardControl;
use crate::target::ListWatchTarget;
use crate::transport::{check, send};
use kinformer_wire::WireError;

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
    pub(crate) name: String,
    pub(crate) client: Client,
    pub(crate) target: ListWatchTarget,
    pub(crate) fifo: Arc<DeltaFifo<K>>,
    pub(crate) config: ReflectorConfig,
    on_error: Option<WatchErrorHandler>,
    metrics: MetricsHandle,
    pool: Option<Arc<DecodePool>>,
    decoders: Decoders<K>,
    direct: Option<DirectWatch>,
    shard: ShardControl,
}

/// The reflector should return (shutdown, or the queue is closed).
pub(crate) struct Stop;

/// What to do after a watch ended.
enum WatchEnd {
    Rewatch,
    Relist,
}

pub(crate) struct State {
    pub(crate) last_rv: String,
    pub(crate) rv_unavailable: bool,
    /// The first LIST (at "0") came back in pages: the server pages
    /// (no watch cache), so relists page too (client-go's `paginatedResult`).
    pub(crate) paginated_result: bool,
    synced_once: bool,
    watched_once: bool,
    watch_list_unsupported: bool,
    backoff: Backoff,
}

impl State {
    /// client-go's `relistResourceVersion`.
    pub(crate) fn relist_rv(&self) -> String {
        if self.rv_unavailable {
            String::new()
        } else if self.last_rv.is_empty() {
            "0".into()
        } else {
            self.last_rv.clone()
        }
    }
}

pub(crate) async fn or_stop<F: Future>(token: &CancellationToken, f: F) -> Result<F::Output, Stop> {
    tokio::select! {
        biased;
        _ = token.cancelled() => Err(Stop),
        out = f => Ok(out),
    }
}

/// `f`'s answer, or [`ReflectorError::IdleTimeout`] when it takes longer
/// than `idle` (a request the server accepted and never answered), or
/// `Err(Stop)` on shutdown.
pub(crate) async fn answered_within<T, F>(
    token: &CancellationToken,
    idle: Duration,
    f: F,
) -> Result<Result<T, ReflectorError>, Stop>
where
    F: Future<Output = Result<T, ReflectorError>>,
{
    or_stop(token, async {
        tokio::time::timeout(idle, f)
            .await
            .unwrap_or(Err(ReflectorError::IdleTimeout(idle)))
    })
    .await
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
            shard: ShardControl::new(target.shard_selector().cloned()),
            target,
            fifo,
            config: ReflectorConfig::default(),
            on_error: None,
            metrics: MetricsHandle::default(),
            pool: None,
            decoders: Decoders::serde(),
            direct: None,
        }
    }

    /// Decodes objects with `decoders` (default: [`Decoders::serde`]; a
    /// metadata-only reflector of `PartialObjectMeta` is cheaper with
    /// [`Decoders::partial_object_meta`]).
    pub fn decoders(mut self, decoders: Decoders<K>) -> Self {
        self.decoders = decoders;
        self
    }

    /// Sends watch requests through `direct` (on connections of their own,
    /// bodies read without hyper's client; see [`crate::direct`]) instead
    /// of the [`Client`]. LISTs stay on the client.
    pub fn direct_watches(mut self, direct: DirectWatch) -> Self {
        self.direct = Some(direct);
        self
    }

    /// Decodes on `pool`'s threads instead of the task that reads the
    /// responses, so decoding uses every core (see [`DecodePool`]).
    pub fn decode_pool(mut self, pool: Arc<DecodePool>) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Whether LISTs and watches ask for the protobuf encoding first (see
    /// [`ReflectorConfig::protobuf`](crate::ReflectorConfig::protobuf)).
    pub(crate) fn asks_protobuf(&self) -> bool {
        self.config.protobuf && self.decoders.has_protobuf()
    }

    pub(crate) fn decoder(&self) -> Decoder<K> {
        Decoder::new(Arc::clone(&self.fifo), self.pool.clone())
            .skip_managed_fields(self.config.skip_managed_fields)
            .decoders(self.decoders)
            .shard(self.target.shard_selector().cloned())
    }

    /// Waits while the queue holds more than `max_queued_keys` keys, so the
    /// reader never runs far ahead of the processor pool (a relist then
    /// replaces objects about as fast as it receives them).
    pub(crate) async fn wait_for_room(&self, token: &CancellationToken) -> Result<(), Stop> {
        while self.fifo.len() > self.config.max_queued_keys {
            or_stop(token, tokio::time::sleep(Duration::from_millis(1))).await?;
        }
        Ok(())
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

    /// A handle that changes this reflector's shard while it runs (see
    /// [`ShardControl`]); it starts at the target's.
    pub fn shard_control(&self) -> ShardControl {
        self.shard.clone()
    }

    /// Lists and watches until `shutdown` is cancelled or the FIFO is closed.
    /// Never returns because of a recoverable error.
    pub async fn run(mut self, shutdown: CancellationToken) {
        // Marks the reflector stopped however its run ends (a panic
        // included), for health checks.
        let metrics = self.metrics.clone();
        let mut stopped = StopGuard {
            health: &metrics.0.health,
            why: "shutdown",
        };
        let mut st = State {
            last_rv: String::new(),
            rv_unavailable: false,
            paginated_result: false,
            synced_once: false,
            watched_once: false,
            watch_list_unsupported: false,
            backoff: Backoff::new(self.config.backoff.clone()),
        };
        tracing::debug!(reflector = %self.name, "reflector starting");
        let mut shards = self.shard.subscribe();
        let mut relist_now = true;
        loop {
            if !relist_now && self.sleep_backoff(&mut st, &shutdown, None).await.is_err() {
                break;
            }
            let shard = shards.borrow_and_update().clone();
            self.target = self.target.clone().with_shard(shard);
            // A new shard ends this cycle wherever it is, and the next one
            // lists the new shard at once.
            let resharded = async {
                while shards.changed().await.is_ok() {
                    if *shards.borrow() != self.target.shard_selector().cloned() {
                        return;
                    }
                }
                std::future::pending::<()>().await;
            };
            tokio::select! {
                cycle = self.list_and_watch(&mut st, &shutdown) => {
                    if cycle.is_err() {
                        break;
                    }
                    relist_now = false;
                }
                () = resharded => {
                    bump(&self.counters().reshards);
                    tracing::info!(reflector = %self.name, shard = ?shards.borrow().as_ref().map(ToString::to_string), "shard changed; relisting");
                    relist_now = true;
                }
            }
        }
        if !shutdown.is_cancelled() {
            stopped.why = "queue closed";
        }
        tracing::debug!(reflector = %self.name, why = stopped.why, "reflector stopped");
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.metrics.0
    }

    pub(crate) fn report(&self, e: &ReflectorError) {
        bump(&self.counters().errors);
        self.counters().health.error_seen(e);
        tracing::warn!(reflector = %self.name, kind = e.kind(), error = %e, "list/watch error");
        if let Some(f) = &self.on_error {
            f(e);
        }
    }

    pub(crate) fn set_rv(&self, st: &mut State, rv: &str) {
        if !rv.is_empty() && rv != st.last_rv {
            // Once per event while watching: both copies reuse their buffers.
            st.last_rv.clear();
            st.last_rv.push_str(rv);
            self.counters().last_rv.lock().clone_from(&st.last_rv);
        }
    }

    pub(crate) async fn sleep_backoff(
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
        self.counters().health.set_phase(Phase::BackingOff);
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
        bump(&self.counters().lists_started);
        let health = &self.counters().health;
        health.set_phase(Phase::Listing);
        if st.synced_once {
            health.relist_begun();
        }
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
                    Ok(lines) => (EventStream::new(lines, self.decoder()), Instant::now()),
                    Err(e) => {
                        self.report(&e);
                        // Nothing was lost: the next watch resumes where
                        // the last one ended.
                        if e.is_too_many_requests()
                            || e.is_connection_refused()
                            || matches!(e, ReflectorError::IdleTimeout(_))
                        {
                            let floor = e.status().and_then(|st| st.retry_after);
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
        let protobuf = self.asks_protobuf();
        let req = match self
            .target
            .watch_request_as(rv, self.watch_timeout(), watch_list, protobuf)
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
        // The idle timeout holds from the moment the request is sent: a
        // server that accepts the connection and never answers is left.
        let idle = self.config.idle_timeout;
        let lines = match &self.direct {
            Some(direct) => {
                let answer = async { check(direct.send(req).await?).await };
                answered_within(token, idle, answer).await?.map(|r| {
                    bump(&self.counters().direct_watches);
                    self.lines_of(r)
                })
            }
            None => answered_within(token, idle, send(&self.client, req))
                .await?
                .map(|r| self.lines_of(r)),
        };
        if lines.is_ok() && !watch_list {
            self.counters().health.set_phase(Phase::Watching);
        }
        Ok(lines)
    }

    /// The lines (or protobuf frames) of a watch's answer.
    fn lines_of<B>(&self, resp: http::Response<B>) -> Lines
    where
        B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let framed = is_protobuf(&resp);
        let (idle, body) = (self.config.idle_timeout, resp.into_body());
        if framed {
            bump(&self.counters().protobuf_watches);
            Lines::frames(body, idle)
        } else {
            Lines::new(body, idle)
        }
    }

    /// Feeds one object to the queue; `Err(Stop)` when the queue is closed.
    pub(crate) fn apply(&self, res: Result<(), InformerError>) -> Result<(), Stop> {
        match res {
            Ok(()) => Ok(()),
            Err(InformerError::Closed) => Err(Stop),
            Err(e) => {
                bump(&self.counters().decode_errors);
                self.report(&ReflectorError::Fifo(e));
                Ok(())
            }
        }
    }

    pub(crate) fn skip(&self, e: &ReflectorError) {
        if matches!(e, ReflectorError::OutsideShard { .. }) {
            bump(&self.counters().shard_filtered);
            return;
        }
        bump(&self.counters().decode_errors);
        self.report(e);
    }

    /// Queues watched changes in order, under one lock of the queue, then
    /// records `rv` (the last of their batch, a bookmark's included) as
    /// synced; `Err(Stop)` when the queue is closed.
    fn push_run(
        &self,
        st: &mut State,
        run: &mut Vec<(Observed, Prepared<K>)>,
        rv: &mut Option<String>,
    ) -> Result<(), Stop> {
        if !run.is_empty() {
            self.counters()
                .events
                .fetch_add(run.len() as u64, std::sync::atomic::Ordering::Relaxed);
            self.counters().health.event_seen();
            self.apply(self.fifo.push_observed(run.drain(..)))?;
        }
        if let Some(rv) = rv.take() {
            self.set_rv(st, &rv);
        }
        Ok(())
    }

    async fn handle_watch(
        &self,
        mut events: EventStream<K>,
        started: Instant,
        st: &mut State,
        token: &CancellationToken,
    ) -> Result<WatchEnd, Stop> {
        let mut count = 0u64;
        // The changes of one decoded batch, queued together: one lock of
        // the queue per batch rather than per event.
        let mut run = Vec::new();
        let mut rv = None;
        loop {
            let batch = match or_stop(token, events.next_batch()).await? {
                Ok(Some(batch)) => batch,
                Ok(None) => {
                    let lasted = started.elapsed();
                    if count == 0 && lasted < self.config.short_watch {
                        self.report(&ReflectorError::VeryShortWatch(lasted));
                        return Ok(WatchEnd::Relist);
                    }
                    tracing::debug!(reflector = %self.name, events = count, "watch ended; re-watching");
                    return Ok(WatchEnd::Rewatch);
                }
                Err(e) => {
                    self.report(&e);
                    let lasted = started.elapsed();
                    if count == 0 && lasted < self.config.short_watch {
                        return Ok(WatchEnd::Relist);
                    }
                    return Ok(WatchEnd::Rewatch);
                }
            };
            for item in batch {
                let DecodedEvent {
                    event,
                    resource_version,
                } = match item {
                    Ok(ev) => ev,
                    Err(e @ ReflectorError::Wire(WireError::MalformedEvent(_))) => {
                        self.push_run(st, &mut run, &mut rv)?;
                        self.report(&e);
                        return Ok(WatchEnd::Relist);
                    }
                    Err(ReflectorError::OutsideShard { resource_version }) => {
                        // Left out, but it moves the watch on.
                        bump(&self.counters().shard_filtered);
                        count += 1;
                        if resource_version.is_some() {
                            rv = resource_version;
                        }
                        continue;
                    }
                    Err(e) => {
                        self.skip(&e);
                        continue;
                    }
                };
                // Any event, a bookmark included, makes the watch more than
                // "very short".
                count += 1;
                match event {
                    WatchEvent::Added(p) => run.push((Observed::Added, p)),
                    WatchEvent::Modified(p) => run.push((Observed::Updated, p)),
                    WatchEvent::Deleted(p) => run.push((Observed::Deleted, p)),
                    WatchEvent::Bookmark { .. } => {
                        bump(&self.counters().bookmarks);
                        self.counters().health.bookmark_seen();
                    }
                    WatchEvent::Error(status) => {
                        let e = ReflectorError::from(status);
                        self.push_run(st, &mut run, &mut rv)?;
                        self.report(&e);
                        if e.is_too_many_requests() {
                            self.sleep_backoff(st, token, None).await?;
                            return Ok(WatchEnd::Rewatch);
                        }
                        return Ok(WatchEnd::Relist);
                    }
                }
                if resource_version.is_some() {
                    rv = resource_version;
                }
            }
            self.push_run(st, &mut run, &mut rv)?;
        }
    }

    /// A WatchList sync: `Some(stream)` (already synced, continue watching
    /// it) or `None` to fall back to LIST for this cycle. The initial events
    /// stream into a [`kinformer_core::ReplaceSession`] as they arrive; the
    /// tombstones follow the initial-events-end bookmark.
    async fn watch_list(
        &self,
        st: &mut State,
        token: &CancellationToken,
    ) -> Result<Option<(EventStream<K>, Instant)>, Stop> {
        let rv = if st.rv_unavailable {
            String::new()
        } else {
            st.last_rv.clone()
        };
        let lines = match self.open_watch(st, true, &rv, token).await? {
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
        let mut events = EventStream::new(lines, self.decoder());
        let mut session = self.fifo.begin_replace().map_err(|_| Stop)?;
        // The listed objects of one decoded batch, queued together.
        let mut run = Vec::new();
        loop {
            let batch = match or_stop(token, events.next_batch()).await? {
                Ok(Some(batch)) => batch,
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
            let mut items = batch.into_iter();
            while let Some(item) = items.next() {
                let item = item.map(|d| d.event);
                if let Ok(WatchEvent::Added(p) | WatchEvent::Modified(p)) = item {
                    run.push(p);
                    continue;
                }
                // Anything else is taken in order after the objects before it.
                self.stream_run(&mut session, &mut run, token).await?;
                match item {
                    // Taken into the run above.
                    Ok(WatchEvent::Added(_) | WatchEvent::Modified(_)) => {}
                    Ok(WatchEvent::Deleted(p)) => self.apply(session.delete(p))?,
                    Ok(WatchEvent::Bookmark {
                        resource_version,
                        initial_events_end: true,
                    }) => {
                        let n = session.len();
                        self.apply(session.finish(&resource_version))?;
                        self.set_rv(st, &resource_version);
                        st.rv_unavailable = false;
                        self.count_sync(st);
                        // The stream goes on as the watch.
                        self.counters().health.set_phase(Phase::Watching);
                        bump(&self.counters().watch_list_syncs);
                        tracing::debug!(reflector = %self.name, objects = n, rv = %resource_version, "synced through watch-list");
                        // The events after the bookmark are the watch's.
                        events.put_back(items.collect());
                        return Ok(Some((events, started)));
                    }
                    Ok(WatchEvent::Bookmark { .. }) => {
                        st.watch_list_unsupported = true;
                        self.report(&ReflectorError::WatchListUnsupported(
                            "bookmark without the initial-events-end annotation".into(),
                        ));
                        return Ok(None);
                    }
                    Ok(WatchEvent::Error(status)) => {
                        let e = ReflectorError::from(status);
                        if e.is_expired() {
                            st.rv_unavailable = true;
                        }
                        self.report(&e);
                        return Ok(None);
                    }
                    Err(e @ ReflectorError::Wire(WireError::MalformedEvent(_))) => {
                        self.report(&e);
                        return Ok(None);
                    }
                    Err(e) => self.skip(&e),
                }
            }
            self.stream_run(&mut session, &mut run, token).await?;
        }
    }

    /// Queues the listed objects in `run` into the replace, once the queue
    /// has room.
    async fn stream_run(
        &self,
        session: &mut ReplaceSession<'_, K>,
        run: &mut Vec<Prepared<K>>,
        token: &CancellationToken,
    ) -> Result<(), Stop> {
        if run.is_empty() {
            return Ok(());
        }
        self.wait_for_room(token).await?;
        self.apply(session.push(run.drain(..)))
    }

    /// Counts a completed list, and has the decode pool make spare chunks
    /// ready for the updates that follow it.
    pub(crate) fn count_sync(&self, st: &mut State) {
        bump(&self.counters().lists);
        if st.synced_once {
            bump(&self.counters().relists);
        }
        st.synced_once = true;
        if let Some(pool) = &self.pool {
            pool.top_up_spare_chunks();
        }
    }
}

/// Whether a response is in Kubernetes' protobuf encoding (its watch
/// streams are `application/vnd.kubernetes.protobuf;stream=watch`).
pub(crate) fn is_protobuf<B>(resp: &http::Response<B>) -> bool {
    resp.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with(crate::protobuf::CONTENT_TYPE))
}

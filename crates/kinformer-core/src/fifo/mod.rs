//! The DeltaFIFO: a per-key coalescing queue between producers (the
//! reflector) and the processor pool.
//!
//! The line itself is a crossbeam channel of runs of keys (module `line`): a key
//! is in line at most once, so memory is bounded by the number of distinct
//! keys. The pending deltas live in a map guarded by a mutex that is held
//! only for O(1) map operations (never while a consumer processes deltas),
//! so a producer never waits behind a consumer's work. A popped key is *in
//! flight*: deltas arriving meanwhile accumulate, and the key rejoins the
//! line only when the consumer calls [`DeltaFifo::done`], so the deltas of
//! one key are never processed by two threads at once, and always in order.
//!
//! **Coalescing (a difference from client-go).** client-go's DeltaFIFO
//! keeps every delta of a key and its handlers receive each of them.
//! Here the deltas that wait for one key are folded as they arrive
//! ([`Deltas`], at most two per key): several updates become the newest,
//! and a change between two deletes, never applied, is dropped. The cache
//! always ends in the server's state, and a handler sees a key's states in
//! order, but not every intermediate state of a key that changed faster
//! than it was processed. [`FifoStats::merged`] counts the deltas folded
//! away: once the queue is drained, `enqueued - merged` were applied.

use std::collections::HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::ops::{Deref, DerefMut};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, select};
use kube_core::Resource;
use parking_lot::{Mutex, MutexGuard};

use crate::delta::{DeletedObject, Delta, Deltas};
use crate::error::InformerError;
use crate::indexer::{EarlyDigest, Indexer};
use crate::key::ObjectKey;
use crate::latency;
use crate::panic::caught_panic_message;
use crate::synced::SyncSignal;

/// How long [`DeltaFifo::pop_batch`] waits for a batch to fill while a full
/// list streams in.
pub const LIST_LINGER: Duration = Duration::from_millis(10);

/// How many times the consumer's batch size [`DeltaFifo::pop_batch`] takes
/// while a full list streams in. At a million objects a batch of 4096
/// touches ~2,600 of the 4,096 third-level nodes of every large trie (the
/// cache and each big index value's set) once each, so every change copies
/// a node; four times the batch shares most of those copies (1M
/// metadata-only sync: ~8% faster in interleaved runs).
pub const LIST_BATCH_FACTOR: usize = 4;

/// How long [`DeltaFifo::pop_batch`] lets keys gather, by default, after it
/// had to wait for the first ones and got fewer than [`TRICKLE_KEYS`]: a
/// producer queueing one key at a time otherwise wakes a consumer per key,
/// each woken consumer publishes a batch of one or two, and the fixed cost
/// of a batch (the Indexer's publish, the handlers' hand-over) is paid per
/// key. See [`DeltaFifo::set_trickle_linger`].
pub const TRICKLE_LINGER: Duration = Duration::from_micros(50);

/// The longest sleep of a trickle linger between looks at whether the
/// queue was closed: a long linger set by the user delays a close by at
/// most this much.
const LINGER_STEP: Duration = Duration::from_millis(1);

/// Below this many keys a batch popped after a wait lingers (see
/// [`TRICKLE_LINGER`]).
pub const TRICKLE_KEYS: usize = 32;

mod line;
mod replace;

pub use line::RUN_LEN;
use line::{Line, LineState};
pub use replace::ReplaceSession;

/// A transform applied to every object a producer hands to the FIFO (not to
/// tombstones, nor to resync deltas, which carry cached objects). It must be
/// idempotent: an object may pass through it more than once.
pub type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

type Hasher = foldhash::fast::RandomState;

struct Entry<K> {
    /// Deltas waiting to be popped.
    pending: Option<Deltas<K>>,
    /// A consumer holds this key's earlier deltas.
    in_flight: bool,
    /// The newest non-deleted object handed to the consumer, while in flight.
    in_flight_newest: Option<Arc<K>>,
    /// Part of the first full list (counts towards `has_synced`).
    initial: bool,
    /// The digest of the newest pending object's index inputs, when it
    /// came through [`DeltaFifo::prepare`].
    digest: Option<ObjectDigest>,
    /// When the oldest pending delta was queued, for the keys sampled for
    /// the queue-to-cache latency (one in [`latency::SAMPLE_EVERY`]).
    queued_at: Option<Instant>,
}

/// The digest of an object's index inputs computed by
/// [`DeltaFifo::prepare`], and which object it is of.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ObjectDigest {
    object: usize,
    digest: EarlyDigest,
}

impl ObjectDigest {
    fn of<K>(object: &Arc<K>, digest: EarlyDigest) -> Self {
        Self {
            object: Arc::as_ptr(object).addr(),
            digest,
        }
    }

    /// The digest, when it is `object`'s.
    pub(crate) fn of_object<K>(self, object: &Arc<K>) -> Option<EarlyDigest> {
        (Arc::as_ptr(object).addr() == self.object).then_some(self.digest)
    }
}

struct State<K> {
    items: HashMap<ObjectKey, Entry<K>, Hasher>,
    populated: bool,
    initial_remaining: usize,
    last_sync_resource_version: String,
    line: LineState,
}

/// The queue's state under its lock; keys that joined the line meanwhile
/// are sent when it is released (see [`line`]).
struct Locked<'a, K> {
    st: MutexGuard<'a, State<K>>,
    channel: &'a Line,
}

impl<K> Deref for Locked<'_, K> {
    type Target = State<K>;
    fn deref(&self) -> &State<K> {
        &self.st
    }
}

impl<K> DerefMut for Locked<'_, K> {
    fn deref_mut(&mut self) -> &mut State<K> {
        &mut self.st
    }
}

impl<K> Drop for Locked<'_, K> {
    fn drop(&mut self) {
        self.channel.flush(&mut self.st.line);
    }
}

/// The deltas of one key handed to a consumer by [`DeltaFifo::pop`].
#[derive(Debug)]
pub struct Popped<K> {
    /// The key.
    pub key: ObjectKey,
    /// Its deltas, oldest first.
    pub deltas: Deltas<K>,
    /// Whether the key belongs to the first full list (initial sync).
    pub is_in_initial_list: bool,
    /// The digest of the newest object's index inputs, computed by
    /// [`DeltaFifo::prepare`].
    pub(crate) digest: Option<ObjectDigest>,
    /// When its oldest delta was queued, if it was sampled for the
    /// queue-to-cache latency.
    pub(crate) queued_at: Option<Instant>,
}

/// An object transformed and keyed by [`DeltaFifo::prepare`], ready to queue.
#[derive(Debug)]
pub struct Prepared<K> {
    key: ObjectKey,
    object: Arc<K>,
    /// The digest of the object's index inputs (see
    /// [`IndexFn::with_digest`](crate::IndexFn::with_digest)), computed
    /// here while the object is in this thread's caches.
    digest: EarlyDigest,
}

impl<K> Prepared<K> {
    /// The object's key.
    pub fn key(&self) -> &ObjectKey {
        &self.key
    }

    /// The (transformed) object.
    pub fn object(&self) -> &Arc<K> {
        &self.object
    }
}

/// What a producer saw happen to an object (a watch event's type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// The object appeared.
    Added,
    /// The object changed.
    Updated,
    /// The object was deleted; this is its final state.
    Deleted,
}

impl Observed {
    fn delta<K>(self, obj: Arc<K>) -> Delta<K> {
        match self {
            Observed::Added => Delta::Added(obj),
            Observed::Updated => Delta::Updated(obj),
            Observed::Deleted => Delta::Deleted(DeletedObject::Final(obj)),
        }
    }
}

/// Counters of a [`DeltaFifo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FifoStats {
    /// Deltas accepted.
    pub enqueued: u64,
    /// Deltas folded into a later delta of the same key while it waited
    /// (per-key coalescing, see [`Deltas`]): accepted in
    /// `enqueued`, never applied or delivered on their own.
    pub merged: u64,
    /// Objects refused for lack of a key.
    pub key_errors: u64,
    /// Keys listed more than once in one `replace` (the last one wins).
    pub duplicate_keys: u64,
    /// Tombstones emitted by `replace`.
    pub tombstones: u64,
    /// Transform calls that panicked (the object was dropped).
    pub transform_panics: u64,
}

#[derive(Default)]
struct Counters {
    enqueued: AtomicU64,
    merged: AtomicU64,
    key_errors: AtomicU64,
    duplicate_keys: AtomicU64,
    tombstones: AtomicU64,
    transform_panics: AtomicU64,
}

/// A queue of per-key deltas in first-come order.
pub struct DeltaFifo<K> {
    state: Mutex<State<K>>,
    line: Line,
    close_tx: Mutex<Option<Sender<()>>>,
    close_rx: Receiver<()>,
    closed: AtomicBool,
    /// Full lists open ([`ReplaceSession`]s not yet finished or dropped).
    open_lists: AtomicUsize,
    known: Indexer<K>,
    transform: Option<Transform<K>>,
    counters: Counters,
    /// See [`DeltaFifo::set_trickle_linger`] (nanoseconds).
    trickle_linger_ns: AtomicU64,
    /// Notified when [`DeltaFifo::has_synced`] may have turned true, and
    /// at close (the informer's waits listen to it).
    signal: Arc<SyncSignal>,
}

impl<K: Resource> DeltaFifo<K> {
    /// A FIFO whose `replace` and `resync` consult `known` (the cache the
    /// consumers maintain) for objects that are cached but not queued.
    pub fn new(known: Indexer<K>, transform: Option<Transform<K>>) -> Self {
        let (close_tx, close_rx) = crossbeam_channel::bounded(0);
        Self {
            state: Mutex::new(State {
                items: HashMap::with_hasher(Hasher::default()),
                populated: false,
                initial_remaining: 0,
                last_sync_resource_version: String::new(),
                line: LineState::default(),
            }),
            line: Line::new(),
            signal: Arc::default(),
            open_lists: AtomicUsize::new(0),
            close_tx: Mutex::new(Some(close_tx)),
            close_rx,
            closed: AtomicBool::new(false),
            known,
            transform,
            counters: Counters::default(),
            trickle_linger_ns: AtomicU64::new(nanos(TRICKLE_LINGER)),
        }
    }

    /// Queues an `Added` delta.
    pub fn add(&self, obj: K) -> Result<(), InformerError> {
        self.produce(Observed::Added, obj)
    }

    /// Queues an `Updated` delta.
    pub fn update(&self, obj: K) -> Result<(), InformerError> {
        self.produce(Observed::Updated, obj)
    }

    /// Queues a `Deleted` delta carrying the object's final state.
    pub fn delete(&self, obj: K) -> Result<(), InformerError> {
        self.produce(Observed::Deleted, obj)
    }

    fn produce(&self, what: Observed, obj: K) -> Result<(), InformerError> {
        if self.is_closed() {
            return Err(InformerError::Closed);
        }
        let prepared = self.prepare(obj)?;
        self.push_observed([(what, prepared)])
    }

    /// Queues changes a producer observed and already [prepared](Self::prepare),
    /// in order, under one short lock.
    pub fn push_observed(
        &self,
        changes: impl IntoIterator<Item = (Observed, Prepared<K>)>,
    ) -> Result<(), InformerError> {
        if self.is_closed() {
            return Err(InformerError::Closed);
        }
        let mut st = self.lock();
        if !st.populated {
            // Objects added before any list: synced, as in client-go.
            st.populated = true;
            self.signal.notify();
        }
        for (what, p) in changes {
            // A deletion's object is never written: no digest to carry.
            let digest = (what != Observed::Deleted).then(|| ObjectDigest::of(&p.object, p.digest));
            self.enqueue(&mut st, p.key, what.delta(p.object), false, digest);
        }
        Ok(())
    }

    /// Transforms and keys an incoming object. Call it from any thread (a
    /// decode worker, say) before handing the result to
    /// [`push_observed`](Self::push_observed) or a [`ReplaceSession`]: the
    /// transform then runs where the object was decoded, not under the
    /// queue's lock. A panicking transform or an object without a name is
    /// an error (logged and counted here).
    ///
    /// The object did not come from a decoder: the cache's
    /// [`Provenance`](crate::Provenance) becomes mixed (see
    /// [`prepare_decoded`](Self::prepare_decoded)).
    pub fn prepare(&self, obj: K) -> Result<Prepared<K>, InformerError> {
        self.known.provenance().mark_mixed("DeltaFifo::prepare");
        self.transform_and_key(obj)
    }

    /// [`prepare`](Self::prepare) for an object straight from a decoder: the
    /// cache's provenance stays decoded only (unless a transform runs),
    /// which lets a reclaimer release the object whole once it is replaced.
    ///
    /// # Safety
    /// `obj` was built by one decode, in one `kinformer_alloc::with_object_arena`
    /// scope, and has not been changed since (no part moved in or out, no
    /// field replaced). A reflector's decoders give such objects.
    #[allow(unsafe_code)]
    pub unsafe fn prepare_decoded(&self, obj: K) -> Result<Prepared<K>, InformerError> {
        if self.transform.is_some() {
            self.known.provenance().mark_mixed("a transform");
        }
        self.transform_and_key(obj)
    }

    fn transform_and_key(&self, obj: K) -> Result<Prepared<K>, InformerError> {
        let obj = match &self.transform {
            None => obj,
            Some(t) => catch_unwind(AssertUnwindSafe(|| t(obj))).map_err(|p| {
                self.counters
                    .transform_panics
                    .fetch_add(1, Ordering::Relaxed);
                let msg = caught_panic_message(p);
                tracing::error!(panic = %msg, "transform panicked; object dropped");
                InformerError::TransformPanicked(msg)
            })?,
        };
        match ObjectKey::of(&obj) {
            Ok(key) => Ok(Prepared {
                key,
                digest: self.known.early_digest(&obj),
                object: Arc::new(obj),
            }),
            Err(e) => {
                self.counters.key_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "object refused by the delta FIFO");
                Err(e)
            }
        }
    }

    /// Queues `delta` for `key`; `digest` is that of the delta's object,
    /// when it has one. One delta in [`latency::SAMPLE_EVERY`] that starts a
    /// key's pending run is stamped with the clock, for the queue-to-cache
    /// latency; the others read no clock.
    fn enqueue(
        &self,
        st: &mut State<K>,
        key: ObjectKey,
        delta: Delta<K>,
        initial: bool,
        digest: Option<ObjectDigest>,
    ) {
        let seq = self.counters.enqueued.fetch_add(1, Ordering::Relaxed);
        let stamp = || latency::sampled(seq).then(Instant::now);
        let newly_initial = match st.items.entry(key) {
            MapEntry::Occupied(mut occupied) => {
                let e = occupied.get_mut();
                let newly_initial = initial && !e.initial;
                e.initial |= initial;
                e.digest = digest;
                match &mut e.pending {
                    Some(p) => {
                        let merged = p.push(delta);
                        if merged > 0 {
                            self.counters
                                .merged
                                .fetch_add(merged as u64, Ordering::Relaxed);
                        }
                    }
                    None => {
                        e.pending = Some(Deltas::new(delta));
                        e.queued_at = stamp();
                        if !e.in_flight {
                            // An idle entry is removed by `done`, so this is not reached;
                            // if it were, the key must not be lost: put it in line.
                            let key = occupied.key().clone();
                            self.line.join(&mut st.line, key);
                        }
                    }
                }
                newly_initial
            }
            MapEntry::Vacant(v) => {
                let key = v.key().clone();
                v.insert(Entry {
                    pending: Some(Deltas::new(delta)),
                    in_flight: false,
                    in_flight_newest: None,
                    initial,
                    digest,
                    queued_at: stamp(),
                });
                self.line.join(&mut st.line, key);
                initial
            }
        };
        if newly_initial {
            st.initial_remaining += 1;
        }
    }

    /// Replaces the queue's view of the world with a full list: a
    /// [`ReplaceSession`] fed every object at once, then finished.
    ///
    /// Every listed object gets a `Replaced` delta; every key that is cached
    /// or queued but not listed gets a `Deleted` tombstone
    /// ([`DeletedFinalStateUnknown`](crate::DeletedFinalStateUnknown)) carrying its last known state. Objects
    /// without a key are skipped (logged, counted); a key listed twice keeps
    /// its last object.
    pub fn replace(
        &self,
        objects: impl IntoIterator<Item = K>,
        resource_version: &str,
    ) -> Result<(), InformerError> {
        let mut session = self.begin_replace()?;
        session.push(objects.into_iter().filter_map(|o| self.prepare(o).ok()))?;
        session.finish(resource_version)
    }

    /// Queues a `Sync` delta for every cached key that has nothing pending
    /// or in flight. Returns how many were queued.
    pub fn resync(&self) -> usize {
        let mut st = self.lock();
        let cached = self.known.snapshot();
        let mut n = 0;
        for (key, obj) in cached.iter() {
            if !st.items.contains_key(key) {
                self.enqueue(
                    &mut st,
                    key.clone(),
                    Delta::Sync(Arc::clone(obj)),
                    false,
                    None,
                );
                n += 1;
            }
        }
        n
    }
}

impl<K> DeltaFifo<K> {
    /// Blocks until a key is available (or the FIFO is closed: `None`) and
    /// hands out its deltas. The caller must call [`DeltaFifo::done`] once
    /// the deltas are applied.
    pub fn pop(&self) -> Option<Popped<K>> {
        self.pop_batch(1).and_then(|mut v| v.pop())
    }

    /// Like [`DeltaFifo::pop`], but takes up to `max` keys at once (at least
    /// one; more if they are already waiting). While a full list streams in
    /// (a [`ReplaceSession`] is open), it takes up to [`LIST_BATCH_FACTOR`]
    /// times `max` and waits up to [`LIST_LINGER`] for the batch to fill: a
    /// list's items arrive a few hundred at a time, and applying them in
    /// large batches shares the Indexer's node copies between them.
    pub fn pop_batch(&self, max: usize) -> Option<Vec<Popped<K>>> {
        loop {
            if self.is_closed() {
                return None;
            }
            let listing = self.open_lists.load(Ordering::Relaxed) > 0;
            let max = max.max(1) * if listing { LIST_BATCH_FACTOR } else { 1 };
            // Keys left at the front come first; runs still in the channel
            // after them.
            let mut keys = self.take_front(max);
            self.line.gather(&mut keys, max);
            let waited = keys.is_empty();
            if waited {
                select! {
                    recv(self.line.receiver()) -> run => run.ok()?.append_to(&mut keys),
                    recv(self.close_rx) -> _ => return None,
                }
                self.line.gather(&mut keys, max);
            }
            if keys.len() < max && listing {
                self.line
                    .gather_until(&mut keys, max, Instant::now() + LIST_LINGER);
            } else if waited && keys.len() < TRICKLE_KEYS.min(max) {
                let linger = self.trickle_linger_ns.load(Ordering::Relaxed);
                if linger > 0 {
                    self.linger(Duration::from_nanos(linger));
                    self.line.gather(&mut keys, max);
                }
            }
            let batch = self.take_from_line(keys, max);
            if !batch.is_empty() {
                return Some(batch);
            }
        }
    }

    /// How long [`pop_batch`](Self::pop_batch) lets more keys gather when it
    /// had to wait and was handed fewer than [`TRICKLE_KEYS`] (default
    /// [`TRICKLE_LINGER`]; zero pops them at once). A longer linger makes
    /// larger batches out of a trickle of changes, and delays each change
    /// by up to that much. [`close`](Self::close) ends a linger within a
    /// millisecond; the keys the lingering pop took are still handed out.
    pub fn set_trickle_linger(&self, linger: Duration) {
        self.trickle_linger_ns
            .store(nanos(linger), Ordering::Relaxed);
    }

    /// Sleeps for a trickle linger, in steps of at most [`LINGER_STEP`]
    /// until the queue is closed. Sleeping, not waiting on the channel: the
    /// producer's sends meanwhile find no consumer to wake. (A wait on the
    /// close signal with a timeout instead measured 1.03-1.06x slower in the
    /// core pipeline bench's single updates.)
    fn linger(&self, linger: Duration) {
        // `None`: a linger too long to add to the clock, until the close.
        let end = Instant::now().checked_add(linger);
        loop {
            let now = Instant::now();
            if end.is_some_and(|end| now >= end) || self.is_closed() {
                return;
            }
            std::thread::sleep(end.map_or(LINGER_STEP, |end| (end - now).min(LINGER_STEP)));
        }
    }

    /// Takes what is waiting without blocking (up to `max` keys).
    pub fn try_pop_batch(&self, max: usize) -> Vec<Popped<K>> {
        let max = max.max(1);
        let mut keys = self.take_front(max);
        self.line.gather(&mut keys, max);
        self.take_from_line(keys, max)
    }

    /// Up to `max` keys left at the front of the line (none when it is
    /// empty, without taking the lock).
    fn take_front(&self, max: usize) -> Vec<ObjectKey> {
        if !self.line.has_front() {
            return Vec::new();
        }
        let mut st = self.lock();
        self.line.take_front(&mut st.line, max)
    }

    /// Takes up to `max` of `keys`, taken off the line; the rest waits at
    /// the front. While keys wait there, another consumer is woken for
    /// them (it may be blocked on the channel alone).
    fn take_from_line(&self, mut keys: Vec<ObjectKey>, max: usize) -> Vec<Popped<K>> {
        let batch = {
            let mut st = self.lock();
            self.line.keep(&mut st.line, &mut keys, max);
            Self::take(&mut st, keys)
        };
        if self.line.has_front() {
            self.line.nudge();
        }
        batch
    }

    fn take(st: &mut State<K>, keys: Vec<ObjectKey>) -> Vec<Popped<K>> {
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(e) = st.items.get_mut(&key) else {
                continue;
            };
            let Some(deltas) = e.pending.take() else {
                continue;
            };
            e.in_flight = true;
            e.in_flight_newest = match deltas.newest() {
                Some(Delta::Deleted(_)) | None => None,
                Some(d) => Some(Arc::clone(d.object())),
            };
            let is_in_initial_list = std::mem::take(&mut e.initial);
            out.push(Popped {
                key,
                deltas,
                is_in_initial_list,
                digest: e.digest.take(),
                queued_at: e.queued_at.take(),
            });
        }
        out
    }

    /// Marks popped keys as applied: a key with new deltas rejoins the line,
    /// an idle one is forgotten.
    pub fn done<'a>(&self, popped: impl IntoIterator<Item = (&'a ObjectKey, bool)>) {
        let mut st = self.lock();
        for (key, was_initial) in popped {
            if was_initial {
                st.initial_remaining = st.initial_remaining.saturating_sub(1);
                if st.initial_remaining == 0 && st.populated {
                    self.signal.notify();
                }
            }
            // Most keys have nothing new: one lookup removes them; a key
            // that got deltas meanwhile goes back, and rejoins the line.
            let Some((key, mut e)) = st.items.remove_entry(key) else {
                continue;
            };
            if e.pending.is_some() {
                e.in_flight = false;
                e.in_flight_newest = None;
                self.line.join(&mut st.line, key.clone());
                st.items.insert(key, e);
            }
        }
    }

    /// Whether the first full list (tombstones included) has been popped and
    /// marked done, or objects were added before any list.
    pub fn has_synced(&self) -> bool {
        let st = self.state.lock();
        st.populated && st.initial_remaining == 0
    }

    /// Keys waiting in line (not counting keys in flight).
    pub fn len(&self) -> usize {
        self.line.len()
    }

    /// Whether no key is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The queue's state, locked; keys that join the line under it are
    /// sent when it is released.
    fn lock(&self) -> Locked<'_, K> {
        Locked {
            st: self.state.lock(),
            channel: &self.line,
        }
    }

    /// Keys known to the queue: waiting or in flight.
    pub fn tracked_keys(&self) -> usize {
        self.state.lock().items.len()
    }

    /// The resource version of the last `replace`.
    pub fn last_sync_resource_version(&self) -> String {
        self.state.lock().last_sync_resource_version.clone()
    }

    /// Closes the queue: blocked and future pops return `None`, producers get
    /// [`InformerError::Closed`].
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.close_tx.lock().take();
        self.signal.notify();
    }

    /// The notification of [`has_synced`](Self::has_synced) turning true
    /// (shared with the informer's waits).
    pub(crate) fn sync_signal(&self) -> &Arc<SyncSignal> {
        &self.signal
    }

    /// Whether [`DeltaFifo::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Counters of this queue.
    pub fn stats(&self) -> FifoStats {
        let c = &self.counters;
        FifoStats {
            enqueued: c.enqueued.load(Ordering::Relaxed),
            merged: c.merged.load(Ordering::Relaxed),
            key_errors: c.key_errors.load(Ordering::Relaxed),
            duplicate_keys: c.duplicate_keys.load(Ordering::Relaxed),
            tombstones: c.tombstones.load(Ordering::Relaxed),
            transform_panics: c.transform_panics.load(Ordering::Relaxed),
        }
    }
}

/// `d` in nanoseconds (saturating).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

//! Handler registrations: one thread and one backlog per handler.
//!
//! The processor pool pushes each batch's notifications into every
//! registration's backlog (a mutex held for O(1) work per notification, never
//! while a handler runs) and moves on; the registration's own thread delivers
//! them. While the handler keeps up, a batch waits as it came (a *segment*)
//! and the thread takes it whole. Once [`MAX_WAITING_SEGMENTS`] segments wait,
//! further notifications coalesce per key like the DeltaFIFO's deltas, so a
//! slow handler's backlog is bounded by that many batches plus one entry per
//! distinct key, whatever the event rate.

use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::coalesce::Coalesced;
use crate::handler::{Notification, ResourceEventHandler};
use crate::indexer::Snapshot;
use crate::key::ObjectKey;
use crate::latency::{self, Histogram, LatencyHistogram};
use crate::panic::caught_panic_message;
use crate::reclaimer::{LastReferences, ReclaimerSlot};
use crate::synced::SyncSignal;

type Hasher = foldhash::fast::RandomState;

/// How many pushed batches may wait uncoalesced in a handler's backlog.
/// Past them, notifications coalesce per key until the backlog is empty.
pub const MAX_WAITING_SEGMENTS: usize = 4;

/// How many coalesced keys the delivery thread takes per lock.
const KEYS_PER_TAKE: usize = 64;

/// Notifications of one pushed batch, in order.
struct Segment<K> {
    notes: Vec<(ObjectKey, Notification<K>)>,
    /// How many of them belong to the initial list.
    initial: usize,
    since: Instant,
}

/// The coalesced notifications of one key.
struct Pending<K> {
    notes: Coalesced<Notification<K>>,
    /// How many initial-list notifications were merged into `notes`.
    initial: usize,
    since: Instant,
}

/// Undelivered notifications: every segment is older than every coalesced
/// entry (a push coalesces once segments wait, and keeps doing so until the
/// coalesced entries are delivered), so the thread delivers segments first.
struct Backlog<K> {
    segments: VecDeque<Segment<K>>,
    order: VecDeque<ObjectKey>,
    pending: HashMap<ObjectKey, Pending<K>, Hasher>,
    replay: Option<Arc<Snapshot<K>>>,
    closed: bool,
    /// Takes by the handler's thread, for sampling its wait.
    takes: u64,
}

impl<K> Backlog<K> {
    /// Merges notifications into the per-key entries; returns how many
    /// were folded away (see [`Coalesced::push`]).
    fn coalesce(&mut self, notes: Vec<(ObjectKey, Notification<K>)>, now: Instant) -> u64 {
        let mut merged = 0;
        for (key, note) in notes {
            let initial = usize::from(is_initial(&note));
            if let Some(p) = self.pending.get_mut(&key) {
                merged += p.notes.push(note) as u64;
                p.initial += initial;
            } else {
                self.order.push_back(key.clone());
                self.pending.insert(
                    key,
                    Pending {
                        notes: Coalesced::new(note),
                        initial,
                        since: now,
                    },
                );
            }
        }
        merged
    }
}

/// What the delivery thread took from the backlog in one go.
enum Work<K> {
    Replay(Arc<Snapshot<K>>),
    Segment(Segment<K>),
    Keys(Vec<(ObjectKey, Pending<K>)>),
}

fn is_initial<K>(note: &Notification<K>) -> bool {
    matches!(
        note,
        Notification::Add {
            is_in_initial_list: true,
            ..
        }
    )
}

/// The shared state of one handler registration.
pub(crate) struct Registration<K> {
    pub(crate) id: u64,
    backlog: Mutex<Backlog<K>>,
    ready: Condvar,
    /// Set by `stop`: the thread returns before its next delivery.
    stopping: AtomicBool,
    /// Commits up to this sequence number are already in the replayed snapshot.
    pub(crate) start_seq: AtomicU64,
    pub(crate) resync_period: Option<Duration>,
    pub(crate) next_resync: Mutex<Instant>,
    /// Whether resync notifications are currently delivered to this handler.
    pub(crate) syncing: AtomicBool,
    delivered: AtomicU64,
    /// Notifications folded into others by per-key coalescing.
    merged: AtomicU64,
    /// From a notification's push to its handler's thread taking it up.
    wait: Histogram,
    panics: AtomicU64,
    /// Initial-list notifications (replay included) not yet delivered.
    initial_outstanding: AtomicUsize,
    informer_synced: Arc<AtomicBool>,
    /// Notified when this registration's has-synced may have turned true
    /// or it stopped (shared with its informer).
    signal: Arc<SyncSignal>,
    /// Where delivered notifications' last references go.
    reclaimer: ReclaimerSlot<K>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Counters and backlog of one handler registration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HandlerStats {
    /// Registration id.
    pub id: u64,
    /// Notifications delivered (calls made).
    pub delivered: u64,
    /// Notifications folded into a later one of the same key while this
    /// handler lagged behind (see [`Coalesced`]): never delivered on their
    /// own: once the backlog is empty, delivered + merged = pushed.
    pub merged: u64,
    /// How long its notifications waited, from the cache's update to this
    /// handler's thread taking them up (its lag; with the informer's
    /// `event_to_cache`, an event's way to the handler stage by stage).
    /// Sampled: one take in [`latency::SAMPLE_EVERY`] records the wait of
    /// the oldest notification it takes.
    pub wait: LatencyHistogram,
    /// Calls that panicked (caught; the handler keeps running).
    pub panics: u64,
    /// Undelivered notifications (counted once per key for those coalesced
    /// per key), plus objects of the start-up replay not yet delivered.
    pub backlog: usize,
    /// How long the oldest undelivered notification has waited.
    pub oldest_pending_age: Option<Duration>,
}

impl<K: Send + Sync + 'static> Registration<K> {
    pub(crate) fn new(
        id: u64,
        resync_period: Option<Duration>,
        informer_synced: Arc<AtomicBool>,
        signal: Arc<SyncSignal>,
        reclaimer: ReclaimerSlot<K>,
    ) -> Self {
        Self {
            id,
            backlog: Mutex::new(Backlog {
                segments: VecDeque::new(),
                order: VecDeque::new(),
                pending: HashMap::with_hasher(Hasher::default()),
                replay: None,
                closed: false,
                takes: 0,
            }),
            ready: Condvar::new(),
            stopping: AtomicBool::new(false),
            start_seq: AtomicU64::new(0),
            resync_period,
            next_resync: Mutex::new(Instant::now() + resync_period.unwrap_or_default()),
            syncing: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            merged: AtomicU64::new(0),
            wait: Histogram::default(),
            panics: AtomicU64::new(0),
            initial_outstanding: AtomicUsize::new(0),
            informer_synced,
            signal,
            reclaimer,
            thread: Mutex::new(None),
        }
    }

    /// Sets the snapshot whose objects this handler receives first as
    /// `on_add(obj, true)` (a registration made after start).
    pub(crate) fn set_replay(&self, snapshot: Arc<Snapshot<K>>) {
        self.initial_outstanding
            .fetch_add(snapshot.len(), Ordering::SeqCst);
        self.backlog.lock().replay = Some(snapshot);
        // The delivery thread is already running (spawned before the replay
        // is known) and may be waiting: wake it to deliver the replay.
        self.ready.notify_one();
    }

    /// Starts the delivery thread.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        handler: Box<dyn ResourceEventHandler<K>>,
        name: String,
    ) -> std::io::Result<()> {
        let me = Arc::clone(self);
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || me.run(handler))?;
        *self.thread.lock() = Some(handle);
        Ok(())
    }

    /// Queues notifications (called by the processor pool).
    pub(crate) fn push(&self, notes: impl IntoIterator<Item = (ObjectKey, Notification<K>)>) {
        let syncing = self.syncing.load(Ordering::Relaxed);
        let notes: Vec<_> = notes
            .into_iter()
            .filter(|(_, note)| {
                syncing
                    || !matches!(
                        note,
                        Notification::Update {
                            is_resync: true,
                            ..
                        }
                    )
            })
            .collect();
        let initial = notes.iter().filter(|(_, note)| is_initial(note)).count();
        if notes.is_empty() {
            return;
        }
        {
            let mut b = self.backlog.lock();
            if b.closed {
                return;
            }
            if initial > 0 {
                self.initial_outstanding
                    .fetch_add(initial, Ordering::SeqCst);
            }
            let now = Instant::now();
            if b.pending.is_empty() && b.segments.len() < MAX_WAITING_SEGMENTS {
                b.segments.push_back(Segment {
                    notes,
                    initial,
                    since: now,
                });
            } else {
                let merged = b.coalesce(notes, now);
                if merged > 0 {
                    self.merged.fetch_add(merged, Ordering::Relaxed);
                }
            }
        }
        self.ready.notify_one();
    }

    /// Waits for work: the replay first, then segments, then coalesced keys.
    fn take_work(&self) -> Option<Work<K>> {
        let mut b = self.backlog.lock();
        loop {
            if b.closed {
                return None;
            }
            // The replay is looked for on every wake-up, not only when the
            // thread starts: the thread is spawned before `set_replay`, so
            // checking once at start-up could miss it (the replay was then
            // never delivered and `has_synced` never turned true). It is
            // always set before any notification is pushed (both happen with
            // the Indexer's writes paused, the replay first), so taking it
            // first keeps the replay ahead of them.
            if let Some(snapshot) = b.replay.take() {
                return Some(Work::Replay(snapshot));
            }
            let sampled = latency::sampled(b.takes);
            if let Some(segment) = b.segments.pop_front() {
                b.takes += 1;
                if sampled {
                    self.wait.observe(segment.since.elapsed());
                }
                return Some(Work::Segment(segment));
            }
            if !b.order.is_empty() {
                let n = b.order.len().min(KEYS_PER_TAKE);
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    if let Some(key) = b.order.pop_front()
                        && let Some(p) = b.pending.remove(&key)
                    {
                        keys.push((key, p));
                    }
                }
                b.takes += 1;
                // Keys are taken oldest first: the first waited longest.
                if sampled && let Some((_, oldest)) = keys.first() {
                    self.wait.observe(oldest.since.elapsed());
                }
                return Some(Work::Keys(keys));
            }
            self.ready.wait(&mut b);
        }
    }

    fn run(self: Arc<Self>, mut handler: Box<dyn ResourceEventHandler<K>>) {
        let handler = &mut *handler;
        while let Some(work) = self.take_work() {
            match work {
                Work::Replay(snapshot) => {
                    for (_, obj) in snapshot.iter() {
                        if self.stopping.load(Ordering::Relaxed) {
                            return;
                        }
                        let note = Notification::Add {
                            obj: Arc::clone(obj),
                            is_in_initial_list: true,
                        };
                        self.deliver(handler, &note);
                        self.delivered_initial(1);
                    }
                }
                Work::Segment(segment) => {
                    for (_, note) in &segment.notes {
                        if self.stopping.load(Ordering::Relaxed) {
                            return;
                        }
                        self.deliver(handler, note);
                    }
                    self.delivered_initial(segment.initial);
                    self.release(segment.notes);
                }
                Work::Keys(keys) => {
                    for (_, p) in &keys {
                        for note in p.notes.iter() {
                            if self.stopping.load(Ordering::Relaxed) {
                                return;
                            }
                            self.deliver(handler, note);
                        }
                        self.delivered_initial(p.initial);
                    }
                    self.release(
                        keys.into_iter().flat_map(|(key, p)| {
                            p.notes.into_iter().map(move |n| (key.clone(), n))
                        }),
                    );
                }
            }
        }
    }

    /// Lets go of delivered notifications: through the informer's
    /// reclaimer when one is set (see [`crate::reclaimer`]).
    fn release(&self, notes: impl IntoIterator<Item = (ObjectKey, Notification<K>)>) {
        if let Some(reclaimer) = self.reclaimer.get() {
            let mut garbage = LastReferences::new(&**reclaimer);
            for (key, note) in notes {
                garbage.take(&key, note);
            }
        }
    }

    fn delivered_initial(&self, n: usize) {
        if n > 0 && self.initial_outstanding.fetch_sub(n, Ordering::SeqCst) == n {
            // The last initial notification: has-synced may be true now.
            self.signal.notify();
        }
    }

    fn deliver(&self, handler: &mut dyn ResourceEventHandler<K>, note: &Notification<K>) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| note.deliver(handler))) {
            self.panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                registration = self.id,
                panic = %caught_panic_message(panic),
                "event handler panicked; the informer and other handlers continue"
            );
        }
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.informer_synced.load(Ordering::SeqCst)
            && self.initial_outstanding.load(Ordering::SeqCst) == 0
    }

    pub(crate) fn stats(&self) -> HandlerStats {
        let b = self.backlog.lock();
        let replay = b.replay.as_ref().map_or(0, |s| s.len());
        // At most `MAX_WAITING_SEGMENTS` segments: cheaper to count here
        // than to keep a running total on every push and take.
        let segmented: usize = b.segments.iter().map(|s| s.notes.len()).sum();
        let oldest = match b.segments.front() {
            Some(segment) => Some(segment.since),
            None => b
                .order
                .front()
                .and_then(|k| b.pending.get(k))
                .map(|p| p.since),
        };
        HandlerStats {
            id: self.id,
            delivered: self.delivered.load(Ordering::Relaxed),
            merged: self.merged.load(Ordering::Relaxed),
            wait: self.wait.snapshot(),
            panics: self.panics.load(Ordering::Relaxed),
            backlog: segmented + b.pending.len() + replay,
            oldest_pending_age: oldest.map(|since| since.elapsed()),
        }
    }

    /// Stops delivery and joins the thread (unless called from it).
    pub(crate) fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.backlog.lock().closed = true;
        self.ready.notify_all();
        self.signal.notify();
        let handle = self.thread.lock().take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
        {
            let _ = h.join();
        }
    }
}

/// A handle to one registered handler.
pub struct HandlerRegistration<K> {
    pub(crate) inner: Arc<Registration<K>>,
}

impl<K> Clone for HandlerRegistration<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K: Send + Sync + 'static> HandlerRegistration<K> {
    /// The registration's id (unique within its informer).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// True once the informer has synced and this handler has been handed
    /// every object of the initial list (or of its start-up replay).
    pub fn has_synced(&self) -> bool {
        self.inner.has_synced()
    }

    /// Resolves once [`has_synced`](Self::has_synced) is true, or the
    /// registration was removed or its informer shut down (check
    /// `has_synced` to tell which). Notified, not polled: usable from any
    /// async runtime.
    pub async fn synced(&self) {
        let r = &self.inner;
        r.signal
            .until(|| r.has_synced() || r.stopping.load(Ordering::SeqCst))
            .await;
    }

    /// Blocks until [`has_synced`](Self::has_synced) is true, the
    /// registration stops, or `timeout` passes; whether it has synced.
    pub fn wait_synced_blocking(&self, timeout: Duration) -> bool {
        let r = &self.inner;
        r.signal.until_blocking(
            || r.has_synced() || r.stopping.load(Ordering::SeqCst),
            timeout,
        );
        r.has_synced()
    }

    /// Delivery counters and backlog.
    pub fn stats(&self) -> HandlerStats {
        self.inner.stats()
    }

    /// This handler's resync period, if any.
    pub fn resync_period(&self) -> Option<Duration> {
        self.inner.resync_period
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::delta::DeletedObject;
    use crate::handler::EventHandlerFns;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_core::ObjectMeta;

    fn cm(name: &str, rv: u64) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.to_string()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn update(name: &str, rv: u64) -> (ObjectKey, Notification<ConfigMap>) {
        let note = Notification::Update {
            old: cm(name, rv),
            new: cm(name, rv + 1),
            is_resync: false,
        };
        (ObjectKey::parse(&format!("ns/{name}")), note)
    }

    fn initial_add(name: &str, rv: u64) -> (ObjectKey, Notification<ConfigMap>) {
        let note = Notification::Add {
            obj: cm(name, rv),
            is_in_initial_list: true,
        };
        (ObjectKey::parse(&format!("ns/{name}")), note)
    }

    fn rv(obj: &ConfigMap) -> u64 {
        obj.metadata
            .resource_version
            .as_deref()
            .unwrap()
            .parse()
            .unwrap()
    }

    /// A registration of a synced informer, its thread not started.
    fn synced_registration() -> Arc<Registration<ConfigMap>> {
        Arc::new(Registration::new(
            1,
            None,
            Arc::new(AtomicBool::new(true)),
            Arc::default(),
            Default::default(),
        ))
    }

    #[test]
    fn a_coalesced_add_takes_its_delete_with_it() {
        let reg = synced_registration();
        // Fill the waiting segments so that the next push coalesces.
        for i in 1..=MAX_WAITING_SEGMENTS as u64 {
            reg.push(vec![update("filler", i)]);
        }
        let key = |name: &str| ObjectKey::parse(&format!("ns/{name}"));
        let add = |name: &str, rv| {
            let obj = cm(name, rv);
            let note = Notification::Add {
                obj,
                is_in_initial_list: false,
            };
            (key(name), note)
        };
        let delete = |name: &str, rv| {
            let note = Notification::Delete(DeletedObject::Final(cm(name, rv)));
            (key(name), note)
        };
        reg.push(vec![
            // Never shown to the handler: created, deleted and created again.
            add("new", 1),
            delete("new", 2),
            add("new", 3),
            // Shown before: changed, deleted and created again.
            update("old", 1),
            delete("old", 3),
            add("old", 4),
        ]);
        // "new" kept only its last add (two folded away), "old" its delete
        // and add (the update folded away).
        assert_eq!(reg.stats().merged, 3);
        let (tx, rx) = std::sync::mpsc::channel();
        let (tx_add, tx_update, tx_delete) = (tx.clone(), tx.clone(), tx);
        let handler = EventHandlerFns::new()
            .on_add(move |o: &Arc<ConfigMap>, _| {
                let name = o.metadata.name.clone().unwrap();
                tx_add.send((name, "add", rv(o))).unwrap();
            })
            .on_update(move |_: &Arc<ConfigMap>, new: &Arc<ConfigMap>| {
                let name = new.metadata.name.clone().unwrap();
                tx_update.send((name, "update", rv(new))).unwrap();
            })
            .on_delete(move |d| {
                let o = d.object();
                let name = o.metadata.name.clone().unwrap();
                tx_delete.send((name, "delete", rv(o))).unwrap();
            });
        reg.spawn(Box::new(handler), "test-handler".into()).unwrap();
        let mut got = Vec::new();
        while let Ok(e) = rx.recv_timeout(Duration::from_millis(300)) {
            got.push(e);
        }
        let of = |name: &str| -> Vec<(&str, u64)> {
            got.iter()
                .filter(|(n, ..)| n == name)
                .map(|(_, what, rv)| (*what, *rv))
                .collect()
        };
        assert_eq!(of("new"), vec![("add", 3)], "no delete of an unseen object");
        assert_eq!(of("old"), vec![("delete", 3), ("add", 4)]);
        reg.stop();
    }

    #[test]
    fn batches_past_the_waiting_limit_coalesce_and_every_key_keeps_its_order() {
        let reg = synced_registration();
        // Nothing is delivered yet: the thread starts after the pushes.
        let batches = MAX_WAITING_SEGMENTS as u64 + 2;
        for i in 1..=batches {
            let mut batch = vec![update("a", i), update("b", i)];
            if i == 1 {
                batch.push(initial_add("c", 1));
            }
            if i == batches {
                batch.push(initial_add("d", 1));
                batch.push(initial_add("d", 2));
            }
            reg.push(batch);
        }
        // Segments hold their notifications as pushed; the last two batches
        // coalesced into one entry per key (a, b, d).
        let segmented = MAX_WAITING_SEGMENTS * 2 + 1;
        assert_eq!(reg.stats().backlog, segmented + 3);
        // a, b and d merged once each in the last batch.
        assert_eq!(reg.stats().merged, 3);
        assert!(!reg.has_synced(), "three initial adds are undelivered");

        let (tx, rx) = std::sync::mpsc::channel();
        let (tx_add, tx_update) = (tx.clone(), tx);
        let handler = EventHandlerFns::new()
            .on_add(move |o: &Arc<ConfigMap>, initial| {
                let name = o.metadata.name.clone().unwrap();
                tx_add.send((name, 0, rv(o), initial)).unwrap();
            })
            .on_update(move |old: &Arc<ConfigMap>, new: &Arc<ConfigMap>| {
                let name = new.metadata.name.clone().unwrap();
                tx_update.send((name, rv(old), rv(new), false)).unwrap();
            });
        reg.spawn(Box::new(handler), "test-handler".into()).unwrap();
        let got: Vec<_> = (0..segmented + 3)
            .map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap())
            .collect();
        let of = |name: &str| -> Vec<(u64, u64, bool)> {
            got.iter()
                .filter(|(n, ..)| n == name)
                .map(|(_, old, new, initial)| (*old, *new, *initial))
                .collect()
        };
        let mut expected: Vec<_> = (1..=MAX_WAITING_SEGMENTS as u64)
            .map(|i| (i, i + 1, false))
            .collect();
        // Updates 5→6 and 6→7 merged into one, delivered after the segments.
        let last = MAX_WAITING_SEGMENTS as u64 + 1;
        expected.push((last, last + 2, false));
        assert_eq!(of("a"), expected);
        assert_eq!(of("b"), expected);
        // Every notification pushed was delivered or merged.
        let pushed = 2 * batches as usize + 3;
        let stats = reg.stats();
        assert_eq!((stats.delivered + stats.merged) as usize, pushed);
        assert_eq!(stats.backlog, 0);
        assert_eq!(of("c"), vec![(0, 1, true)]);
        assert_eq!(of("d"), vec![(0, 2, true)], "two initial adds merged");
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "nothing more"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while !reg.has_synced() {
            assert!(Instant::now() < deadline, "initial count not released");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(reg.stats().backlog, 0);
        reg.stop();
    }
}

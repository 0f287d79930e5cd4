//! Handler registrations: one thread and one coalescing backlog per handler.
//!
//! The processor pool pushes notifications into each registration's backlog
//! (a mutex held for O(1) map operations, never while a handler runs) and
//! moves on; the registration's own thread delivers them. A slow handler
//! therefore only grows its own backlog, which coalesces per key like the
//! DeltaFIFO, so it is bounded by the number of distinct keys.

use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::coalesce::Coalesced;
use crate::handler::{Notification, ResourceEventHandler};
use crate::index::panic_message;
use crate::indexer::Snapshot;
use crate::key::ObjectKey;

type Hasher = foldhash::fast::RandomState;

struct Pending<K> {
    notes: Coalesced<Notification<K>>,
    initial: bool,
    since: Instant,
}

struct Backlog<K> {
    order: VecDeque<ObjectKey>,
    pending: HashMap<ObjectKey, Pending<K>, Hasher>,
    replay: Option<Arc<Snapshot<K>>>,
    closed: bool,
}

/// The shared state of one handler registration.
pub(crate) struct Registration<K> {
    pub(crate) id: u64,
    backlog: Mutex<Backlog<K>>,
    ready: Condvar,
    /// Commits up to this sequence number are already in the replayed snapshot.
    pub(crate) start_seq: AtomicU64,
    pub(crate) resync_period: Option<Duration>,
    pub(crate) next_resync: Mutex<Instant>,
    /// Whether resync notifications are currently delivered to this handler.
    pub(crate) syncing: AtomicBool,
    delivered: AtomicU64,
    panics: AtomicU64,
    /// Initial-list notifications (replay included) not yet delivered.
    initial_outstanding: AtomicUsize,
    informer_synced: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Counters and backlog of one handler registration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HandlerStats {
    /// Registration id.
    pub id: u64,
    /// Notifications delivered (calls made).
    pub delivered: u64,
    /// Calls that panicked (caught; the handler keeps running).
    pub panics: u64,
    /// Keys with undelivered notifications, plus objects of the start-up
    /// replay not yet delivered.
    pub backlog: usize,
    /// How long the oldest undelivered notification has waited.
    pub oldest_pending_age: Option<Duration>,
}

impl<K: Send + Sync + 'static> Registration<K> {
    pub(crate) fn new(
        id: u64,
        resync_period: Option<Duration>,
        informer_synced: Arc<AtomicBool>,
    ) -> Self {
        Self {
            id,
            backlog: Mutex::new(Backlog {
                order: VecDeque::new(),
                pending: HashMap::with_hasher(Hasher::default()),
                replay: None,
                closed: false,
            }),
            ready: Condvar::new(),
            start_seq: AtomicU64::new(0),
            resync_period,
            next_resync: Mutex::new(Instant::now() + resync_period.unwrap_or_default()),
            syncing: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            initial_outstanding: AtomicUsize::new(0),
            informer_synced,
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
        let mut new_initial = 0;
        let mut pushed = false;
        {
            let mut b = self.backlog.lock();
            if b.closed {
                return;
            }
            let now = Instant::now();
            for (key, note) in notes {
                let initial = matches!(
                    note,
                    Notification::Add {
                        is_in_initial_list: true,
                        ..
                    }
                );
                if matches!(
                    note,
                    Notification::Update {
                        is_resync: true,
                        ..
                    }
                ) && !syncing
                {
                    continue;
                }
                pushed = true;
                if let Some(p) = b.pending.get_mut(&key) {
                    p.notes.push(note);
                    if initial && !p.initial {
                        p.initial = true;
                        new_initial += 1;
                    }
                } else {
                    b.order.push_back(key.clone());
                    b.pending.insert(
                        key,
                        Pending {
                            notes: Coalesced::new(note),
                            initial,
                            since: now,
                        },
                    );
                    new_initial += usize::from(initial);
                }
            }
            if new_initial > 0 {
                self.initial_outstanding
                    .fetch_add(new_initial, Ordering::SeqCst);
            }
        }
        if pushed {
            self.ready.notify_one();
        }
    }

    fn run(self: Arc<Self>, mut handler: Box<dyn ResourceEventHandler<K>>) {
        loop {
            // The replay is looked for on every wake-up, not only when the
            // thread starts: the thread is spawned before `set_replay`, so
            // checking once at start-up could miss it (the replay was then
            // never delivered and `has_synced` never turned true). It is
            // always set before any notification is pushed (both happen with
            // the Indexer's writes paused, the replay first), so taking it
            // before the queued keys keeps the replay ahead of them.
            let (replay, next) = {
                let mut b = self.backlog.lock();
                loop {
                    if b.closed {
                        return;
                    }
                    if let Some(snapshot) = b.replay.take() {
                        break (Some(snapshot), None);
                    }
                    if let Some(key) = b.order.pop_front()
                        && let Some(p) = b.pending.remove(&key)
                    {
                        break (None, Some(p));
                    }
                    self.ready.wait(&mut b);
                }
            };
            if let Some(snapshot) = replay {
                for (_, obj) in snapshot.iter() {
                    if self.backlog.lock().closed {
                        return;
                    }
                    let note = Notification::Add {
                        obj: Arc::clone(obj),
                        is_in_initial_list: true,
                    };
                    self.deliver(&mut *handler, &note);
                    self.initial_outstanding.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let Some(next) = next else { continue };
            for note in next.notes {
                self.deliver(&mut *handler, &note);
            }
            if next.initial {
                self.initial_outstanding.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn deliver(&self, handler: &mut dyn ResourceEventHandler<K>, note: &Notification<K>) {
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| note.deliver(handler))) {
            self.panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                registration = self.id,
                panic = %panic_message(&*panic),
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
        HandlerStats {
            id: self.id,
            delivered: self.delivered.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
            backlog: b.pending.len() + replay,
            oldest_pending_age: b
                .order
                .front()
                .and_then(|k| b.pending.get(k))
                .map(|p| p.since.elapsed()),
        }
    }

    /// Stops delivery and joins the thread (unless called from it).
    pub(crate) fn stop(&self) {
        self.backlog.lock().closed = true;
        self.ready.notify_all();
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

    /// Delivery counters and backlog.
    pub fn stats(&self) -> HandlerStats {
        self.inner.stats()
    }

    /// This handler's resync period, if any.
    pub fn resync_period(&self) -> Option<Duration> {
        self.inner.resync_period
    }
}

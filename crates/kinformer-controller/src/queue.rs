//! The work queue: a dirty set, a processing set and the ready items.
//!
//! The semantics are those of client-go's `util/workqueue`:
//!
//! * **Stingy**: an item added several times before a worker gets it is
//!   handed out once (the *dirty* set holds every item waiting to be
//!   processed).
//! * **Never twice at once**: an item added while a worker processes it (it
//!   is in the *processing* set) is not queued until that worker calls
//!   [`done`](WorkQueue::done); then it is queued again.
//! * **Fair**: items are handed out in the order they were queued, within
//!   the two [`Priority`] levels (see the `priority` module for how those
//!   share the workers).
//! * **Shutdown**: after [`shutdown`](WorkQueue::shutdown) new items are
//!   ignored, items already queued are still handed out, and getters then
//!   get `None`.
//!
//! # Wake-ups
//!
//! Getters block in two ways: OS threads in [`get`](WorkQueue::get) on a
//! [`parking_lot::Condvar`], tokio tasks in [`next`](WorkQueue::next) on a
//! [`tokio::sync::Notify`]. Every item made ready signals one waiter of each
//! kind (a thread and a task); a waiter that finds nothing left waits again.
//! Neither can lose a wake-up: a thread checks the queue and starts waiting
//! under the queue's mutex, and a task that found nothing ready registers its
//! `Notified` future (`enable`) *before* it checks the queue again, so a
//! signal sent between that check and the wait still reaches it. Two mechanisms rather than one, because a
//! condvar cannot wake a future and blocking a thread on a future would need
//! an executor; a queue used only by threads (or only by tasks) pays nothing
//! for the other kind beyond an uncontended atomic operation per item.
//!
//! # Memory per queued key
//!
//! For [`ObjectKey`] (8 bytes, a pointer to a shared string, so a clone adds
//! no allocation) a queued key costs:
//!
//! * its dirty-map bucket: the key (8) + the add time (8) + a packed
//!   priority/stamp word (8) + 1 control byte = 25 bytes; the map's load
//!   factor is between 7/16 (just grown) and 7/8, so 29 to 57 bytes;
//! * its deque entry: 8 bytes on the Normal deque, 16 (key + stamp) on the
//!   Low deque; a deque holds between 1x and 2x its length, so 8 to 32 bytes.
//!
//! That is about 37 to 89 bytes per queued key, typically ~60, within the
//! 100-byte budget even right after both containers grew. A promotion
//! leaves one extra 16-byte Low entry until it reaches the head. Items being
//! processed (as many as there are workers) cost one more map entry each,
//! and items waiting in the delay heap about 70 bytes each (see `delay`).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kinformer_core::ObjectKey;
use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

use crate::builder::WorkQueueBuilder;
use crate::delay::DelayHeap;
use crate::metrics::DurationHistogram;
use crate::priority::{Priority, ReadyQueue, Slot};
use crate::rate_limit::RateLimiter;

/// The hasher of the queue's maps: fast, and seeded per process so that
/// object names chosen by cluster users cannot force collisions.
pub(crate) type KeyHasher = foldhash::fast::RandomState;

/// A work queue of keys for controller workers, with client-go semantics.
///
/// Cheap to clone: clones share one queue. Producers call
/// [`add`](Self::add) (or [`add_with_priority`](Self::add_with_priority),
/// [`add_after`](Self::add_after), [`add_rate_limited`](Self::add_rate_limited));
/// workers take items with [`get`](Self::get) (threads) or
/// [`next`](Self::next) (tokio tasks) and must call [`done`](Self::done) for
/// every item they took.
///
/// ```
/// use kinformer_controller::{ObjectKey, WorkQueue};
///
/// let queue: WorkQueue = WorkQueue::new();
/// let key = ObjectKey::new(Some("default"), "web-0");
/// queue.add(key.clone());
/// queue.add(key.clone()); // already queued: no-op
/// assert_eq!(queue.len(), 1);
///
/// let worker = {
///     let queue = queue.clone();
///     std::thread::spawn(move || {
///         let mut seen = 0;
///         while let Some(key) = queue.get() {
///             seen += 1; // reconcile `key` here
///             queue.done(&key);
///         }
///         seen
///     })
/// };
/// queue.shutdown_with_drain();
/// assert_eq!(worker.join().unwrap(), 1);
/// ```
pub struct WorkQueue<T = ObjectKey> {
    handle: Arc<Handle<T>>,
}

/// Owned by the clones of one [`WorkQueue`]; when the last is dropped, the
/// delay thread (which holds the [`Shared`] part) is told to exit.
struct Handle<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        self.shared.state.lock().handles_dropped = true;
        self.shared.timer_cond.notify_all();
    }
}

/// The state shared by the queue's clones, its delay thread and its metrics
/// collectors.
pub(crate) struct Shared<T> {
    pub(crate) state: Mutex<State<T>>,
    /// All timestamps are nanoseconds since this instant.
    epoch: Instant,
    pub(crate) name: String,
    /// Blocked [`WorkQueue::get`] callers.
    ready_cond: Condvar,
    /// Waiting [`WorkQueue::next`] callers.
    ready_notify: Notify,
    /// [`WorkQueue::shutdown_with_drain`] callers.
    drained_cond: Condvar,
    /// [`WorkQueue::shutdown_with_drain_async`] callers.
    drained_notify: Notify,
    /// The delay thread.
    pub(crate) timer_cond: Condvar,
    pub(crate) limiter: Box<dyn RateLimiter<T>>,
    pub(crate) queue_duration: DurationHistogram,
    pub(crate) work_duration: DurationHistogram,
}

/// What a dirty item's entry records.
#[derive(Debug, Clone, Copy)]
struct Dirty {
    /// When the item became dirty, for the queue-duration metric.
    added_ns: u64,
    slot: Slot,
}

pub(crate) struct State<T> {
    dirty: HashMap<T, Dirty, KeyHasher>,
    ready: ReadyQueue<T>,
    /// Items handed out and not yet done, with the time they were handed out.
    pub(crate) processing: HashMap<T, u64, KeyHasher>,
    pub(crate) shutting_down: bool,
    draining: bool,
    pub(crate) handles_dropped: bool,
    pub(crate) delay: DelayHeap<T>,
    pub(crate) timer: Option<JoinHandle<()>>,
    pub(crate) adds_total: u64,
    pub(crate) retries_total: u64,
}

/// What [`State::done`] did.
struct Finished {
    worked_ns: u64,
    requeued: bool,
    idle: bool,
}

impl<T: Eq + Hash + Clone> State<T> {
    /// Marks `item` dirty and queues it unless it is being processed.
    /// Returns whether an item was made ready (a getter must be woken).
    pub(crate) fn add(&mut self, item: T, priority: Priority, now_ns: u64) -> bool {
        if self.shutting_down {
            return false;
        }
        match self.dirty.entry(item) {
            Entry::Occupied(mut entry) => {
                let slot = entry.get().slot;
                if priority > slot.priority() {
                    let promoted = if slot.is_queued() {
                        self.ready.promote(entry.key().clone(), now_ns)
                    } else {
                        Slot::waiting(priority)
                    };
                    entry.get_mut().slot = promoted;
                }
                false
            }
            Entry::Vacant(entry) => {
                self.adds_total += 1;
                if self.processing.contains_key(entry.key()) {
                    entry.insert(Dirty {
                        added_ns: now_ns,
                        slot: Slot::waiting(priority),
                    });
                    return false;
                }
                let slot = self.ready.push(entry.key().clone(), priority, now_ns);
                entry.insert(Dirty {
                    added_ns: now_ns,
                    slot,
                });
                true
            }
        }
    }

    /// Hands out the next ready item and how long it was dirty.
    fn pop(&mut self, now_ns: u64) -> Option<(T, u64)> {
        let dirty = &self.dirty;
        let item = self
            .ready
            .pop(now_ns, |item| dirty.get(item).map(|d| d.slot))?;
        let added_ns = match self.dirty.remove(&item) {
            Some(entry) => entry.added_ns,
            None => {
                debug_assert!(false, "a ready item is always dirty");
                now_ns
            }
        };
        self.processing.insert(item.clone(), now_ns);
        Some((item, now_ns.saturating_sub(added_ns)))
    }

    fn done(&mut self, item: &T, now_ns: u64) -> Option<Finished> {
        let started_ns = self.processing.remove(item)?;
        let requeued = match self.dirty.get_mut(item) {
            Some(entry) => {
                entry.slot = self.ready.push(item.clone(), entry.slot.priority(), now_ns);
                true
            }
            None => false,
        };
        Some(Finished {
            worked_ns: now_ns.saturating_sub(started_ns),
            requeued,
            idle: self.processing.is_empty(),
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.ready.len()
    }
}

impl<T> Shared<T> {
    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// The instant `ns` after the epoch, if representable.
    pub(crate) fn instant_at(&self, ns: u64) -> Option<Instant> {
        self.epoch.checked_add(Duration::from_nanos(ns))
    }

    /// Wakes one blocked thread and one waiting task for a newly ready item.
    pub(crate) fn wake_one(&self) {
        self.ready_cond.notify_one();
        self.ready_notify.notify_one();
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// A queue with the defaults: no name, [`default_controller_rate_limiter`](crate::default_controller_rate_limiter),
    /// and [`DEFAULT_MAX_LOW_PRIORITY_WAIT`](crate::DEFAULT_MAX_LOW_PRIORITY_WAIT).
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// A builder to set the queue's name, rate limiter and Low-priority
    /// ageing.
    pub fn builder() -> WorkQueueBuilder<T> {
        WorkQueueBuilder::new()
    }

    pub(crate) fn from_parts(
        name: String,
        limiter: Box<dyn RateLimiter<T>>,
        max_low_priority_wait: Duration,
    ) -> Self {
        let shared = Shared {
            state: Mutex::new(State {
                dirty: HashMap::default(),
                ready: ReadyQueue::new(max_low_priority_wait),
                processing: HashMap::default(),
                shutting_down: false,
                draining: false,
                handles_dropped: false,
                delay: DelayHeap::new(),
                timer: None,
                adds_total: 0,
                retries_total: 0,
            }),
            epoch: Instant::now(),
            name,
            ready_cond: Condvar::new(),
            ready_notify: Notify::new(),
            drained_cond: Condvar::new(),
            drained_notify: Notify::new(),
            timer_cond: Condvar::new(),
            limiter,
            queue_duration: DurationHistogram::default(),
            work_duration: DurationHistogram::default(),
        };
        Self {
            handle: Arc::new(Handle {
                shared: Arc::new(shared),
            }),
        }
    }

    pub(crate) fn shared(&self) -> &Arc<Shared<T>> {
        &self.handle.shared
    }

    /// Adds `item` with [`Priority::Normal`].
    ///
    /// A no-op if the item is already waiting to be processed, or if the
    /// queue is shutting down. If a worker is processing the item, it is
    /// handed out again after that worker's [`done`](Self::done).
    pub fn add(&self, item: T) {
        self.add_with_priority(item, Priority::Normal);
    }

    /// Adds `item` with `priority`; see [`add`](Self::add).
    ///
    /// An item already waiting with [`Priority::Low`] and added again with
    /// [`Priority::Normal`] is promoted (moved to the back of the Normal
    /// items); an item is never demoted.
    pub fn add_with_priority(&self, item: T, priority: Priority) {
        let shared = self.shared();
        let woke = shared.state.lock().add(item, priority, shared.now_ns());
        if woke {
            shared.wake_one();
        }
    }

    /// Takes the next item, blocking the calling thread until one is ready.
    ///
    /// Returns `None` once the queue is shut down and no item is left. The
    /// caller owns the item until it calls [`done`](Self::done) with it. In
    /// async code use [`next`](Self::next) instead.
    pub fn get(&self) -> Option<T> {
        let shared = self.shared();
        let mut state = shared.state.lock();
        loop {
            if let Some((item, waited_ns)) = state.pop(shared.now_ns()) {
                drop(state);
                shared.queue_duration.observe_ns(waited_ns);
                return Some(item);
            }
            if state.shutting_down {
                return None;
            }
            shared.ready_cond.wait(&mut state);
        }
    }

    /// Takes the next item, waiting asynchronously until one is ready.
    ///
    /// Returns `None` once the queue is shut down and no item is left.
    /// Cancel-safe: dropping the future never loses an item, and a wake-up it
    /// received is passed on to another waiter.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use kinformer_controller::WorkQueue;
    ///
    /// let queue: WorkQueue<u32> = WorkQueue::new();
    /// let worker = tokio::spawn({
    ///     let queue = queue.clone();
    ///     async move {
    ///         let mut sum = 0;
    ///         while let Some(n) = queue.next().await {
    ///             sum += n;
    ///             queue.done(&n);
    ///         }
    ///         sum
    ///     }
    /// });
    /// queue.add(1);
    /// queue.add(2);
    /// queue.shutdown();
    /// assert_eq!(worker.await.unwrap(), 3);
    /// # }
    /// ```
    pub async fn next(&self) -> Option<T> {
        let shared = self.shared();
        // A ready item needs no waiter registered: the registration below
        // (a lock of the notifier's list) is paid only by a getter that may
        // have to wait.
        if let Some(item) = self.try_get() {
            return Some(item);
        }
        loop {
            let mut notified = pin!(shared.ready_notify.notified());
            // Registered before the check: a wake-up sent after it is kept.
            notified.as_mut().enable();
            {
                let mut state = shared.state.lock();
                if let Some((item, waited_ns)) = state.pop(shared.now_ns()) {
                    drop(state);
                    shared.queue_duration.observe_ns(waited_ns);
                    return Some(item);
                }
                if state.shutting_down {
                    return None;
                }
            }
            notified.await;
        }
    }

    /// Takes the next item if one is ready, without waiting.
    ///
    /// `None` means nothing is ready now; [`is_shutting_down`](Self::is_shutting_down)
    /// tells whether more can come.
    pub fn try_get(&self) -> Option<T> {
        let shared = self.shared();
        let popped = shared.state.lock().pop(shared.now_ns());
        popped.map(|(item, waited_ns)| {
            shared.queue_duration.observe_ns(waited_ns);
            item
        })
    }

    /// Marks `item`, handed out by a get, as processed.
    ///
    /// If it was added again meanwhile, it is queued again now. A no-op for
    /// an item that is not being processed.
    pub fn done(&self, item: &T) {
        let shared = self.shared();
        let (finished, shutting_down) = {
            let mut state = shared.state.lock();
            (state.done(item, shared.now_ns()), state.shutting_down)
        };
        let Some(finished) = finished else {
            tracing::debug!(queue = %shared.name, "done called for an item not being processed");
            return;
        };
        shared.work_duration.observe_ns(finished.worked_ns);
        if finished.requeued {
            shared.wake_one();
        } else if finished.idle && shutting_down {
            shared.drained_cond.notify_all();
            shared.drained_notify.notify_waiters();
        }
    }

    /// The number of items ready to be handed out (not counting items being
    /// processed or waiting for a delay).
    pub fn len(&self) -> usize {
        self.shared().state.lock().len()
    }

    /// Whether no item is ready to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Shuts the queue down: new items are ignored from now on, items waiting
    /// for a delay are dropped, items already queued are still handed out,
    /// and getters get `None` once none is left.
    ///
    /// Also ends the wait of a [`shutdown_with_drain`](Self::shutdown_with_drain)
    /// in progress without waiting for the drain.
    pub fn shutdown(&self) {
        self.begin_shutdown(false);
    }

    /// Like [`shutdown`](Self::shutdown), then blocks until no item is being
    /// processed: every worker has called [`done`](Self::done) for what it
    /// took.
    ///
    /// As in client-go, the workers must keep calling `done`, or this blocks
    /// forever; a later [`shutdown`](Self::shutdown) ends the wait. It
    /// returns as soon as nothing is being processed, even if queued items
    /// are left to be handed out. In async code use
    /// [`shutdown_with_drain_async`](Self::shutdown_with_drain_async).
    pub fn shutdown_with_drain(&self) {
        self.begin_shutdown(true);
        let shared = self.shared();
        let mut state = shared.state.lock();
        while state.draining && !state.processing.is_empty() {
            shared.drained_cond.wait(&mut state);
        }
    }

    /// [`shutdown_with_drain`](Self::shutdown_with_drain) for async code: the
    /// wait does not block the thread.
    pub async fn shutdown_with_drain_async(&self) {
        self.begin_shutdown(true);
        let shared = self.shared();
        loop {
            let mut notified = pin!(shared.drained_notify.notified());
            notified.as_mut().enable();
            {
                let state = shared.state.lock();
                if !state.draining || state.processing.is_empty() {
                    return;
                }
            }
            notified.await;
        }
    }

    fn begin_shutdown(&self, drain: bool) {
        let shared = self.shared();
        {
            let mut state = shared.state.lock();
            state.shutting_down = true;
            state.draining = drain;
            state.delay.clear();
        }
        shared.ready_cond.notify_all();
        shared.ready_notify.notify_waiters();
        shared.drained_cond.notify_all();
        shared.drained_notify.notify_waiters();
        shared.timer_cond.notify_all();
    }

    /// Whether [`shutdown`](Self::shutdown) (or a drain) was called.
    pub fn is_shutting_down(&self) -> bool {
        self.shared().state.lock().shutting_down
    }

    /// The queue's name, as set with [`WorkQueueBuilder::name`].
    pub fn name(&self) -> &str {
        &self.shared().name
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            handle: Arc::clone(&self.handle),
        }
    }
}

impl<T: Eq + Hash + Clone> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &self.handle.shared;
        let state = shared.state.lock();
        f.debug_struct("WorkQueue")
            .field("name", &shared.name)
            .field("len", &state.len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the per-key estimate in the module docs.
    #[test]
    fn bookkeeping_sizes() {
        assert_eq!(size_of::<(ObjectKey, Dirty)>(), 24);
        assert_eq!(size_of::<ObjectKey>(), 8);
        assert_eq!(size_of::<(ObjectKey, u64)>(), 16);
    }
}

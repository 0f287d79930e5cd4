//! Delayed adds: one min-heap of deadlines per queue, served by one thread.
//!
//! [`WorkQueue::add_after`] records the item in a binary heap keyed by the
//! instant it becomes ready. An item already waiting keeps the earlier of its
//! two deadlines (as client-go does), so it is waiting once. The heap cannot
//! lower a key in place: a deadline moved earlier is pushed anew and the old
//! entry left behind, recognised by its sequence number when it reaches the
//! top and dropped; the heap is rebuilt when such entries outnumber the live
//! ones, so they never take more than half of it.
//!
//! One OS thread per queue, named `workqueue-<name>`, sleeps on a condvar
//! until the earliest deadline (or until woken by an earlier one), then moves
//! the ready items into the queue, in deadline order. A thread rather than a
//! tokio task, so that the queue works without a runtime. It is started by the
//! first delayed add (queues that never delay have none) and exits when the
//! queue shuts down or its last clone is dropped.
//!
//! After [`shutdown`](WorkQueue::shutdown), items still waiting are dropped
//! and later delayed adds are ignored.
//!
//! Should the OS refuse to start the thread, the delayed add logs an error and
//! adds the item at once: it is handed out early rather than lost. The next
//! delayed add tries to start the thread again.
//!
//! Memory: a waiting `ObjectKey` takes a heap entry (deadline, sequence
//! number, key: 24 bytes) and a map entry (key, deadline, sequence number,
//! priority: 32 bytes + 1 control byte), about 70 bytes at typical load.

use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use crate::priority::Priority;
use crate::queue::{KeyHasher, Shared, State, WorkQueue};

/// Stale heap entries tolerated before a rebuild is considered.
const COMPACT_MIN_STALE: usize = 64;

/// Items waiting for their deadline.
pub(crate) struct DelayHeap<T> {
    heap: BinaryHeap<Pending<T>>,
    waiting: HashMap<T, Waiting, KeyHasher>,
    next_seq: u64,
    stale: usize,
}

struct Pending<T> {
    ready_ns: u64,
    seq: u64,
    item: T,
}

struct Waiting {
    ready_ns: u64,
    seq: u64,
    priority: Priority,
}

// `BinaryHeap` is a max-heap: order reversed so the earliest deadline is on
// top; the sequence number keeps equal deadlines in the order they were added.
impl<T> Ord for Pending<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ready_ns, other.seq).cmp(&(self.ready_ns, self.seq))
    }
}

impl<T> PartialOrd for Pending<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> PartialEq for Pending<T> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<T> Eq for Pending<T> {}

impl<T: Eq + Hash + Clone> DelayHeap<T> {
    pub(crate) fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
            waiting: HashMap::default(),
            next_seq: 0,
            stale: 0,
        }
    }

    /// Items waiting.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Records `item` as ready at `ready_ns`, or moves its deadline earlier
    /// if it is waiting already. Returns whether the heap's earliest deadline
    /// changed (the thread must be woken to sleep less).
    fn insert(&mut self, item: T, ready_ns: u64, priority: Priority) -> bool {
        let seq = self.next_seq;
        match self.waiting.entry(item) {
            Entry::Occupied(mut entry) => {
                let waiting = entry.get_mut();
                waiting.priority = waiting.priority.max(priority);
                if ready_ns >= waiting.ready_ns {
                    return false;
                }
                waiting.ready_ns = ready_ns;
                waiting.seq = seq;
                self.stale += 1;
                self.heap.push(Pending {
                    ready_ns,
                    seq,
                    item: entry.key().clone(),
                });
            }
            Entry::Vacant(entry) => {
                self.heap.push(Pending {
                    ready_ns,
                    seq,
                    item: entry.key().clone(),
                });
                entry.insert(Waiting {
                    ready_ns,
                    seq,
                    priority,
                });
            }
        }
        self.next_seq += 1;
        let earliest = self.heap.peek().is_some_and(|top| top.seq == seq);
        self.compact_if_needed();
        earliest
    }

    fn compact_if_needed(&mut self) {
        if self.stale < COMPACT_MIN_STALE || self.stale <= self.waiting.len() {
            return;
        }
        let waiting = &self.waiting;
        self.heap.retain(|pending| {
            waiting
                .get(&pending.item)
                .is_some_and(|w| w.seq == pending.seq)
        });
        self.stale = 0;
    }

    fn is_current(&self, pending: &Pending<T>) -> bool {
        self.waiting
            .get(&pending.item)
            .is_some_and(|w| w.seq == pending.seq)
    }

    /// Drops stale entries on top of the heap.
    fn drop_stale_top(&mut self) {
        while let Some(top) = self.heap.peek() {
            if self.is_current(top) {
                break;
            }
            self.heap.pop();
            self.stale -= 1;
        }
    }

    /// Removes and returns an item whose deadline is at or before `now_ns`.
    fn pop_ready(&mut self, now_ns: u64) -> Option<(T, Priority)> {
        self.drop_stale_top();
        if self.heap.peek()?.ready_ns > now_ns {
            return None;
        }
        let pending = self.heap.pop()?;
        let waiting = self.waiting.remove(&pending.item)?;
        Some((pending.item, waiting.priority))
    }

    /// The earliest deadline.
    fn next_deadline(&mut self) -> Option<u64> {
        self.drop_stale_top();
        self.heap.peek().map(|top| top.ready_ns)
    }

    /// Drops every waiting item.
    pub(crate) fn clear(&mut self) {
        self.heap = BinaryHeap::new();
        self.waiting = HashMap::default();
        self.stale = 0;
    }
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// Adds `item` with [`Priority::Normal`] once `delay` has passed.
    ///
    /// An item already waiting keeps the earlier of its deadlines. A zero
    /// delay adds at once. Ignored once the queue is shutting down; items
    /// still waiting at shutdown are dropped. Counts as a retry in the
    /// `retries_total` metric, as in client-go.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use kinformer_controller::WorkQueue;
    ///
    /// let queue: WorkQueue<&str> = WorkQueue::new();
    /// let start = Instant::now();
    /// queue.add_after("later", Duration::from_millis(20));
    /// assert!(queue.is_empty());
    /// assert_eq!(queue.get(), Some("later"));
    /// assert!(start.elapsed() >= Duration::from_millis(20));
    /// ```
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with_priority(item, delay, Priority::Normal);
    }

    /// Adds `item` with `priority` once `delay` has passed; see
    /// [`add_after`](Self::add_after). An item already waiting keeps the
    /// higher of its priorities.
    pub fn add_after_with_priority(&self, item: T, delay: Duration, priority: Priority) {
        let shared = self.shared();
        let now_ns = shared.now_ns();
        let mut state = shared.state.lock();
        if state.shutting_down {
            return;
        }
        state.retries_total += 1;
        if delay.is_zero() || !ensure_timer(shared, &mut state) {
            let woke = state.add(item, priority, now_ns);
            drop(state);
            if woke {
                shared.wake_one();
            }
            return;
        }
        let delay_ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        let earliest = state
            .delay
            .insert(item, now_ns.saturating_add(delay_ns), priority);
        drop(state);
        if earliest {
            shared.timer_cond.notify_one();
        }
    }
}

/// Starts the delay thread unless it runs. Returns whether it runs.
fn ensure_timer<T>(shared: &Arc<Shared<T>>, state: &mut State<T>) -> bool
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    if state.timer.is_some() {
        return true;
    }
    let name: String = shared.name.chars().filter(|c| *c != '\0').collect();
    let for_thread = Arc::clone(shared);
    match std::thread::Builder::new()
        .name(format!("workqueue-{name}"))
        .spawn(move || run_timer(&for_thread))
    {
        Ok(handle) => {
            state.timer = Some(handle);
            true
        }
        Err(error) => {
            tracing::error!(queue = %shared.name, %error,
                "cannot start the delay thread; adding the item without delay");
            false
        }
    }
}

/// The delay thread: moves items into the queue as their deadlines pass.
fn run_timer<T: Eq + Hash + Clone>(shared: &Shared<T>) {
    let mut state = shared.state.lock();
    loop {
        if state.shutting_down || state.handles_dropped {
            return;
        }
        let now_ns = shared.now_ns();
        while let Some((item, priority)) = state.delay.pop_ready(now_ns) {
            if state.add(item, priority, now_ns) {
                // parking_lot hands a thread woken under the lock straight
                // to the mutex queue: no extra contention.
                shared.wake_one();
            }
        }
        match state
            .delay
            .next_deadline()
            .and_then(|ns| shared.instant_at(ns))
        {
            Some(deadline) => {
                shared.timer_cond.wait_until(&mut state, deadline);
            }
            None => shared.timer_cond.wait(&mut state),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn earlier_deadline_wins_and_stale_entries_are_skipped() {
        let mut heap = DelayHeap::new();
        assert!(heap.insert("a", 100, Priority::Low));
        assert!(!heap.insert("a", 200, Priority::Low));
        assert!(heap.insert("a", 50, Priority::Normal));
        assert_eq!(heap.len(), 1);
        assert_eq!(heap.next_deadline(), Some(50));
        assert_eq!(heap.pop_ready(49), None);
        assert_eq!(heap.pop_ready(60), Some(("a", Priority::Normal)));
        // The entry at 100 is stale.
        assert_eq!(heap.pop_ready(1000), None);
        assert_eq!(heap.next_deadline(), None);
    }

    #[test]
    fn stale_entries_are_compacted() {
        let mut heap = DelayHeap::new();
        for deadline in (0..1000).rev() {
            heap.insert("a", deadline + 1, Priority::Normal);
        }
        assert_eq!(heap.len(), 1);
        assert!(
            heap.heap.len() <= 2 * COMPACT_MIN_STALE,
            "{}",
            heap.heap.len()
        );
    }

    #[test]
    fn timer_thread_exits_at_shutdown() {
        let queue: WorkQueue<u32> = WorkQueue::new();
        queue.add_after(1, Duration::from_secs(60));
        let timer = queue.shared().state.lock().timer.take().unwrap();
        queue.shutdown();
        timer.join().unwrap();
    }

    #[test]
    fn timer_thread_exits_when_the_queue_is_dropped() {
        let queue: WorkQueue<u32> = WorkQueue::new();
        queue.add_after(1, Duration::from_secs(60));
        let timer = queue.shared().state.lock().timer.take().unwrap();
        drop(queue);
        timer.join().unwrap();
    }
}

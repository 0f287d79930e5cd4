//! Two priority levels and the ready queue that orders them.
//!
//! Items ready to be handed out wait in one of two FIFO deques, one per
//! [`Priority`]. [`Priority::Normal`] items go first. A [`Priority::Low`]
//! item is *aged* once it has waited in its deque for at least
//! `max_low_priority_wait`: while the head of the Low deque is aged and Normal
//! items are waiting too, the two deques take turns, one item each. So:
//!
//! * a stream of Normal items never starves a Low item: once aged, the Low
//!   head is handed out within two gets, and the items behind it age in turn;
//! * a huge Low backlog (an informer's initial list) never starves Normal
//!   items either: even when every Low item is aged, a Normal item waits at
//!   most twice as many gets as there are Normal items ahead of it.
//!
//! An item queued Low that is added again as Normal is *promoted*: it is
//! pushed onto the Normal deque and its old Low entry is left behind as a
//! stale entry, recognised (by its stamp) and dropped when it reaches the
//! head. Stamps are strictly increasing nanosecond readings of the queue's
//! clock, so one word serves both as the entry's identity and as the instant
//! it was queued, which the ageing rule reads.

use std::collections::VecDeque;
use std::time::Duration;

/// How urgently an item is to be handed out.
///
/// Two levels are enough for a controller: an informer's initial list and its
/// resyncs are bulk work ([`Low`](Priority::Low)); watch events are live
/// changes ([`Normal`](Priority::Normal)), which should not queue behind
/// thousands of list items. Low items are aged so that they are never starved
/// (see [`WorkQueueBuilder::max_low_priority_wait`](crate::WorkQueueBuilder::max_low_priority_wait)).
///
/// Priorities are ordered: `Priority::Low < Priority::Normal`.
///
/// ```
/// use kinformer_controller::{Priority, WorkQueue};
///
/// let queue: WorkQueue<&str> = WorkQueue::new();
/// queue.add_with_priority("listed", Priority::Low);
/// queue.add("changed"); // Normal
/// assert_eq!(queue.try_get(), Some("changed"));
/// assert_eq!(queue.try_get(), Some("listed"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Bulk work: items from an informer's initial list or a resync.
    Low,
    /// Live changes; what [`WorkQueue::add`](crate::WorkQueue::add) uses.
    #[default]
    Normal,
}

/// The default for [`WorkQueueBuilder::max_low_priority_wait`](crate::WorkQueueBuilder::max_low_priority_wait): one second.
///
/// Long enough that the bursts of live changes a controller sees (a rollout
/// touches its objects within milliseconds) are handled ahead of a bulk list;
/// short enough that a Low item is never out of service for long, however
/// busy the Normal stream. Once aged, Low items only take every other turn,
/// so a shorter wait never more than doubles a Normal item's wait.
pub const DEFAULT_MAX_LOW_PRIORITY_WAIT: Duration = Duration::from_secs(1);

/// The largest stamp: stamps are shifted left by one bit inside a [`Slot`].
const MAX_STAMP: u64 = u64::MAX >> 1;

/// A dirty item's priority and whether it sits in a ready deque, packed in
/// one word to keep the per-key bookkeeping small.
///
/// Bit 0 holds the priority (1 for Normal); the other bits the stamp of the
/// item's ready-deque entry, or 0 while the item is dirty but being processed
/// (it is queued at `done`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot(u64);

impl Slot {
    /// Dirty, not queued: waiting for the item's `done`.
    pub(crate) fn waiting(priority: Priority) -> Self {
        Self(priority_bit(priority))
    }

    fn queued(stamp: u64, priority: Priority) -> Self {
        Self((stamp << 1) | priority_bit(priority))
    }

    pub(crate) fn priority(self) -> Priority {
        if self.0 & 1 == 1 {
            Priority::Normal
        } else {
            Priority::Low
        }
    }

    pub(crate) fn is_queued(self) -> bool {
        self.0 >> 1 != 0
    }
}

fn priority_bit(priority: Priority) -> u64 {
    match priority {
        Priority::Low => 0,
        Priority::Normal => 1,
    }
}

/// The items ready to be handed out, in two FIFO deques.
pub(crate) struct ReadyQueue<T> {
    normal: VecDeque<T>,
    /// Each Low entry carries its stamp: the instant it was queued (for
    /// ageing) and its identity (to recognise entries left by promotion).
    low: VecDeque<(T, u64)>,
    /// Entries in `low` whose item was promoted since.
    stale_low: usize,
    last_stamp: u64,
    /// Whose turn it is when an aged Low head and Normal items compete.
    low_turn: bool,
    max_low_wait_ns: u64,
}

impl<T: Clone> ReadyQueue<T> {
    pub(crate) fn new(max_low_wait: Duration) -> Self {
        Self {
            normal: VecDeque::new(),
            low: VecDeque::new(),
            stale_low: 0,
            last_stamp: 0,
            low_turn: true,
            max_low_wait_ns: u64::try_from(max_low_wait.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Queued items, stale entries not counted.
    pub(crate) fn len(&self) -> usize {
        self.normal.len() + self.low.len() - self.stale_low
    }

    /// Queues `item` and returns the slot its dirty entry must record.
    pub(crate) fn push(&mut self, item: T, priority: Priority, now_ns: u64) -> Slot {
        // Strictly increasing, never 0 (0 marks "not queued").
        let stamp = now_ns.max(self.last_stamp + 1).min(MAX_STAMP);
        self.last_stamp = stamp;
        match priority {
            Priority::Normal => self.normal.push_back(item),
            Priority::Low => self.low.push_back((item, stamp)),
        }
        Slot::queued(stamp, priority)
    }

    /// Moves an item queued Low to the back of the Normal deque.
    pub(crate) fn promote(&mut self, item: T, now_ns: u64) -> Slot {
        self.stale_low += 1;
        self.push(item, Priority::Normal, now_ns)
    }

    /// Takes the next item. `current` tells the slot an item's dirty entry
    /// records, so that stale Low entries are recognised and dropped.
    pub(crate) fn pop(&mut self, now_ns: u64, current: impl Fn(&T) -> Option<Slot>) -> Option<T> {
        while let Some((item, stamp)) = self.low.front() {
            if current(item) == Some(Slot::queued(*stamp, Priority::Low)) {
                break;
            }
            self.low.pop_front();
            self.stale_low -= 1;
        }
        let take_low = match self.low.front() {
            None => false,
            Some(_) if self.normal.is_empty() => true,
            Some((_, stamp)) => {
                let aged = now_ns.saturating_sub(*stamp) >= self.max_low_wait_ns;
                let take = aged && self.low_turn;
                if aged {
                    self.low_turn = !self.low_turn;
                }
                take
            }
        };
        if take_low {
            self.low.pop_front().map(|(item, _)| item)
        } else {
            self.normal.pop_front()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_packs_priority_and_stamp() {
        let waiting = Slot::waiting(Priority::Low);
        assert!(!waiting.is_queued());
        assert_eq!(waiting.priority(), Priority::Low);
        let queued = Slot::queued(MAX_STAMP, Priority::Normal);
        assert!(queued.is_queued());
        assert_eq!(queued.priority(), Priority::Normal);
    }

    #[test]
    fn stamps_strictly_increase_on_a_stuck_clock() {
        let mut ready = ReadyQueue::new(Duration::from_secs(1));
        let a = ready.push(1, Priority::Low, 5);
        let b = ready.push(2, Priority::Low, 5);
        assert_ne!(a, b);
        assert_eq!(ready.len(), 2);
    }

    #[test]
    fn aged_low_head_takes_every_other_turn() {
        let mut ready = ReadyQueue::new(Duration::from_nanos(10));
        let mut slots = std::collections::HashMap::new();
        for i in 0..4 {
            slots.insert(i, ready.push(i, Priority::Low, 1));
        }
        for i in 10..14 {
            slots.insert(i, ready.push(i, Priority::Normal, 2));
        }
        let order: Vec<i32> =
            std::iter::from_fn(|| ready.pop(100, |i| slots.get(i).copied())).collect();
        assert_eq!(order, [0, 10, 1, 11, 2, 12, 3, 13]);
    }
}

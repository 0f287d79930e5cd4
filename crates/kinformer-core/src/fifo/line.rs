//! The line of keys waiting to be popped: a crossbeam channel of *runs* of
//! keys.
//!
//! A key joins the line while its producer holds the queue's lock; the keys
//! that join under one lock are sent as runs of up to [`RUN_LEN`], so a
//! producer pays one channel send per run instead of one per key. (With one
//! send per key, each send's compare-and-swap on the channel's tail waited
//! for the cache line the consumers had just read it through: 2.3% of a
//! 1M-object burst's samples, a tenth of the reader thread's.) A consumer that wants fewer keys than a
//! run holds keeps the rest at the front of the line, under the queue's
//! lock, where every pop looks first.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::key::ObjectKey;

/// Most keys sent in one run.
pub const RUN_LEN: usize = 64;

/// What one send carries: a lone key travels without a vector of its own
/// (a producer that queues one change per lock allocates nothing for it).
pub(super) enum Run {
    /// One key.
    One(ObjectKey),
    /// Several keys, in order (none: a nudge to look at the front).
    Many(Vec<ObjectKey>),
}

impl Run {
    /// Appends the run's keys to `keys`.
    pub(super) fn append_to(self, keys: &mut Vec<ObjectKey>) {
        match self {
            Run::One(key) => keys.push(key),
            Run::Many(run) if keys.is_empty() => *keys = run,
            Run::Many(mut run) => keys.append(&mut run),
        }
    }
}

/// The line's channel and counters (shared, lock-free).
pub(super) struct Line {
    tx: Sender<Run>,
    rx: Receiver<Run>,
    /// Keys sent and not yet taken into a batch (in the channel, at the
    /// front, or received by a consumer that has not yet locked the queue).
    waiting: AtomicUsize,
    /// Keys at the front (read without the lock to skip an empty front).
    front_len: AtomicUsize,
}

/// The line's part kept under the queue's lock.
#[derive(Default)]
pub(super) struct LineState {
    /// Keys joining under the current lock, not yet sent.
    forming: Vec<ObjectKey>,
    /// Keys taken off the channel by a consumer that wanted fewer: they
    /// come before every key still in the channel.
    front: VecDeque<ObjectKey>,
}

impl Line {
    pub(super) fn new() -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        Self {
            tx,
            rx,
            waiting: AtomicUsize::new(0),
            front_len: AtomicUsize::new(0),
        }
    }

    /// The channel consumers wait on (a run, or an empty run asking them to
    /// look at the front).
    pub(super) fn receiver(&self) -> &Receiver<Run> {
        &self.rx
    }

    /// `key` joins the line (sent with the next run).
    pub(super) fn join(&self, ls: &mut LineState, key: ObjectKey) {
        ls.forming.push(key);
        if ls.forming.len() >= RUN_LEN {
            self.flush(ls);
        }
    }

    /// Sends the keys that joined and are not sent yet. Called when a run
    /// fills and before the queue's lock is released.
    pub(super) fn flush(&self, ls: &mut LineState) {
        let n = ls.forming.len();
        let run = match n {
            0 => return,
            // The vector keeps its buffer for the next key.
            1 => Run::One(ls.forming.swap_remove(0)),
            _ => Run::Many(std::mem::take(&mut ls.forming)),
        };
        self.waiting.fetch_add(n, Ordering::Relaxed);
        // The receiver lives as long as `self`: sending cannot fail.
        let _ = self.tx.send(run);
    }

    /// Whether a consumer left keys at the front.
    pub(super) fn has_front(&self) -> bool {
        self.front_len.load(Ordering::Acquire) > 0
    }

    /// Up to `max` keys from the front, oldest first. They still count as
    /// waiting until [`keep`](Self::keep) takes them into a batch.
    pub(super) fn take_front(&self, ls: &mut LineState, max: usize) -> Vec<ObjectKey> {
        let n = max.min(ls.front.len());
        let keys: Vec<ObjectKey> = ls.front.drain(..n).collect();
        self.front_len.store(ls.front.len(), Ordering::Release);
        keys
    }

    /// Keeps `keys` (taken off the line) to `max`: the rest goes to the
    /// front, before every key still in the channel.
    pub(super) fn keep(&self, ls: &mut LineState, keys: &mut Vec<ObjectKey>, max: usize) {
        let rest = if keys.len() > max {
            keys.split_off(max)
        } else {
            Vec::new()
        };
        self.waiting.fetch_sub(keys.len(), Ordering::Relaxed);
        if rest.is_empty() {
            return;
        }
        for key in rest.into_iter().rev() {
            ls.front.push_front(key);
        }
        self.front_len.store(ls.front.len(), Ordering::Release);
    }

    /// Wakes a consumer waiting on the channel, to look at the front.
    pub(super) fn nudge(&self) {
        let _ = self.tx.send(Run::Many(Vec::new()));
    }

    /// Appends runs already in the channel to `keys` while it holds fewer
    /// than `max` (without waiting).
    pub(super) fn gather(&self, keys: &mut Vec<ObjectKey>, max: usize) {
        while keys.len() < max {
            match self.rx.try_recv() {
                Ok(run) => run.append_to(keys),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
    }

    /// Like [`gather`](Self::gather), waiting for runs until `deadline`.
    pub(super) fn gather_until(&self, keys: &mut Vec<ObjectKey>, max: usize, deadline: Instant) {
        while keys.len() < max {
            match self.rx.recv_deadline(deadline) {
                Ok(run) => run.append_to(keys),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
    }

    /// Keys sent and not yet taken into a batch.
    pub(super) fn len(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

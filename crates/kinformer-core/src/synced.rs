//! Waiting for "synced" without polling: [`SyncSignal`] is notified
//! whenever an informer's or a registration's has-synced state may have
//! turned true (or the informer shut down), and waiters, async or
//! blocking, re-check their condition then.

use std::time::{Duration, Instant};

use event_listener::{Event, Listener};

/// A notification that some has-synced state may have changed.
#[derive(Debug, Default)]
pub struct SyncSignal {
    event: Event,
}

impl SyncSignal {
    /// Wakes every waiter to re-check its condition.
    pub fn notify(&self) {
        self.event.notify(usize::MAX);
    }

    /// Resolves once `done()` is true (checked now, then after each
    /// notification).
    pub async fn until(&self, done: impl Fn() -> bool) {
        loop {
            if done() {
                return;
            }
            // Listen before the second check, so that a notification
            // between the check and the wait is not missed.
            let listener = self.event.listen();
            if done() {
                return;
            }
            listener.await;
        }
    }

    /// Blocks until `done()` is true or `timeout` passes (one past the
    /// clock's range is none); whether it is.
    pub fn until_blocking(&self, done: impl Fn() -> bool, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if done() {
                return true;
            }
            let listener = self.event.listen();
            if done() {
                return true;
            }
            match deadline {
                Some(deadline) => {
                    if listener.wait_deadline(deadline).is_none() {
                        return done();
                    }
                }
                None => listener.wait(),
            }
        }
    }
}

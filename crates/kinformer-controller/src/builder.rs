//! Configuring a [`WorkQueue`].

use std::fmt;
use std::hash::Hash;
use std::time::Duration;

use crate::priority::DEFAULT_MAX_LOW_PRIORITY_WAIT;
use crate::queue::WorkQueue;
use crate::rate_limit::{RateLimiter, default_controller_rate_limiter};

/// Builds a [`WorkQueue`]; made by [`WorkQueue::builder`].
///
/// ```
/// use std::time::Duration;
/// use kinformer_controller::{ItemExponential, WorkQueue};
///
/// let queue: WorkQueue = WorkQueue::builder()
///     .name("pods")
///     .rate_limiter(ItemExponential::new(Duration::from_millis(10), Duration::from_secs(60)))
///     .max_low_priority_wait(Duration::from_millis(500))
///     .build();
/// assert_eq!(queue.name(), "pods");
/// ```
pub struct WorkQueueBuilder<T> {
    name: String,
    limiter: Option<Box<dyn RateLimiter<T>>>,
    max_low_priority_wait: Duration,
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueueBuilder<T> {
    pub(crate) fn new() -> Self {
        Self {
            name: String::new(),
            limiter: None,
            max_low_priority_wait: DEFAULT_MAX_LOW_PRIORITY_WAIT,
        }
    }

    /// The queue's name: the `name` label of its metrics and part of its
    /// delay thread's name. Empty by default.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The limiter behind [`WorkQueue::add_rate_limited`]; by default
    /// [`default_controller_rate_limiter`].
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.limiter = Some(Box::new(limiter));
        self
    }

    /// How long a [`Priority::Low`](crate::Priority::Low) item waits before
    /// it is aged: from then on it takes turns with the Normal items instead
    /// of waiting for them to run out. By default
    /// [`DEFAULT_MAX_LOW_PRIORITY_WAIT`]; zero makes the two levels take
    /// turns whenever both have items.
    pub fn max_low_priority_wait(mut self, wait: Duration) -> Self {
        self.max_low_priority_wait = wait;
        self
    }

    /// Makes the queue. Never fails: the delay thread is started by the first
    /// delayed add (see [`WorkQueue::add_after`]).
    pub fn build(self) -> WorkQueue<T> {
        let limiter = self
            .limiter
            .unwrap_or_else(|| Box::new(default_controller_rate_limiter()));
        WorkQueue::from_parts(self.name, limiter, self.max_low_priority_wait)
    }
}

impl<T> fmt::Debug for WorkQueueBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkQueueBuilder")
            .field("name", &self.name)
            .field("custom_rate_limiter", &self.limiter.is_some())
            .field("max_low_priority_wait", &self.max_low_priority_wait)
            .finish()
    }
}

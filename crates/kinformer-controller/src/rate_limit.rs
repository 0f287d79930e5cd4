//! Rate limiters: how long a failed item waits before it is retried.
//!
//! A [`RateLimiter`] answers "when may this item be retried?" each time a
//! worker gives up on an item for now ([`WorkQueue::add_rate_limited`]), and
//! is told to [`forget`](RateLimiter::forget) the item once it succeeds.
//! The limiters are client-go's: [`ItemExponential`] (per-item exponential
//! backoff), [`TokenBucket`] (an overall rate, by reservation), [`MaxOf`]
//! (the longest of several), and [`default_controller_rate_limiter`].

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::queue::{KeyHasher, WorkQueue};

/// Decides how long an item waits before it is retried.
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` must wait now. Each call counts as one more failure
    /// of the item (or takes one more token).
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item`: its next failure counts as its first.
    fn forget(&self, item: &T);
    /// How many times `item` was retried since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

/// Shares one limiter (say, one overall [`TokenBucket`]) between queues.
impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

/// Per-item exponential backoff: `base * 2^failures`, capped at `max`.
///
/// ```
/// use std::time::Duration;
/// use kinformer_controller::{ItemExponential, RateLimiter};
///
/// let limiter = ItemExponential::new(Duration::from_millis(5), Duration::from_secs(1));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// assert_eq!(limiter.when(&"b"), Duration::from_millis(5));
/// limiter.forget(&"a");
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// ```
pub struct ItemExponential<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32, KeyHasher>>,
}

impl<T> ItemExponential<T> {
    /// Backoff from `base`, doubling with each failure of an item, up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::default()),
        }
    }
}

/// `base * 2^exp`, or `max` if that is larger or does not fit.
fn backoff(base: Duration, max: Duration, exp: u32) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let nanos = 1u128
        .checked_shl(exp)
        .and_then(|factor| base.as_nanos().checked_mul(factor));
    match nanos {
        Some(nanos) if nanos < max.as_nanos() => {
            // Below `max`, so the seconds fit in a u64.
            let secs = u64::try_from(nanos / NANOS_PER_SEC).unwrap_or(u64::MAX);
            let subsec = u32::try_from(nanos % NANOS_PER_SEC).unwrap_or(0);
            Duration::new(secs, subsec)
        }
        _ => max,
    }
}

impl<T: Eq + Hash + Clone + Send + Sync> RateLimiter<T> for ItemExponential<T> {
    fn when(&self, item: &T) -> Duration {
        let exp = {
            let mut failures = self.failures.lock();
            let count = failures.entry(item.clone()).or_insert(0);
            let exp = *count;
            *count = count.saturating_add(1);
            exp
        };
        backoff(self.base, self.max, exp)
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

impl<T> fmt::Debug for ItemExponential<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemExponential")
            .field("base", &self.base)
            .field("max", &self.max)
            .field("tracked_items", &self.failures.lock().len())
            .finish()
    }
}

/// An overall rate: `qps` tokens a second, up to `burst` saved up.
///
/// Each [`when`](RateLimiter::when) reserves the next token and returns how
/// long until it is there, like Go's `rate.Limiter.Reserve().Delay()`: the
/// first `burst` calls return zero, later ones are spaced `1/qps` apart. Items
/// are not told apart; [`forget`](RateLimiter::forget) does nothing and
/// [`num_requeues`](RateLimiter::num_requeues) is 0.
///
/// An infinite `qps` never delays. A `qps` that is zero, negative or NaN
/// grants the burst and then [`Duration::MAX`] ("never"). A `burst` of 0 is
/// taken as 1.
///
/// ```
/// use std::time::Duration;
/// use kinformer_controller::{RateLimiter, TokenBucket};
///
/// let bucket = TokenBucket::new(10.0, 2);
/// assert_eq!(RateLimiter::<u32>::when(&bucket, &1), Duration::ZERO);
/// assert_eq!(RateLimiter::<u32>::when(&bucket, &2), Duration::ZERO);
/// let third = RateLimiter::<u32>::when(&bucket, &3);
/// assert!(third > Duration::from_millis(10) && third <= Duration::from_millis(100));
/// ```
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Tokens at `last`; negative when future tokens are reserved.
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A bucket refilled at `qps` tokens a second, holding up to `burst`;
    /// it starts full.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            state: Mutex::new(Bucket {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    fn reserve(&self) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        let refills = self.qps > 0.0;
        let mut bucket = self.state.lock();
        let now = Instant::now();
        if refills {
            let elapsed = now.saturating_duration_since(bucket.last).as_secs_f64();
            bucket.tokens = (bucket.tokens + elapsed * self.qps).min(self.burst);
        }
        bucket.last = bucket.last.max(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Duration::ZERO;
        }
        if !refills {
            return Duration::MAX;
        }
        bucket.tokens -= 1.0;
        Duration::try_from_secs_f64(-bucket.tokens / self.qps).unwrap_or(Duration::MAX)
    }
}

impl<T> RateLimiter<T> for TokenBucket {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// The longest delay of several limiters; every one is consulted each time.
///
/// [`num_requeues`](RateLimiter::num_requeues) is the largest of theirs and
/// [`forget`](RateLimiter::forget) forgets in all of them.
pub struct MaxOf<T>(pub Vec<Box<dyn RateLimiter<T>>>);

impl<T> RateLimiter<T> for MaxOf<T> {
    fn when(&self, item: &T) -> Duration {
        self.0
            .iter()
            .map(|limiter| limiter.when(item))
            .fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.0 {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.0
            .iter()
            .map(|limiter| limiter.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

impl<T> fmt::Debug for MaxOf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaxOf")
            .field("limiters", &self.0.len())
            .finish()
    }
}

/// client-go's `DefaultControllerRateLimiter`: the longer of a per-item
/// exponential backoff from 5 ms to 1000 s and an overall token bucket of
/// 10 qps with a burst of 100.
///
/// ```
/// use std::time::Duration;
/// use kinformer_controller::{RateLimiter, default_controller_rate_limiter};
///
/// let limiter = default_controller_rate_limiter();
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
/// assert_eq!(limiter.num_requeues(&"a"), 2);
/// ```
pub fn default_controller_rate_limiter<T>() -> MaxOf<T>
where
    T: Eq + Hash + Clone + Send + Sync + 'static,
{
    MaxOf(vec![
        Box::new(ItemExponential::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(TokenBucket::new(10.0, 100)),
    ])
}

impl<T: Eq + Hash + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// Adds `item` after the delay the queue's rate limiter gives it:
    /// [`add_after`](Self::add_after)`(item, limiter.when(&item))`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kinformer_controller::{ItemExponential, WorkQueue};
    ///
    /// let queue: WorkQueue<&str> = WorkQueue::builder()
    ///     .rate_limiter(ItemExponential::new(Duration::from_millis(1), Duration::from_secs(1)))
    ///     .build();
    /// queue.add_rate_limited("flaky");
    /// assert_eq!(queue.num_requeues(&"flaky"), 1);
    /// assert_eq!(queue.get(), Some("flaky"));
    /// queue.done(&"flaky");
    /// queue.forget(&"flaky"); // it succeeded at last
    /// assert_eq!(queue.num_requeues(&"flaky"), 0);
    /// ```
    pub fn add_rate_limited(&self, item: T) {
        if self.is_shutting_down() {
            return;
        }
        let delay = self.shared().limiter.when(&item);
        self.add_after(item, delay);
    }

    /// Tells the rate limiter that `item` succeeded: its backoff starts over.
    pub fn forget(&self, item: &T) {
        self.shared().limiter.forget(item);
    }

    /// How many times `item` was rate-limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.shared().limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_guards_overflow() {
        let max = Duration::MAX;
        assert_eq!(
            backoff(Duration::from_nanos(1), max, 0),
            Duration::from_nanos(1)
        );
        assert_eq!(
            backoff(Duration::from_nanos(1), max, 64),
            Duration::new(18_446_744_073, 709_551_616)
        );
        assert_eq!(backoff(Duration::from_nanos(1), max, 127), max);
        assert_eq!(backoff(Duration::from_nanos(1), max, 128), max);
        assert_eq!(backoff(Duration::from_secs(1), max, u32::MAX), max);
        assert_eq!(
            backoff(Duration::from_secs(3), Duration::from_secs(100), 5),
            Duration::from_secs(96)
        );
        assert_eq!(
            backoff(Duration::from_secs(3), Duration::from_secs(100), 6),
            Duration::from_secs(100)
        );
    }
}

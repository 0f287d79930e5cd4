//! Exponential backoff with jitter that resets after a quiet period, as
//! client-go's reflector uses (800 ms → 30 s, factor 2, jitter 1.0, reset
//! after 2 minutes without a backoff).

use std::time::{Duration, Instant};

use rand::Rng;

/// Parameters of a [`Backoff`].
///
/// ```
/// use std::time::Duration;
/// use kinformer_reflector::BackoffConfig;
/// let c = BackoffConfig::default();
/// assert_eq!(c.initial.as_millis(), 800);
/// assert_eq!(c.max.as_secs(), 30);
/// let quick = BackoffConfig::default().initial(Duration::from_millis(20)).jitter(0.0);
/// assert_eq!(quick.initial.as_millis(), 20);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BackoffConfig {
    /// First delay (default 800 ms).
    pub initial: Duration,
    /// Largest delay before jitter (default 30 s).
    pub max: Duration,
    /// Growth factor per backoff (default 2).
    pub factor: f64,
    /// Random extra delay, as a fraction of the delay (default 1.0: up to +100%).
    pub jitter: f64,
    /// A backoff requested this long after the previous one starts again
    /// from `initial` (default 2 minutes).
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            factor: 2.0,
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

impl BackoffConfig {
    /// Sets [`BackoffConfig::initial`].
    pub fn initial(mut self, delay: Duration) -> Self {
        self.initial = delay;
        self
    }

    /// Sets [`BackoffConfig::max`].
    pub fn max(mut self, delay: Duration) -> Self {
        self.max = delay;
        self
    }

    /// Sets [`BackoffConfig::factor`].
    pub fn factor(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }

    /// Sets [`BackoffConfig::jitter`].
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// Sets [`BackoffConfig::reset_after`].
    pub fn reset_after(mut self, after: Duration) -> Self {
        self.reset_after = after;
        self
    }
}

/// The state of an exponential backoff.
///
/// ```
/// use std::time::Duration;
/// use kinformer_reflector::{Backoff, BackoffConfig};
/// let mut b = Backoff::new(BackoffConfig::default().jitter(0.0));
/// assert_eq!(b.next_delay(), Duration::from_millis(800));
/// assert_eq!(b.next_delay(), Duration::from_millis(1600));
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    current: Duration,
    last: Option<Instant>,
}

impl Backoff {
    /// A fresh backoff.
    pub fn new(config: BackoffConfig) -> Self {
        Self {
            current: config.initial,
            config,
            last: None,
        }
    }

    /// The delay to wait now; grows the next one.
    pub fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|l| now.duration_since(l) >= self.config.reset_after)
        {
            self.current = self.config.initial;
        }
        self.last = Some(now);
        let base = self.current;
        let grown = base.mul_f64(self.config.factor.max(1.0));
        self.current = grown.min(self.config.max).max(self.config.initial);
        let jitter = if self.config.jitter > 0.0 {
            base.mul_f64(rand::rng().random_range(0.0..self.config.jitter))
        } else {
            Duration::ZERO
        };
        base + jitter
    }

    /// Starts again from the initial delay.
    pub fn reset(&mut self) {
        self.current = self.config.initial;
        self.last = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_max_and_jitters_within_bounds() {
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..BackoffConfig::default()
        });
        let delays: Vec<u128> = (0..8).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(
            delays,
            vec![800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]
        );
        let mut j = Backoff::new(BackoffConfig::default());
        for _ in 0..20 {
            let d = j.next_delay();
            assert!(d >= Duration::from_millis(800) && d <= Duration::from_secs(60));
        }
    }

    #[test]
    fn resets_after_quiet_period() {
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            reset_after: Duration::from_millis(20),
            ..BackoffConfig::default()
        });
        b.next_delay();
        b.next_delay();
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(b.next_delay(), Duration::from_millis(800));
    }
}

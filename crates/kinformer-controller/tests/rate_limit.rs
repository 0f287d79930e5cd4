//! Rate limiters, after client-go's `default_rate_limiters_test.go`.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use kinformer_controller::{
    ItemExponential, MaxOf, RateLimiter, TokenBucket, WorkQueue, default_controller_rate_limiter,
};

const MS: Duration = Duration::from_millis(1);

#[test]
fn item_exponential_backoff_sequence() {
    let limiter = ItemExponential::new(MS, Duration::from_secs(1));
    let delays: Vec<Duration> = (0..5).map(|_| limiter.when(&"one")).collect();
    assert_eq!(delays, [MS, 2 * MS, 4 * MS, 8 * MS, 16 * MS]);
    assert_eq!(limiter.num_requeues(&"one"), 5);

    // Items are tracked apart.
    assert_eq!(limiter.when(&"two"), MS);
    assert_eq!(limiter.when(&"two"), 2 * MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);

    // Forget resets the backoff.
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), MS);
    assert_eq!(limiter.num_requeues(&"two"), 2);
}

#[test]
fn item_exponential_is_capped_and_never_overflows() {
    let max = Duration::from_secs(1);
    let limiter = ItemExponential::new(MS, max);
    let delays: Vec<Duration> = (0..200).map(|_| limiter.when(&0u8)).collect();
    assert_eq!(delays[9], 512 * MS);
    assert_eq!(delays[10], max);
    assert!(delays[10..].iter().all(|d| *d == max));
    assert!(delays.windows(2).all(|w| w[0] <= w[1]));

    // A huge cap: the doubling itself must saturate, not wrap or panic.
    let unbounded = ItemExponential::new(Duration::from_secs(1), Duration::MAX);
    let last = (0..1000).fold(Duration::ZERO, |_, _| unbounded.when(&0u8));
    assert_eq!(last, Duration::MAX);
}

#[test]
fn bucket_limiter_burst_then_qps_spacing() {
    let bucket = TokenBucket::new(1.0, 3);
    let when = |n: u32| RateLimiter::<u32>::when(&bucket, &n);
    // The burst is free.
    for n in 0..3 {
        assert_eq!(when(n), Duration::ZERO);
    }
    // Then one token a second, reserved one after the other.
    let fourth = when(3);
    let fifth = when(4);
    let sixth = when(5);
    assert!(
        fourth > Duration::from_millis(500) && fourth <= Duration::from_secs(1),
        "{fourth:?}"
    );
    assert!(fifth > fourth + Duration::from_millis(500), "{fifth:?}");
    assert!(
        sixth > fifth + Duration::from_millis(500) && sixth <= Duration::from_secs(3),
        "{sixth:?}"
    );
    // The bucket does not tell items apart.
    assert_eq!(RateLimiter::<u32>::num_requeues(&bucket, &3), 0);
}

#[test]
fn bucket_limiter_refills_over_time() {
    let bucket = TokenBucket::new(100.0, 1);
    assert_eq!(RateLimiter::<u8>::when(&bucket, &0), Duration::ZERO);
    std::thread::sleep(Duration::from_millis(50));
    // 50 ms at 100 qps refilled the one-token bucket.
    assert_eq!(RateLimiter::<u8>::when(&bucket, &0), Duration::ZERO);
}

#[test]
fn bucket_limiter_edge_rates() {
    let unlimited = TokenBucket::new(f64::INFINITY, 1);
    for _ in 0..1000 {
        assert_eq!(RateLimiter::<u8>::when(&unlimited, &0), Duration::ZERO);
    }
    let never = TokenBucket::new(0.0, 2);
    assert_eq!(RateLimiter::<u8>::when(&never, &0), Duration::ZERO);
    assert_eq!(RateLimiter::<u8>::when(&never, &0), Duration::ZERO);
    assert_eq!(RateLimiter::<u8>::when(&never, &0), Duration::MAX);
    let nan = TokenBucket::new(f64::NAN, 1);
    assert_eq!(RateLimiter::<u8>::when(&nan, &0), Duration::ZERO);
    assert_eq!(RateLimiter::<u8>::when(&nan, &0), Duration::MAX);
}

#[test]
fn max_of() {
    let limiter = MaxOf(vec![
        Box::new(ItemExponential::new(MS, Duration::from_secs(1))),
        Box::new(ItemExponential::new(20 * MS, 100 * MS)),
    ]);
    let delays: Vec<Duration> = (0..8).map(|_| limiter.when(&"one")).collect();
    // max(1, 20), max(2, 40), max(4, 80), max(8, 100), ..., max(128, 100)
    let expected = [20, 40, 80, 100, 100, 100, 100, 128].map(|ms| ms * MS);
    assert_eq!(delays, expected);
    assert_eq!(limiter.num_requeues(&"one"), 8);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), 20 * MS);
}

#[test]
fn default_limiter_values() {
    let limiter = default_controller_rate_limiter();
    // Per item: 5 ms, doubling.
    assert_eq!(limiter.when(&0u32), 5 * MS);
    assert_eq!(limiter.when(&0u32), 10 * MS);
    assert_eq!(limiter.when(&0u32), 20 * MS);
    assert_eq!(limiter.num_requeues(&0u32), 3);
    // The bucket: 100 tokens in all (3 taken above), then 10 a second.
    let start = Instant::now();
    for item in 1..98u32 {
        assert_eq!(limiter.when(&item), 5 * MS, "item {item}");
    }
    let after_burst = limiter.when(&1000);
    let elapsed = start.elapsed();
    assert!(
        after_burst > Duration::from_millis(50).saturating_sub(elapsed) && after_burst <= 100 * MS,
        "{after_burst:?}"
    );
    // The exponential cap: 5 ms * 2^18 > 1000 s.
    let capped = (0..25).fold(Duration::ZERO, |_, _| limiter.when(&7u32));
    assert_eq!(capped, Duration::from_secs(1000));
}

#[test]
fn shared_limiter_through_arc() {
    let shared = Arc::new(ItemExponential::new(MS, Duration::from_secs(1)));
    let a: WorkQueue<&str> = WorkQueue::builder()
        .rate_limiter(Arc::clone(&shared))
        .build();
    let b: WorkQueue<&str> = WorkQueue::builder()
        .rate_limiter(Arc::clone(&shared))
        .build();
    a.add_rate_limited("x");
    b.add_rate_limited("x");
    assert_eq!(shared.num_requeues(&"x"), 2);
    assert_eq!(b.num_requeues(&"x"), 2);
}

#[test]
fn queue_rate_limited_adds() {
    let queue: WorkQueue<&str> = WorkQueue::builder()
        .rate_limiter(ItemExponential::new(20 * MS, Duration::from_secs(1)))
        .build();
    let start = Instant::now();
    queue.add_rate_limited("one");
    assert_eq!(queue.try_get(), None, "waits for its backoff");
    assert_eq!(queue.num_requeues(&"one"), 1);
    assert_eq!(queue.get(), Some("one"));
    assert!(start.elapsed() >= 20 * MS);
    queue.done(&"one");

    // A second failure waits twice as long.
    let start = Instant::now();
    queue.add_rate_limited("one");
    assert_eq!(queue.get(), Some("one"));
    assert!(start.elapsed() >= 40 * MS);
    assert_eq!(queue.num_requeues(&"one"), 2);
    queue.done(&"one");

    queue.forget(&"one");
    assert_eq!(queue.num_requeues(&"one"), 0);
    assert_eq!(queue.metrics().retries_total, 2);

    // After shutdown a rate-limited add is ignored and counts nothing.
    queue.shutdown();
    queue.add_rate_limited("one");
    assert_eq!(queue.num_requeues(&"one"), 0);
    assert_eq!(queue.get(), None);
}

//! Delayed adds, after client-go's `delaying_queue_test.go`.
#![allow(clippy::unwrap_used)]

use std::thread;
use std::time::{Duration, Instant};

use kinformer_controller::{Priority, WorkQueue};

const SHORT: Duration = Duration::from_millis(50);

#[test]
fn simple_add_after() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    let start = Instant::now();
    queue.add_after("foo", SHORT);
    assert_eq!(queue.len(), 0, "not ready before its delay");
    assert_eq!(queue.try_get(), None);
    assert_eq!(queue.metrics().delayed, 1);
    assert_eq!(queue.get(), Some("foo"));
    assert!(start.elapsed() >= SHORT);
    assert_eq!(queue.metrics().delayed, 0);
}

#[test]
fn zero_delay_adds_at_once() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add_after("now", Duration::ZERO);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.metrics().retries_total, 1);
}

#[test]
fn deduping_earlier_deadline_wins() {
    let queue: WorkQueue<&str> = WorkQueue::new();

    // A later deadline for a waiting item is ignored...
    let start = Instant::now();
    queue.add_after("foo", SHORT);
    queue.add_after("foo", Duration::from_secs(30));
    assert_eq!(queue.metrics().delayed, 1);
    assert_eq!(queue.get(), Some("foo"));
    let waited = start.elapsed();
    assert!(
        waited >= SHORT && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    queue.done(&"foo");

    // ...and an earlier one replaces the later.
    let start = Instant::now();
    queue.add_after("foo", Duration::from_secs(30));
    queue.add_after("foo", SHORT);
    assert_eq!(queue.metrics().delayed, 1);
    assert_eq!(queue.get(), Some("foo"));
    let waited = start.elapsed();
    assert!(
        waited >= SHORT && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    queue.done(&"foo");

    // The replaced deadline does not hand the item out a second time.
    thread::sleep(SHORT);
    assert_eq!(queue.try_get(), None);
    assert_eq!(queue.metrics().delayed, 0);
}

#[test]
fn add_after_ordering_of_many_items() {
    const N: u64 = 40;
    let queue: WorkQueue<u64> = WorkQueue::new();
    // Deadlines in a scrambled order; 37 is coprime to N.
    for i in 0..N {
        let rank = (i * 37) % N;
        queue.add_after(rank, Duration::from_millis(20 + 2 * rank));
    }
    assert_eq!(queue.metrics().delayed, N as usize);
    let order: Vec<u64> = (0..N).map(|_| queue.get().unwrap()).collect();
    let expected: Vec<u64> = (0..N).collect();
    assert_eq!(order, expected, "handed out in deadline order");
}

#[test]
fn equal_deadlines_keep_add_order() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let deadline = Duration::from_millis(30);
    for n in [3, 1, 2] {
        queue.add_after(n, deadline);
    }
    let order: Vec<u32> = (0..3).map(|_| queue.get().unwrap()).collect();
    // Added within microseconds of each other: the deadlines differ by that
    // much, in add order.
    assert_eq!(order, [3, 1, 2]);
}

#[test]
fn delayed_item_already_queued_is_not_duplicated() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add("a");
    queue.add_after("a", Duration::from_millis(10));
    thread::sleep(Duration::from_millis(100));
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.try_get(), Some("a"));
    assert_eq!(queue.try_get(), None);
}

#[test]
fn delayed_add_keeps_its_priority() {
    let queue: WorkQueue<&str> = WorkQueue::builder()
        .max_low_priority_wait(Duration::from_secs(3600))
        .build();
    queue.add_after_with_priority("low", Duration::from_millis(10), Priority::Low);
    thread::sleep(Duration::from_millis(100));
    queue.add("normal");
    assert_eq!(queue.try_get(), Some("normal"));
    assert_eq!(queue.try_get(), Some("low"));
}

#[test]
fn delayed_items_are_dropped_at_shutdown() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add_after("pending", SHORT);
    queue.add("ready");
    queue.shutdown();
    assert_eq!(queue.metrics().delayed, 0);
    thread::sleep(SHORT * 3);
    assert_eq!(queue.get(), Some("ready"));
    assert_eq!(queue.get(), None, "the delayed item was dropped");
    // And a delayed add after shutdown is ignored.
    queue.add_after("late", Duration::ZERO);
    queue.add_after("later", SHORT);
    assert_eq!(queue.get(), None);
    assert_eq!(queue.metrics().delayed, 0);
}

#[test]
fn blocked_getter_is_woken_by_a_delayed_item() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let getter = {
        let queue = queue.clone();
        thread::spawn(move || queue.get())
    };
    queue.add_after(7, SHORT);
    assert_eq!(getter.join().unwrap(), Some(7));
}

#[test]
fn earlier_deadline_wakes_a_sleeping_timer() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    queue.add_after(1, Duration::from_secs(30));
    // Let the timer thread go to sleep until the 30 s deadline.
    thread::sleep(Duration::from_millis(20));
    let start = Instant::now();
    queue.add_after(2, SHORT);
    assert_eq!(queue.get(), Some(2));
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(queue.metrics().delayed, 1);
}

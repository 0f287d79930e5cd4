//! The basic queue, after client-go's `queue_test.go`.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use kinformer_controller::{ObjectKey, WorkQueue};

/// Runs `f` on a thread and fails the test if it does not finish in time.
fn within<R: Send + 'static>(limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(f()).unwrap());
    rx.recv_timeout(limit).expect("timed out")
}

#[test]
fn basic() {
    const PRODUCERS: usize = 4;
    const CONSUMERS: usize = 4;
    const ITEMS: usize = 500;
    let queue: WorkQueue<usize> = WorkQueue::new();
    // Per item: workers holding it right now, and times processed.
    let in_flight: Arc<Vec<AtomicUsize>> =
        Arc::new((0..ITEMS).map(|_| AtomicUsize::new(0)).collect());
    let processed: Arc<Vec<AtomicUsize>> =
        Arc::new((0..ITEMS).map(|_| AtomicUsize::new(0)).collect());

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let queue = queue.clone();
            thread::spawn(move || {
                // Every producer adds every item: duplicates race with workers.
                for i in 0..ITEMS {
                    queue.add((i + p * 7) % ITEMS);
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (queue, in_flight, processed) =
                (queue.clone(), in_flight.clone(), processed.clone());
            thread::spawn(move || {
                while let Some(i) = queue.get() {
                    assert_eq!(
                        in_flight[i].fetch_add(1, Ordering::SeqCst),
                        0,
                        "item {i} handed to two workers"
                    );
                    thread::yield_now();
                    processed[i].fetch_add(1, Ordering::SeqCst);
                    in_flight[i].fetch_sub(1, Ordering::SeqCst);
                    queue.done(&i);
                }
            })
        })
        .collect();
    for producer in producers {
        producer.join().unwrap();
    }
    within(Duration::from_secs(20), {
        let queue = queue.clone();
        move || queue.shutdown_with_drain()
    });
    for consumer in consumers {
        consumer.join().unwrap();
    }
    for (i, count) in processed.iter().enumerate() {
        let count = count.load(Ordering::SeqCst);
        assert!(
            (1..=PRODUCERS).contains(&count),
            "item {i} processed {count} times"
        );
    }
    assert!(queue.is_empty());
    assert_eq!(queue.get(), None);
}

#[test]
fn added_twice_before_get_is_processed_once() {
    let queue: WorkQueue = WorkQueue::new();
    let key = ObjectKey::new(Some("default"), "a");
    queue.add(key.clone());
    queue.add(key.clone());
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Some(key.clone()));
    queue.done(&key);
    assert_eq!(queue.try_get(), None);
    assert!(queue.is_empty());
}

#[test]
fn add_while_processing() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add("a");
    assert_eq!(queue.get(), Some("a"));
    // Re-added while processing: not handed out, not even counted as queued.
    queue.add("a");
    queue.add("a");
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.try_get(), None);
    queue.done(&"a");
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get(), Some("a"));
    queue.done(&"a");
    assert_eq!(queue.try_get(), None);
}

#[test]
fn add_while_processing_concurrently_never_hands_an_item_to_two_workers() {
    const KEYS: usize = 8;
    const ROUNDS: usize = 3_000;
    let queue: WorkQueue<usize> = WorkQueue::new();
    let in_flight: Arc<Vec<AtomicUsize>> =
        Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());
    let handed_out = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, in_flight, handed_out) =
                (queue.clone(), in_flight.clone(), handed_out.clone());
            thread::spawn(move || {
                while let Some(i) = queue.get() {
                    assert_eq!(
                        in_flight[i].fetch_add(1, Ordering::SeqCst),
                        0,
                        "key {i} processed twice at once"
                    );
                    handed_out.fetch_add(1, Ordering::SeqCst);
                    // Re-add the key we hold, as a reconcile that requeues itself.
                    queue.add(i);
                    thread::yield_now();
                    in_flight[i].fetch_sub(1, Ordering::SeqCst);
                    queue.done(&i);
                    if handed_out.load(Ordering::SeqCst) >= ROUNDS {
                        queue.shutdown();
                    }
                }
            })
        })
        .collect();
    for i in 0..KEYS {
        queue.add(i);
    }
    for worker in workers {
        worker.join().unwrap();
    }
    assert!(handed_out.load(Ordering::SeqCst) >= ROUNDS);
}

#[test]
fn len() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    for (i, n) in [1, 2, 3, 2, 1].into_iter().enumerate() {
        queue.add(n);
        assert_eq!(queue.len(), [1, 2, 3, 3, 3][i]);
    }
    let first = queue.get().unwrap();
    assert_eq!(first, 1);
    assert_eq!(queue.len(), 2);
    queue.done(&first);
    assert_eq!(queue.len(), 2);
}

#[test]
fn reinsert() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add("foo");
    let item = queue.get().unwrap();
    // The worker decides the item needs another pass.
    queue.add(item);
    queue.done(&item);
    assert_eq!(queue.get(), Some("foo"));
    queue.done(&"foo");
    assert_eq!(queue.len(), 0);
}

#[test]
fn fifo_order() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    for n in [5, 3, 9, 1] {
        queue.add(n);
    }
    let order: Vec<u32> = std::iter::from_fn(|| queue.try_get()).collect();
    assert_eq!(order, [5, 3, 9, 1]);
}

#[test]
fn done_for_an_item_not_processing_is_a_no_op() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    queue.add(1);
    queue.done(&1);
    queue.done(&2);
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.try_get(), Some(1));
    assert_eq!(queue.try_get(), None);
}

#[test]
fn shutdown() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    assert!(!queue.is_shutting_down());
    queue.shutdown();
    assert!(queue.is_shutting_down());
    queue.add("c");
    assert_eq!(queue.len(), 2, "add after shutdown is ignored");
    // Items queued before the shutdown are still handed out.
    assert_eq!(queue.get(), Some("a"));
    assert_eq!(queue.get(), Some("b"));
    assert_eq!(queue.get(), None);
    assert_eq!(queue.try_get(), None);
}

#[test]
fn shutdown_wakes_blocked_getters() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            thread::spawn(move || queue.get())
        })
        .collect();
    thread::sleep(Duration::from_millis(50));
    queue.shutdown();
    for getter in getters {
        assert_eq!(getter.join().unwrap(), None);
    }
}

#[test]
fn get_blocks_until_an_item_is_added() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let getter = {
        let queue = queue.clone();
        thread::spawn(move || queue.get())
    };
    thread::sleep(Duration::from_millis(50));
    assert!(!getter.is_finished());
    queue.add(42);
    assert_eq!(getter.join().unwrap(), Some(42));
}

#[test]
fn shutdown_with_drain() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    let a = queue.get().unwrap();
    let b = queue.get().unwrap();
    let returned = Arc::new(AtomicBool::new(false));
    let drainer = {
        let (queue, returned) = (queue.clone(), returned.clone());
        thread::spawn(move || {
            queue.shutdown_with_drain();
            returned.store(true, Ordering::SeqCst);
        })
    };
    thread::sleep(Duration::from_millis(100));
    assert!(queue.is_shutting_down());
    assert!(
        !returned.load(Ordering::SeqCst),
        "returned with two items in flight"
    );
    queue.done(&a);
    thread::sleep(Duration::from_millis(50));
    assert!(
        !returned.load(Ordering::SeqCst),
        "returned with one item in flight"
    );
    queue.done(&b);
    within(Duration::from_secs(10), move || drainer.join().unwrap());
    assert!(returned.load(Ordering::SeqCst));
    assert_eq!(queue.get(), None);
}

#[test]
fn shutdown_ends_a_drain_wait() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add("stuck");
    let _held = queue.get().unwrap();
    let drainer = {
        let queue = queue.clone();
        thread::spawn(move || queue.shutdown_with_drain())
    };
    thread::sleep(Duration::from_millis(50));
    assert!(!drainer.is_finished());
    queue.shutdown();
    within(Duration::from_secs(10), move || drainer.join().unwrap());
}

#[test]
fn items_dirty_at_shutdown_are_still_handed_out_after_done() {
    let queue: WorkQueue<&str> = WorkQueue::new();
    queue.add("a");
    let a = queue.get().unwrap();
    queue.add("a");
    queue.shutdown();
    queue.done(&a);
    assert_eq!(queue.get(), Some("a"));
    queue.done(&"a");
    assert_eq!(queue.get(), None);
}

#[test]
fn many_items_are_handed_out_once_each_in_order() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let start = Instant::now();
    for n in 0..100_000 {
        queue.add(n);
    }
    let mut seen = HashMap::new();
    let mut last = None;
    while let Some(n) = queue.try_get() {
        assert!(last < Some(n));
        last = Some(n);
        *seen.entry(n).or_insert(0) += 1;
        queue.done(&n);
    }
    assert_eq!(seen.len(), 100_000);
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn clones_share_one_queue() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let clone = queue.clone();
    clone.add(1);
    drop(clone);
    assert_eq!(queue.try_get(), Some(1));
    queue.clone().shutdown();
    assert!(queue.is_shutting_down());
}

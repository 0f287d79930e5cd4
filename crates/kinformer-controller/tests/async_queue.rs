//! `next().await` from tokio tasks, alone and mixed with blocking threads.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kinformer_controller::WorkQueue;
use parking_lot::Mutex;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_with_multiple_tasks() {
    const ITEMS: u32 = 2_000;
    let queue: WorkQueue<u32> = WorkQueue::new();
    let processed = Arc::new(Mutex::new(HashMap::<u32, u32>::new()));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, processed) = (queue.clone(), processed.clone());
            tokio::spawn(async move {
                let mut mine = 0;
                while let Some(n) = queue.next().await {
                    *processed.lock().entry(n).or_default() += 1;
                    mine += 1;
                    if n % 16 == 0 {
                        tokio::task::yield_now().await;
                    }
                    queue.done(&n);
                }
                mine
            })
        })
        .collect();
    for n in 0..ITEMS {
        queue.add(n);
        if n % 100 == 0 {
            tokio::task::yield_now().await;
        }
    }
    timeout(LIMIT, queue.shutdown_with_drain_async())
        .await
        .unwrap();
    let mut total = 0;
    for worker in workers {
        total += timeout(LIMIT, worker).await.unwrap().unwrap();
    }
    assert_eq!(total, ITEMS);
    let processed = processed.lock();
    assert_eq!(processed.len(), ITEMS as usize);
    assert!(processed.values().all(|count| *count == 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_tasks_are_woken_by_adds_and_by_shutdown() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.next().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    queue.add(1);
    queue.shutdown();
    let mut results = Vec::new();
    for waiter in waiters {
        results.push(timeout(LIMIT, waiter).await.unwrap().unwrap());
    }
    results.sort();
    assert_eq!(results, [None, None, Some(1)]);
}

#[tokio::test(flavor = "current_thread")]
async fn next_is_cancel_safe() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    // A `next` abandoned by a timeout loses nothing.
    assert!(
        timeout(Duration::from_millis(20), queue.next())
            .await
            .is_err()
    );
    queue.add(5);
    assert_eq!(queue.next().await, Some(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_items_reach_async_workers() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let worker = tokio::spawn({
        let queue = queue.clone();
        async move { queue.next().await }
    });
    queue.add_after(9, Duration::from_millis(30));
    assert_eq!(timeout(LIMIT, worker).await.unwrap().unwrap(), Some(9));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_and_tasks_share_one_queue() {
    const ITEMS: u32 = 2_000;
    let queue: WorkQueue<u32> = WorkQueue::new();
    let processed = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (queue, processed) = (queue.clone(), processed.clone());
            std::thread::spawn(move || {
                while let Some(n) = queue.get() {
                    processed.lock().push(n);
                    queue.done(&n);
                }
            })
        })
        .collect();
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (queue, processed) = (queue.clone(), processed.clone());
            tokio::spawn(async move {
                while let Some(n) = queue.next().await {
                    processed.lock().push(n);
                    queue.done(&n);
                }
            })
        })
        .collect();
    for n in 0..ITEMS {
        queue.add(n);
    }
    timeout(LIMIT, queue.shutdown_with_drain_async())
        .await
        .unwrap();
    for task in tasks {
        timeout(LIMIT, task).await.unwrap().unwrap();
    }
    for thread in threads {
        thread.join().unwrap();
    }
    let mut processed = processed.lock().clone();
    processed.sort_unstable();
    assert_eq!(processed, (0..ITEMS).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_drain_async_waits_for_done() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    queue.add(1);
    let held = queue.next().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shutdown_with_drain_async().await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!drain.is_finished());
    queue.done(&held);
    timeout(LIMIT, drain).await.unwrap().unwrap();
    assert_eq!(queue.next().await, None);
}

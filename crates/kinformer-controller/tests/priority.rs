//! Priorities: Normal before Low, no starvation either way, promotion; and a
//! model check of the whole add/get/done state machine.
#![allow(clippy::unwrap_used)]

use std::collections::{HashSet, VecDeque};
use std::thread;
use std::time::{Duration, Instant};

use kinformer_controller::{Priority, WorkQueue};
use proptest::prelude::*;

const NEVER_AGES: Duration = Duration::from_secs(3600);

fn queue_ageing_after(wait: Duration) -> WorkQueue<u32> {
    WorkQueue::builder().max_low_priority_wait(wait).build()
}

#[test]
fn normal_before_low() {
    let queue = queue_ageing_after(NEVER_AGES);
    for n in 0..5 {
        queue.add_with_priority(n, Priority::Low);
    }
    for n in 10..13 {
        queue.add(n);
    }
    assert_eq!(queue.len(), 8);
    let order: Vec<u32> = std::iter::from_fn(|| queue.try_get()).collect();
    assert_eq!(order, [10, 11, 12, 0, 1, 2, 3, 4]);
}

#[test]
fn low_not_starved_by_a_stream_of_normal() {
    let wait = Duration::from_millis(50);
    let queue = queue_ageing_after(wait);
    let start = Instant::now();
    queue.add_with_priority(u32::MAX, Priority::Low);
    // Each round adds two Normal items and takes one: Normal items never run out.
    let mut next = 0;
    let mut rounds = 0usize;
    loop {
        for _ in 0..2 {
            queue.add(next);
            next += 1;
        }
        let item = queue.get().unwrap();
        queue.done(&item);
        if item == u32::MAX {
            break;
        }
        rounds += 1;
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the Low item starved"
        );
        thread::sleep(Duration::from_millis(1));
    }
    // It was handed out ahead of waiting Normal items, only once aged.
    assert!(start.elapsed() >= wait);
    assert!(rounds > 0);
    assert_eq!(queue.len(), rounds + 2, "Normal items were still waiting");
}

#[test]
fn normal_not_starved_by_a_huge_low_list() {
    let wait = Duration::from_millis(20);
    let queue = queue_ageing_after(wait);
    for n in 0..50_000 {
        queue.add_with_priority(n, Priority::Low);
    }
    // Once the whole list is aged, Normal items still get every other turn
    // (before that they go first: see `normal_before_low`).
    thread::sleep(wait * 3);
    for n in 0..10 {
        queue.add(2_000_000 + n);
    }
    let first_twenty: Vec<u32> = (0..20).map(|_| queue.try_get().unwrap()).collect();
    let normal: Vec<u32> = first_twenty
        .iter()
        .copied()
        .filter(|n| *n >= 2_000_000)
        .collect();
    assert_eq!(normal, (0..10).map(|n| 2_000_000 + n).collect::<Vec<_>>());
    // Strictly alternating.
    for pair in first_twenty.chunks(2) {
        assert_eq!(
            pair.iter().filter(|n| **n >= 2_000_000).count(),
            1,
            "{first_twenty:?}"
        );
    }
    assert_eq!(queue.len(), 50_000 - 10);
}

#[test]
fn promotion() {
    let queue = queue_ageing_after(NEVER_AGES);
    queue.add_with_priority(1, Priority::Low);
    queue.add_with_priority(2, Priority::Low);
    queue.add(3);
    // Added again as Normal: promoted behind the Normal items, not duplicated.
    queue.add_with_priority(2, Priority::Normal);
    assert_eq!(queue.len(), 3);
    // Added again as Low: never demoted.
    queue.add_with_priority(3, Priority::Low);
    let order: Vec<u32> = std::iter::from_fn(|| queue.try_get()).collect();
    assert_eq!(order, [3, 2, 1]);
    assert_eq!(queue.len(), 0);
}

#[test]
fn promotion_of_an_item_being_processed() {
    let queue = queue_ageing_after(NEVER_AGES);
    queue.add(1);
    let one = queue.get().unwrap();
    queue.add_with_priority(1, Priority::Low);
    queue.add_with_priority(1, Priority::Normal);
    queue.add_with_priority(2, Priority::Low);
    queue.done(&one);
    // Queued again at done with the higher priority.
    assert_eq!(queue.try_get(), Some(1));
    assert_eq!(queue.try_get(), Some(2));
}

#[test]
fn stale_entry_of_a_promoted_item_is_not_handed_out() {
    let queue = queue_ageing_after(NEVER_AGES);
    queue.add_with_priority(1, Priority::Low);
    queue.add(1); // promoted; its Low entry is stale
    assert_eq!(queue.try_get(), Some(1));
    queue.add_with_priority(1, Priority::Low); // re-added while processing
    queue.done(&1); // queued Low again, behind the stale entry
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.try_get(), Some(1));
    queue.done(&1);
    assert_eq!(queue.try_get(), None);
    assert_eq!(queue.len(), 0);
}

#[derive(Debug, Clone)]
enum Op {
    Add(u8, Priority),
    Get,
    Done(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let priority = prop_oneof![Just(Priority::Low), Just(Priority::Normal)];
    prop_oneof![
        (0u8..6, priority).prop_map(|(k, p)| Op::Add(k, p)),
        Just(Op::Get),
        (0u8..6).prop_map(Op::Done),
    ]
}

/// A plain model of the queue without ageing: two FIFO lists, a dirty map
/// with the priority each dirty item will be queued at, a processing set.
#[derive(Default)]
struct Model {
    normal: VecDeque<u8>,
    low: VecDeque<u8>,
    dirty: std::collections::HashMap<u8, Priority>,
    processing: HashSet<u8>,
}

impl Model {
    fn queue(&mut self, key: u8, priority: Priority) {
        match priority {
            Priority::Normal => self.normal.push_back(key),
            Priority::Low => self.low.push_back(key),
        }
    }

    fn add(&mut self, key: u8, priority: Priority) {
        if let Some(current) = self.dirty.get_mut(&key) {
            if priority > *current {
                *current = priority;
                if let Some(at) = self.low.iter().position(|k| *k == key) {
                    self.low.remove(at);
                    self.normal.push_back(key);
                }
            }
            return;
        }
        self.dirty.insert(key, priority);
        if !self.processing.contains(&key) {
            self.queue(key, priority);
        }
    }

    fn get(&mut self) -> Option<u8> {
        let key = self.normal.pop_front().or_else(|| self.low.pop_front())?;
        self.dirty.remove(&key);
        self.processing.insert(key);
        Some(key)
    }

    fn done(&mut self, key: u8) {
        if self.processing.remove(&key)
            && let Some(priority) = self.dirty.get(&key).copied()
        {
            self.queue(key, priority);
        }
    }
}

proptest! {
    #[test]
    fn behaves_like_the_model(ops in proptest::collection::vec(op(), 1..200)) {
        let queue: WorkQueue<u8> = WorkQueue::builder().max_low_priority_wait(NEVER_AGES).build();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Add(key, priority) => {
                    queue.add_with_priority(key, priority);
                    model.add(key, priority);
                }
                Op::Get => prop_assert_eq!(queue.try_get(), model.get()),
                Op::Done(key) => {
                    queue.done(&key);
                    model.done(key);
                }
            }
            prop_assert_eq!(queue.len(), model.normal.len() + model.low.len());
            let metrics = queue.metrics();
            prop_assert_eq!(metrics.processing, model.processing.len());
        }
    }
}

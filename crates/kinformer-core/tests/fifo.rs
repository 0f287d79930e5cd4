//! DeltaFIFO behaviours, named after client-go's delta_fifo tests.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::fifo::RUN_LEN;
use kinformer_core::{DeltaFifo, DeltaType::*, Indexer, InformerError, Observed};

#[test]
fn basic_add_update_delete() {
    let (f, _) = fifo();
    f.add(cm("a", 1)).unwrap();
    f.add(cm("b", 2)).unwrap();
    f.delete(cm("c", 3)).unwrap();
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/a".into(), vec![(Added, 1, false)])
    );
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/b".into(), vec![(Added, 2, false)])
    );
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/c".into(), vec![(Deleted, 3, false)])
    );
    assert!(pop_now(&f).is_none());
}

#[test]
fn add_then_update_coalesces() {
    let (f, _) = fifo();
    f.add(cm("a", 1)).unwrap();
    f.update(cm("a", 2)).unwrap();
    f.update(cm("a", 3)).unwrap();
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/a".into(), vec![(Updated, 3, false)])
    );
    assert!(pop_now(&f).is_none());
    let stats = f.stats();
    assert_eq!((stats.enqueued, stats.merged), (3, 2));
}

#[test]
fn key_keeps_its_first_place_in_line() {
    let (f, _) = fifo();
    f.add(cm("a", 1)).unwrap();
    f.add(cm("b", 2)).unwrap();
    f.update(cm("a", 3)).unwrap();
    assert_eq!(pop_now(&f).unwrap().0, "ns/a");
    assert_eq!(pop_now(&f).unwrap().0, "ns/b");
}

#[test]
fn consecutive_deletes_collapse() {
    let (f, _) = fifo();
    f.delete(cm("a", 1)).unwrap();
    f.delete(cm("a", 2)).unwrap();
    assert_eq!(pop_now(&f).unwrap().1, vec![(Deleted, 1, false)]);
}

#[test]
fn replace_makes_deletions_for_objects_only_in_queue_and_only_in_cache() {
    let (f, indexer) = fifo();
    // "cached" is only in the cache, "queued" only in the queue, "kept" in both.
    seed_cache(&indexer, &[cm("cached", 1), cm("kept", 2)]);
    f.add(cm("queued", 3)).unwrap();
    f.replace(vec![cm("kept", 2), cm("new", 4)], "10").unwrap();
    let mut popped = Vec::new();
    while let Some(p) = pop_now(&f) {
        popped.push(p);
    }
    popped.sort();
    assert_eq!(
        popped,
        vec![
            ("ns/cached".into(), vec![(Deleted, 1, true)]),
            ("ns/kept".into(), vec![(Replaced, 2, false)]),
            ("ns/new".into(), vec![(Replaced, 4, false)]),
            // The queued object's last known state travels in the tombstone.
            (
                "ns/queued".into(),
                vec![(Added, 3, false), (Deleted, 3, true)]
            ),
        ]
    );
    assert_eq!(f.stats().tombstones, 2);
    assert_eq!(f.last_sync_resource_version(), "10");
}

#[test]
fn replace_while_a_delete_is_queued() {
    let (f, indexer) = fifo();
    seed_cache(&indexer, &[cm("a", 1)]);
    f.delete(cm("a", 2)).unwrap();
    f.replace(Vec::new(), "5").unwrap();
    // The queued delete already covers the key: no second (tombstone) delete.
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/a".into(), vec![(Deleted, 2, false)])
    );
    assert!(pop_now(&f).is_none());
}

#[test]
fn replace_listing_a_key_whose_delete_is_queued_keeps_the_delete_first() {
    let (f, indexer) = fifo();
    seed_cache(&indexer, &[cm("a", 1)]);
    // Deleted, then created again before the relist's snapshot.
    f.delete(cm("a", 2)).unwrap();
    f.replace(vec![cm("a", 3)], "5").unwrap();
    assert_eq!(
        pop_now(&f).unwrap(),
        (
            "ns/a".into(),
            vec![(Deleted, 2, false), (Replaced, 3, false)]
        )
    );
    assert!(pop_now(&f).is_none());
}

#[test]
fn resync_of_a_non_existing_key_queues_nothing() {
    let (f, _) = fifo();
    assert_eq!(f.resync(), 0);
    assert!(pop_now(&f).is_none());
}

#[test]
fn resync_queues_sync_only_for_idle_cached_keys() {
    let (f, indexer) = fifo();
    seed_cache(&indexer, &[cm("idle", 1), cm("busy", 2)]);
    f.update(cm("busy", 3)).unwrap();
    assert_eq!(f.resync(), 1);
    let mut popped = [pop_now(&f).unwrap(), pop_now(&f).unwrap()];
    popped.sort();
    assert_eq!(popped[0], ("ns/busy".into(), vec![(Updated, 3, false)]));
    assert_eq!(popped[1], ("ns/idle".into(), vec![(Sync, 1, false)]));
}

#[test]
fn update_resync_race_keeps_the_newest_state() {
    let (f, indexer) = fifo();
    seed_cache(&indexer, &[cm("a", 1)]);
    f.resync();
    f.update(cm("a", 2)).unwrap();
    // The update joins the queued Sync and wins over it.
    assert_eq!(pop_now(&f).unwrap().1, vec![(Updated, 2, false)]);
}

#[test]
fn has_synced_correct_when_initial_list_contains_deletions() {
    let (f, indexer) = fifo();
    seed_cache(&indexer, &[cm("gone", 1)]);
    assert!(!f.has_synced());
    f.replace(vec![cm("a", 2)], "3").unwrap();
    assert!(!f.has_synced());
    let first = f.try_pop_batch(1);
    assert_eq!(first.len(), 1);
    f.done(first.iter().map(|p| (&p.key, p.is_in_initial_list)));
    assert!(!f.has_synced(), "the tombstone is part of the initial list");
    assert!(pop_now(&f).is_some());
    assert!(f.has_synced());
}

#[test]
fn has_synced_waits_for_done_not_pop() {
    let (f, _) = fifo();
    f.replace(vec![cm("a", 1)], "1").unwrap();
    let popped = f.try_pop_batch(1);
    assert!(!f.has_synced());
    f.done(popped.iter().map(|p| (&p.key, p.is_in_initial_list)));
    assert!(f.has_synced());
}

#[test]
fn transformer_applied_to_adds_updates_replaces_but_not_tombstones() {
    let indexer = Indexer::new(Vec::new());
    seed_cache(&indexer, &[cm("cached", 1)]);
    let mark = Arc::new(|mut o: k8s_openapi::api::core::v1::ConfigMap| {
        o.metadata
            .annotations
            .get_or_insert_default()
            .insert("transformed".into(), "yes".into());
        o
    });
    let f = DeltaFifo::new(indexer, Some(mark));
    f.replace(vec![cm("c", 1)], "2").unwrap();
    f.add(cm("a", 1)).unwrap();
    f.update(cm("b", 1)).unwrap();
    let mut seen = Vec::new();
    while let Some(mut p) = f.try_pop_batch(1).pop() {
        for d in p.deltas.iter() {
            let transformed = d
                .object()
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key("transformed"));
            seen.push((p.key.to_string(), d.kind(), transformed));
        }
        f.done([(&p.key, std::mem::take(&mut p.is_in_initial_list))]);
    }
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        vec![
            ("ns/a".into(), Added, true),
            ("ns/b".into(), Updated, true),
            ("ns/c".into(), Replaced, true),
            ("ns/cached".into(), Deleted, false),
        ]
    );
}

/// A consumer that waited and was woken for fewer than `TRICKLE_KEYS` keys
/// lets more gather for the trickle linger before it takes them: a key
/// queued during the linger comes in the same batch. With the linger off
/// the woken consumer takes what it was woken for at once.
#[test]
fn a_consumer_woken_by_a_trickle_gathers_keys_during_the_linger() {
    let spawn_consumer = |f: &Arc<DeltaFifo<ConfigMap>>| {
        let f = Arc::clone(f);
        let consumer = std::thread::spawn(move || f.pop_batch(64).unwrap().len());
        // Long enough for the consumer to be waiting on the line.
        std::thread::sleep(Duration::from_millis(200));
        consumer
    };
    let f = Arc::new(fifo().0);
    f.set_trickle_linger(Duration::from_secs(2));
    let consumer = spawn_consumer(&f);
    f.add(cm("a", 1)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    f.add(cm("b", 2)).unwrap();
    assert_eq!(consumer.join().unwrap(), 2, "b joined a's batch");

    // Zero replaces the 2 s linger set above.
    f.set_trickle_linger(Duration::ZERO);
    let consumer = spawn_consumer(&f);
    let start = std::time::Instant::now();
    f.add(cm("c", 3)).unwrap();
    assert_eq!(consumer.join().unwrap(), 1);
    assert!(start.elapsed() < Duration::from_secs(1), "popped at once");
}

/// A close ends a trickle linger at once: the lingering consumer hands out
/// the keys it took, and the next pop returns `None`.
#[test]
fn a_close_ends_a_trickle_linger() {
    let f = Arc::new(fifo().0);
    f.set_trickle_linger(Duration::from_secs(30));
    let consumer = {
        let f = Arc::clone(&f);
        std::thread::spawn(move || (f.pop_batch(64).map(|b| b.len()), f.pop_batch(64).is_none()))
    };
    // Long enough for the consumer to be waiting on the line.
    std::thread::sleep(Duration::from_millis(200));
    f.add(cm("a", 1)).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let start = std::time::Instant::now();
    f.close();
    assert_eq!(consumer.join().unwrap(), (Some(1), true));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "the close ended the linger"
    );
}

#[test]
fn pop_unblocks_on_close() {
    let (f, _) = fifo();
    let f = Arc::new(f);
    let f2 = Arc::clone(&f);
    let t = std::thread::spawn(move || f2.pop().is_none());
    std::thread::sleep(Duration::from_millis(50));
    f.close();
    assert!(t.join().unwrap(), "pop returned None after close");
    assert_eq!(f.add(cm("a", 1)), Err(InformerError::Closed));
}

#[test]
fn object_without_name_is_refused_and_counted() {
    let (f, _) = fifo();
    let mut nameless = cm("x", 1);
    nameless.metadata.name = None;
    assert!(matches!(
        f.add(nameless.clone()),
        Err(InformerError::MissingName { .. })
    ));
    f.replace(vec![nameless, cm("ok", 2)], "3").unwrap();
    assert_eq!(f.stats().key_errors, 2);
    assert_eq!(pop_now(&f).unwrap().0, "ns/ok");
}

#[test]
fn duplicate_keys_in_one_replace_keep_the_last() {
    let (f, _) = fifo();
    f.replace(vec![cm("a", 1), cm("a", 2)], "3").unwrap();
    assert_eq!(f.stats().duplicate_keys, 1);
    assert_eq!(pop_now(&f).unwrap().1, vec![(Replaced, 2, false)]);
    assert!(f.has_synced());
}

#[test]
fn in_flight_key_is_not_handed_to_a_second_consumer() {
    let (f, _) = fifo();
    f.add(cm("a", 1)).unwrap();
    let first = f.try_pop_batch(1);
    assert_eq!(first.len(), 1);
    f.update(cm("a", 2)).unwrap();
    assert!(f.try_pop_batch(10).is_empty(), "key a is in flight");
    f.done(first.iter().map(|p| (&p.key, p.is_in_initial_list)));
    assert_eq!(pop_now(&f).unwrap().1, vec![(Updated, 2, false)]);
}

#[test]
fn replace_tombstones_an_in_flight_add() {
    let (f, _) = fifo();
    f.add(cm("a", 1)).unwrap();
    let first = f.try_pop_batch(1);
    // The add is being applied while a relist says "a" is gone.
    f.replace(Vec::new(), "9").unwrap();
    f.done(first.iter().map(|p| (&p.key, p.is_in_initial_list)));
    assert_eq!(pop_now(&f).unwrap().1, vec![(Deleted, 1, true)]);
}

#[test]
fn memory_is_bounded_by_distinct_keys() {
    let (f, _) = fifo();
    for i in 0..10_000u64 {
        f.update(cm(&format!("k{}", i % 10), i)).unwrap();
    }
    assert_eq!(f.len(), 10);
    assert_eq!(f.tracked_keys(), 10);
}

#[test]
fn first_replace_streams_and_syncs_only_after_it_finishes_and_is_processed() {
    let (f, _) = fifo();
    let mut session = f.begin_replace().unwrap();
    session.push(vec![f.prepare(cm("a", 1)).unwrap()]).unwrap();
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/a".into(), vec![(Replaced, 1, false)]),
        "the first list is queued as it arrives"
    );
    session.push(vec![f.prepare(cm("b", 1)).unwrap()]).unwrap();
    session.delete(f.prepare(cm("b", 2)).unwrap()).unwrap();
    assert!(!f.has_synced());
    session.finish("5").unwrap();
    assert!(!f.has_synced(), "synced before the list was processed");
    assert_eq!(
        pop_now(&f).unwrap(),
        (
            "ns/b".into(),
            vec![(Replaced, 1, false), (Deleted, 2, false)]
        ),
        "b, listed then deleted during the list"
    );
    assert!(pop_now(&f).is_none());
    assert!(f.has_synced());
    assert_eq!(f.last_sync_resource_version(), "5");
}

#[test]
fn abandoned_first_replace_leaves_what_it_queued_and_never_syncs() {
    let (f, _) = fifo();
    let mut session = f.begin_replace().unwrap();
    session.push(vec![f.prepare(cm("a", 1)).unwrap()]).unwrap();
    drop(session);
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/a".into(), vec![(Replaced, 1, false)])
    );
    assert!(!f.has_synced(), "no list finished");
    // The next list is the first list again, and syncs.
    f.replace(vec![cm("a", 2)], "7").unwrap();
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/a".into(), vec![(Replaced, 2, false)])
    );
    assert!(f.has_synced());
}

/// A FIFO whose first list is done and processed: `old` and `kept` cached.
fn relisting_fifo() -> (DeltaFifo<ConfigMap>, Indexer<ConfigMap>) {
    let (f, idx) = fifo();
    f.replace(Vec::new(), "1").unwrap();
    seed_cache(&idx, &[cm("old", 1), cm("kept", 1)]);
    (f, idx)
}

#[test]
fn relist_streams_objects_and_tombstones_only_at_finish() {
    let (f, _idx) = relisting_fifo();
    let mut session = f.begin_replace().unwrap();
    session
        .push(vec![f.prepare(cm("kept", 2)).unwrap()])
        .unwrap();
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/kept".into(), vec![(Replaced, 2, false)]),
        "a relist is queued as it arrives"
    );
    assert!(pop_now(&f).is_none(), "no tombstone while the list is open");
    session.finish("3").unwrap();
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/old".into(), vec![(Deleted, 1, true)])
    );
}

#[test]
fn abandoned_relist_keeps_what_it_queued_and_tombstones_nothing() {
    let (f, _idx) = relisting_fifo();
    let mut session = f.begin_replace().unwrap();
    session
        .push(vec![f.prepare(cm("new", 2)).unwrap()])
        .unwrap();
    drop(session);
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/new".into(), vec![(Replaced, 2, false)])
    );
    assert!(
        pop_now(&f).is_none(),
        "a broken-off list must not delete anything"
    );
}

#[test]
fn delete_during_a_relist_is_queued_and_not_tombstoned_again() {
    let (f, _idx) = relisting_fifo();
    let mut session = f.begin_replace().unwrap();
    session
        .push(vec![f.prepare(cm("kept", 2)).unwrap()])
        .unwrap();
    session.delete(f.prepare(cm("kept", 3)).unwrap()).unwrap();
    session
        .push(vec![f.prepare(cm("old", 2)).unwrap()])
        .unwrap();
    session.finish("3").unwrap();
    assert_eq!(
        pop_now(&f).unwrap(),
        (
            "ns/kept".into(),
            vec![(Replaced, 2, false), (Deleted, 3, false)]
        )
    );
    assert_eq!(
        pop_now(&f).unwrap(),
        ("ns/old".into(), vec![(Replaced, 2, false)])
    );
    assert!(pop_now(&f).is_none());
    assert_eq!(f.stats().tombstones, 0);
}

#[test]
fn while_a_list_streams_batches_are_larger() {
    use kinformer_core::fifo::LIST_BATCH_FACTOR;
    let (f, _) = fifo();
    let mut session = f.begin_replace().unwrap();
    let n = 2 * LIST_BATCH_FACTOR + 3;
    let objs: Vec<_> = (0..n)
        .map(|i| f.prepare(cm(&format!("k{i}"), 1)).unwrap())
        .collect();
    session.push(objs).unwrap();
    let batch = f.pop_batch(2).unwrap();
    assert_eq!(batch.len(), 2 * LIST_BATCH_FACTOR, "a list's batch");
    f.done(batch.iter().map(|p| (&p.key, p.is_in_initial_list)));
    session.finish("3").unwrap();
    let batch = f.pop_batch(2).unwrap();
    assert_eq!(batch.len(), 2, "the plain batch once the list ended");
}

/// Keys queued under one lock travel in runs; a consumer that takes fewer
/// keys than a run holds leaves the rest at the front of the line, so
/// single pops and small batches still see first-come order, every batch
/// is as full as what waits allows (front first, then the channel), and
/// the waiting count follows.
#[test]
fn keys_queued_together_pop_one_by_one_in_first_come_order() {
    let (f, _) = fifo();
    let n = 3 * RUN_LEN + 5;
    let changes = (0..n).map(|i| {
        let p = f.prepare(cm(&format!("k{i:04}"), i as u64)).unwrap();
        (Observed::Added, p)
    });
    f.push_observed(changes).unwrap();
    f.add(cm("last", 1)).unwrap();
    assert_eq!(f.len(), n + 1);
    let mut popped = Vec::new();
    let mut sizes = [1, 3, RUN_LEN + 1].into_iter().cycle();
    loop {
        let size = sizes.next().unwrap();
        let batch = f.try_pop_batch(size);
        if batch.is_empty() {
            break;
        }
        assert_eq!(batch.len(), size.min(n + 1 - popped.len()));
        f.done(batch.iter().map(|p| (&p.key, p.is_in_initial_list)));
        popped.extend(batch.into_iter().map(|p| p.key.to_string()));
        assert_eq!(f.len(), n + 1 - popped.len());
    }
    let mut want: Vec<String> = (0..n).map(|i| format!("ns/k{i:04}")).collect();
    want.push("ns/last".into());
    assert_eq!(popped, want);
}

/// A consumer blocked on the channel is woken for keys another consumer
/// left at the front. Two consumers wait, one popping once and one until
/// it has the rest; whichever receives the run keeps one key and leaves
/// the rest at the front: without the wake-up, either the single popper
/// never gets its key or the other never gets the front's keys.
#[test]
fn keys_left_at_the_front_reach_a_consumer_already_waiting() {
    let (f, _) = fifo();
    let f = Arc::new(f);
    let once = {
        let f = Arc::clone(&f);
        std::thread::spawn(move || f.pop_batch(1).map_or(0, |b| b.len()))
    };
    let rest = {
        let f = Arc::clone(&f);
        std::thread::spawn(move || {
            let mut got = 0;
            while got < RUN_LEN - 1 {
                match f.pop_batch(1) {
                    Some(batch) => got += batch.len(),
                    None => break,
                }
            }
            got
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let changes = (0..RUN_LEN).map(|i| {
        let p = f.prepare(cm(&format!("k{i}"), i as u64)).unwrap();
        (Observed::Added, p)
    });
    f.push_observed(changes).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !(once.is_finished() && rest.is_finished()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    f.close();
    assert_eq!(once.join().unwrap(), 1, "the single popper got its key");
    assert_eq!(rest.join().unwrap(), RUN_LEN - 1, "the other got the rest");
    assert_eq!(f.len(), 0);
}

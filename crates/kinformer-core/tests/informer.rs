//! Informer behaviours: handlers, registrations, resync, shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use common::store::{Packed, Plain, Store};
use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::{
    EventHandlerFns, MAX_WAITING_SEGMENTS, MIN_RESYNC_PERIOD, ObjectKey, Reclaimer,
    SharedIndexInformer,
};

const T: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Add(String, u64, bool),
    Update(String, u64, u64),
    Delete(String, u64, bool),
}

fn recorder() -> (EventHandlerFns<ConfigMap>, mpsc::Receiver<Ev>) {
    let (tx, rx) = mpsc::channel();
    let (tx2, tx3) = (tx.clone(), tx.clone());
    let name = |o: &ConfigMap| o.metadata.name.clone().unwrap_or_default();
    let h = EventHandlerFns::new()
        .on_add(move |o, initial| tx.send(Ev::Add(name(o), rv(o), initial)).unwrap())
        .on_update(move |a, b| tx2.send(Ev::Update(name(b), rv(a), rv(b))).unwrap())
        .on_delete(move |d| {
            let o = d.object();
            tx3.send(Ev::Delete(name(o), rv(o), d.is_tombstone()))
                .unwrap()
        });
    (h, rx)
}

fn informer() -> SharedIndexInformer<ConfigMap> {
    SharedIndexInformer::builder()
        .name("test")
        .threads(2)
        .build()
}

/// The informer of [`informer`] on store `S`.
fn store<S: Store>() -> S {
    S::build(SharedIndexInformer::builder().name("test").threads(2))
}

/// The behaviours that depend on what the cache holds run on each store.
macro_rules! on_each_store {
    ($($test:ident),* $(,)?) => {
        mod plain_store {
            $(#[test] fn $test() { super::$test::<super::Plain>() })*
        }
        mod compact_store {
            $(#[test] fn $test() { super::$test::<super::Packed>() })*
        }
    };
}

on_each_store!(
    add_update_delete_in_order_with_cache_updated_first,
    relist_delivers_tombstones_and_syncs,
    late_handler_registration_replays_the_cache,
    handler_panics_are_caught_and_counted,
    per_handler_resync_periods,
    remove_a_handler_while_active,
    handlers_added_and_removed_while_events_flow,
);

fn add_update_delete_in_order_with_cache_updated_first<S: Store>() {
    let store = store::<S>();
    let inf = store.informer();
    let indexer = inf.indexer();
    let (tx, rx) = mpsc::channel();
    let idx = indexer.clone();
    store
        .add_handler(EventHandlerFns::new().on_add(move |o: &Arc<ConfigMap>, _| {
            // The cache already holds what the handler is told about.
            let cached = idx.get("ns/a").map(|c| rv_of(&*c));
            tx.send((rv(o), cached)).unwrap();
        }))
        .unwrap();
    let (h, events) = recorder();
    store.add_handler(h).unwrap();
    inf.start().unwrap();
    inf.queue().add(S::wrap(cm("a", 1))).unwrap();
    let (seen, cached) = rx.recv_timeout(T).unwrap();
    assert_eq!((seen, cached), (1, Some(1)));
    assert_eq!(
        events.recv_timeout(T).unwrap(),
        Ev::Add("a".into(), 1, false)
    );
    inf.queue().update(S::wrap(cm("a", 2))).unwrap();
    assert_eq!(
        events.recv_timeout(T).unwrap(),
        Ev::Update("a".into(), 1, 2)
    );
    inf.queue().delete(S::wrap(cm("a", 3))).unwrap();
    assert_eq!(
        events.recv_timeout(T).unwrap(),
        Ev::Delete("a".into(), 3, false)
    );
    wait_until(T, "delete applied", || indexer.get("ns/a").is_none());
    inf.shutdown();
}

fn relist_delivers_tombstones_and_syncs<S: Store>() {
    let store = store::<S>();
    let inf = store.informer();
    let (h, events) = recorder();
    let reg = store.add_handler(h).unwrap();
    inf.start().unwrap();
    inf.queue()
        .replace(vec![S::wrap(cm("a", 1)), S::wrap(cm("b", 1))], "1")
        .unwrap();
    let mut initial = vec![
        events.recv_timeout(T).unwrap(),
        events.recv_timeout(T).unwrap(),
    ];
    initial.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        initial,
        vec![Ev::Add("a".into(), 1, true), Ev::Add("b".into(), 1, true)]
    );
    wait_until(T, "informer synced", || {
        inf.has_synced() && reg.has_synced()
    });
    // b vanished while disconnected; a is unchanged (same RV → resync-only, not delivered).
    inf.queue().replace(vec![S::wrap(cm("a", 1))], "5").unwrap();
    assert_eq!(
        events.recv_timeout(T).unwrap(),
        Ev::Delete("b".into(), 1, true)
    );
    assert!(events.recv_timeout(Duration::from_millis(200)).is_err());
    inf.shutdown();
}

fn late_handler_registration_replays_the_cache<S: Store>() {
    let store = store::<S>();
    let inf = store.informer();
    inf.start().unwrap();
    inf.queue()
        .replace((0..100).map(|i| S::wrap(cm(&format!("o{i}"), 1))), "1")
        .unwrap();
    wait_until(T, "synced", || inf.has_synced());
    let (h, events) = recorder();
    let reg = store.add_handler(h).unwrap();
    let mut names = Vec::new();
    for _ in 0..100 {
        match events.recv_timeout(T).unwrap() {
            Ev::Add(n, 1, true) => names.push(n),
            other => panic!("unexpected {other:?}"),
        }
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 100);
    wait_until(T, "registration synced", || reg.has_synced());
    // Later changes follow the replay.
    inf.queue().update(S::wrap(cm("o1", 2))).unwrap();
    assert_eq!(
        events.recv_timeout(T).unwrap(),
        Ev::Update("o1".into(), 1, 2)
    );
    inf.shutdown();
}

fn remove_a_handler_while_active<S: Store>() {
    let store = store::<S>();
    let inf = store.informer();
    let (h, events) = recorder();
    let reg = store.add_handler(h).unwrap();
    let (h2, events2) = recorder();
    store.add_handler(h2).unwrap();
    inf.start().unwrap();
    inf.queue().add(S::wrap(cm("a", 1))).unwrap();
    assert!(events.recv_timeout(T).is_ok());
    assert!(inf.remove_event_handler(&reg));
    assert_eq!(inf.metrics().handlers.len(), 1);
    // A second removal finds nothing to remove.
    assert!(!inf.remove_event_handler(&reg));
    inf.queue().update(S::wrap(cm("a", 2))).unwrap();
    assert_eq!(
        events2.recv_timeout(T).unwrap(),
        Ev::Add("a".into(), 1, false)
    );
    assert_eq!(
        events2.recv_timeout(T).unwrap(),
        Ev::Update("a".into(), 1, 2)
    );
    // The removed handler's thread is gone: its sender is dropped.
    assert!(matches!(
        events.recv_timeout(T),
        Err(mpsc::RecvTimeoutError::Disconnected)
    ));
    inf.shutdown();
}

#[test]
fn removing_another_informers_registration_changes_neither() {
    // Both informers number their registrations from 1: the ids match.
    let (a, b) = (informer(), informer());
    let (ha, events_a) = recorder();
    let reg_a = a.add_event_handler(ha).unwrap();
    let (hb, events_b) = recorder();
    b.add_event_handler(hb).unwrap();
    a.start().unwrap();
    b.start().unwrap();
    assert!(!b.remove_event_handler(&reg_a));
    assert_eq!(a.metrics().handlers.len(), 1);
    assert_eq!(b.metrics().handlers.len(), 1);
    // Both handlers still get their informer's events.
    a.queue().add(cm("x", 1)).unwrap();
    b.queue().add(cm("y", 1)).unwrap();
    assert_eq!(
        events_a.recv_timeout(T).unwrap(),
        Ev::Add("x".into(), 1, false)
    );
    assert_eq!(
        events_b.recv_timeout(T).unwrap(),
        Ev::Add("y".into(), 1, false)
    );
    a.shutdown();
    b.shutdown();
}

/// Checks one handler's events against the transitions a cache can make:
/// an add of a key it does not hold, an update from the state it holds, a
/// delete of a key it holds.
fn check_transitions(events: &[Ev]) {
    let mut held = std::collections::HashMap::new();
    for e in events {
        match e {
            Ev::Add(n, rv, _) => {
                assert!(
                    held.insert(n.clone(), *rv).is_none(),
                    "add of held {n}: {events:?}"
                )
            }
            Ev::Update(n, old, new) => {
                assert_eq!(
                    held.insert(n.clone(), *new),
                    Some(*old),
                    "update of {n}: {events:?}"
                )
            }
            Ev::Delete(n, ..) => {
                assert!(held.remove(n).is_some(), "delete of unheld {n}: {events:?}")
            }
        }
    }
}

fn handlers_added_and_removed_while_events_flow<S: Store>() {
    let store = store::<S>();
    let inf = store.informer();
    let (h, events) = recorder();
    store.add_handler(h).unwrap();
    inf.start().unwrap();
    let producer = {
        let q = Arc::clone(inf.queue());
        std::thread::spawn(move || {
            let mut live = [false; 20];
            for i in 0..20_000u64 {
                let k = (i * 7 % 20) as usize;
                let obj = S::wrap(cm(&format!("o{k}"), i + 1));
                if !live[k] {
                    q.add(obj).unwrap();
                    live[k] = true;
                } else if i % 5 == 0 {
                    q.delete(obj).unwrap();
                    live[k] = false;
                } else {
                    q.update(obj).unwrap();
                }
            }
        })
    };
    let (mut churned, mut churned_events) = (0, 0);
    while !producer.is_finished() || churned < 20 {
        let (h, rx) = recorder();
        let reg = store.add_handler(h).unwrap();
        std::thread::sleep(Duration::from_millis(1));
        assert!(inf.remove_event_handler(&reg));
        // The removed handler's thread is joined: its events end here.
        let got: Vec<Ev> = rx.iter().collect();
        check_transitions(&got);
        churned_events += got.len();
        churned += 1;
    }
    producer.join().unwrap();
    // The permanent handler saw a consistent history throughout.
    inf.shutdown();
    let got: Vec<Ev> = events.iter().collect();
    assert!(!got.is_empty());
    check_transitions(&got);
    let m = inf.metrics();
    assert_eq!(m.handler_panics, 0);
    assert!(churned >= 20);
    assert!(churned_events > 0, "the churned handlers saw events");
}

/// A panic payload whose own `Drop` panics: the worst a handler can throw.
struct DropPanics;

impl Drop for DropPanics {
    fn drop(&mut self) {
        panic!("the payload's drop panicked too");
    }
}

fn handler_panics_are_caught_and_counted<S: Store>() {
    let store = store::<S>();
    let inf = store.informer();
    store
        .add_handler(EventHandlerFns::new().on_add(|o: &Arc<ConfigMap>, _| {
            if o.metadata.name.as_deref() == Some("bomb") {
                std::panic::panic_any(DropPanics);
            }
        }))
        .unwrap();
    let (h, events) = recorder();
    store.add_handler(h).unwrap();
    inf.start().unwrap();
    inf.queue().add(S::wrap(cm("bomb", 1))).unwrap();
    inf.queue().add(S::wrap(cm("fine", 1))).unwrap();
    let mut got = vec![
        events.recv_timeout(T).unwrap(),
        events.recv_timeout(T).unwrap(),
    ];
    got.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        got,
        vec![
            Ev::Add("bomb".into(), 1, false),
            Ev::Add("fine".into(), 1, false)
        ]
    );
    wait_until(T, "panic counted", || inf.metrics().handler_panics == 1);
    // The informer keeps working after the panic.
    inf.queue().update(S::wrap(cm("fine", 2))).unwrap();
    assert_eq!(
        events.recv_timeout(T).unwrap(),
        Ev::Update("fine".into(), 1, 2)
    );
    assert_eq!(inf.indexer().len(), 2);
    inf.shutdown();
}

fn per_handler_resync_periods<S: Store>() {
    let store = store::<S>();
    let inf = store.informer();
    let resyncs_fast = Arc::new(AtomicUsize::new(0));
    let resyncs_none = Arc::new(AtomicUsize::new(0));
    let (f, n) = (Arc::clone(&resyncs_fast), Arc::clone(&resyncs_none));
    store
        .add_handler_with_resync(
            EventHandlerFns::new().on_update(move |a: &Arc<ConfigMap>, b: &Arc<ConfigMap>| {
                if rv(a) == rv(b) {
                    f.fetch_add(1, Ordering::SeqCst);
                }
            }),
            Some(Duration::from_secs(1)),
        )
        .unwrap();
    store
        .add_handler_with_resync(
            EventHandlerFns::new().on_update(move |_: &Arc<ConfigMap>, _: &Arc<ConfigMap>| {
                n.fetch_add(1, Ordering::SeqCst);
            }),
            None,
        )
        .unwrap();
    inf.start().unwrap();
    inf.queue()
        .replace(vec![S::wrap(cm("a", 1)), S::wrap(cm("b", 1))], "1")
        .unwrap();
    wait_until(T, "two resync rounds", || {
        resyncs_fast.load(Ordering::SeqCst) >= 4
    });
    assert_eq!(
        resyncs_none.load(Ordering::SeqCst),
        0,
        "no resync for a handler without a period"
    );
    inf.shutdown();
}

#[test]
fn resync_periods_below_the_minimum_are_raised_and_zero_means_none() {
    let inf = informer();
    let period = |p: Option<Duration>| {
        inf.add_event_handler_with_resync(EventHandlerFns::new(), p)
            .unwrap()
            .resync_period()
    };
    assert_eq!(
        period(Some(Duration::from_millis(10))),
        Some(MIN_RESYNC_PERIOD)
    );
    assert_eq!(
        period(Some(Duration::from_secs(7))),
        Some(Duration::from_secs(7))
    );
    assert_eq!(period(Some(Duration::ZERO)), None);
    assert_eq!(period(None), None);
    let with_default = SharedIndexInformer::<ConfigMap>::builder()
        .default_resync(Some(Duration::from_millis(1)))
        .build();
    let reg = with_default
        .add_event_handler(EventHandlerFns::new())
        .unwrap();
    assert_eq!(reg.resync_period(), Some(MIN_RESYNC_PERIOD));
    with_default.shutdown();
    inf.shutdown();
}

#[test]
fn slow_handler_does_not_slow_others_and_backlog_is_bounded() {
    let inf = informer();
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate = parking_lot::Mutex::new(gate_rx);
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let entered = parking_lot::Mutex::new(entered_tx);
    let slow_reg = inf
        .add_event_handler(EventHandlerFns::new().on_add(move |_: &Arc<ConfigMap>, _| {
            let _ = entered.lock().send(());
            let _ = gate.lock().recv();
        }))
        .unwrap();
    let (h, events) = recorder();
    inf.add_event_handler(h).unwrap();
    inf.start().unwrap();
    // The slow handler is stuck in its first call before the burst: had it
    // not yet taken work, it could take the whole burst as one batch and
    // leave nothing waiting to measure.
    inf.queue().update(cm("k0", 1)).unwrap();
    entered_rx.recv_timeout(T).unwrap();
    const ROUNDS: u64 = 200;
    for round in 1..ROUNDS {
        for i in 0..20 {
            inf.queue().update(cm(&format!("k{i}"), round + 1)).unwrap();
        }
    }
    // The fast handler sees the final state of every key.
    let mut last = std::collections::HashMap::new();
    while last.len() < 20 || last.values().any(|v| *v != ROUNDS) {
        match events.recv_timeout(T).unwrap() {
            Ev::Add(n, v, _) | Ev::Update(n, _, v) => {
                last.insert(n, v);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let slow = slow_reg.stats();
    assert_eq!(slow.delivered, 0, "still stuck in its first call");
    // The documented bound: up to `MAX_WAITING_SEGMENTS` batches as pushed
    // (a batch holds each of the 20 keys at most once, with at most two
    // coalesced notifications), then one coalesced entry per key; 3,981
    // updates were pushed.
    let bound = MAX_WAITING_SEGMENTS * 2 * 20 + 20;
    assert!(
        slow.backlog <= bound,
        "backlog coalesces per key past {MAX_WAITING_SEGMENTS} batches: {} > {bound}",
        slow.backlog
    );
    assert!(slow.backlog > 0, "the stuck handler has the burst waiting");
    assert!(slow.oldest_pending_age.is_some());
    drop(gate_tx);
    inf.shutdown();
}

#[test]
fn a_reclaimer_gets_replaced_and_removed_objects_from_handlers_and_the_cache() {
    /// Records what it is handed: key, resourceVersion, and whether it was
    /// the last reference.
    #[derive(Default)]
    struct Collect(parking_lot::Mutex<Vec<(String, u64, bool)>>);
    impl Reclaimer<ConfigMap> for Collect {
        fn reclaim(&self, objects: Vec<(ObjectKey, Arc<ConfigMap>)>) {
            let mut seen = self.0.lock();
            for (key, obj) in objects {
                seen.push((key.to_string(), rv(&obj), Arc::strong_count(&obj) == 1));
            }
        }
    }
    let inf = informer();
    let collect = Arc::new(Collect::default());
    assert!(inf.set_reclaimer(collect.clone()));
    assert!(
        !inf.set_reclaimer(collect.clone()),
        "the first reclaimer stays"
    );
    // The handler stops at the update of "a" until the test lets it go, so
    // that the cache has let go of the replaced version by then.
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let gate = parking_lot::Mutex::new(gate_rx);
    let (seen_tx, seen_rx) = mpsc::channel::<u64>();
    let kept = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let keep = Arc::clone(&kept);
    inf.add_event_handler(
        EventHandlerFns::new()
            .on_update(move |_: &Arc<ConfigMap>, new: &Arc<ConfigMap>| {
                let _ = gate.lock().recv();
                seen_tx.send(rv(new)).unwrap();
            })
            .on_delete(move |d| keep.lock().push(Arc::clone(d.object()))),
    )
    .unwrap();
    inf.start().unwrap();
    let (q, indexer) = (inf.queue(), inf.indexer());
    q.add(cm("a", 1)).unwrap();
    wait_until(T, "a cached", || indexer.get("ns/a").is_some());
    q.update(cm("a", 2)).unwrap();
    wait_until(T, "a replaced", || {
        indexer.get("ns/a").map(|o| rv(&o)) == Some(2)
    });
    // Two more writes publish new snapshots and release the old ones.
    for i in 0..2 {
        q.add(cm(&format!("z{i}"), 3)).unwrap();
        wait_until(T, "z cached", || indexer.get(&format!("ns/z{i}")).is_some());
    }
    std::thread::sleep(Duration::from_millis(50));
    gate_tx.send(()).unwrap();
    assert_eq!(seen_rx.recv_timeout(T).unwrap(), 2);
    wait_until(T, "a@1 reclaimed", || {
        collect.0.lock().contains(&("ns/a".into(), 1, true))
    });
    // The delete's final state is kept by the handler: not handed over.
    // The cached version it removed is, by the Indexer, once no snapshot
    // reaches it.
    q.delete(cm("z0", 4)).unwrap();
    wait_until(T, "z0 delete delivered", || kept.lock().len() == 1);
    wait_until(T, "z0@3 reclaimed", || {
        collect.0.lock().contains(&("ns/z0".into(), 3, true))
    });
    inf.shutdown();
    let mut got = collect.0.lock().clone();
    got.sort();
    assert_eq!(
        got,
        vec![("ns/a".into(), 1, true), ("ns/z0".into(), 3, true)],
        "each replaced or removed version once, as its last reference"
    );
    assert_eq!(rv(&kept.lock()[0]), 4);
}

#[test]
fn start_is_idempotent_and_shutdown_joins_everything() {
    let inf = informer();
    let (h, events) = recorder();
    inf.add_event_handler(h).unwrap();
    inf.start().unwrap();
    inf.start().unwrap();
    inf.queue().add(cm("a", 1)).unwrap();
    assert!(events.recv_timeout(T).is_ok());
    inf.shutdown();
    inf.shutdown();
    // Every handler thread has exited and dropped its sender.
    assert!(matches!(
        events.recv_timeout(T),
        Err(mpsc::RecvTimeoutError::Disconnected)
    ));
    assert!(inf.queue().add(cm("b", 1)).is_err());
    assert!(inf.start().is_err());
}

#[test]
fn registrations_before_start_and_after_shutdown() {
    let inf = informer();
    let (h, _events) = recorder();
    let reg = inf.add_event_handler(h).unwrap();
    assert!(!reg.has_synced(), "not synced before the informer starts");
    inf.start().unwrap();
    inf.queue().replace([cm("a", 1)], "1").unwrap();
    wait_until(T, "registration synced", || reg.has_synced());
    inf.shutdown();
    // After shutdown: nothing to remove, and no new registration.
    assert!(!inf.remove_event_handler(&reg));
    let (h2, _events2) = recorder();
    assert!(inf.add_event_handler(h2).is_err());
}

#[test]
fn transform_strips_fields_before_store_and_handlers() {
    let inf = SharedIndexInformer::<ConfigMap>::builder()
        .threads(1)
        .transform(|mut o| {
            o.metadata.managed_fields = None;
            o.data = None;
            o
        })
        .build();
    let (tx, rx) = mpsc::channel();
    inf.add_event_handler(
        EventHandlerFns::new()
            .on_add(move |o: &Arc<ConfigMap>, _| tx.send(o.data.is_none()).unwrap()),
    )
    .unwrap();
    inf.start().unwrap();
    let mut obj = cm("a", 1);
    obj.data = Some([("k".to_string(), "v".to_string())].into());
    inf.queue().add(obj).unwrap();
    assert!(rx.recv_timeout(T).unwrap());
    assert!(inf.indexer().get("ns/a").unwrap().data.is_none());
    inf.shutdown();
}

#[test]
fn every_late_registration_gets_its_replay_and_syncs() {
    // Regression: the delivery thread was spawned before the replay was set
    // and looked for it only once, at start-up; when it won that race the
    // replay was never delivered and `has_synced` stayed false forever.
    let inf = informer();
    inf.start().unwrap();
    inf.queue()
        .replace((0..20).map(|i| cm(&format!("o{i}"), 1)), "1")
        .unwrap();
    wait_until(T, "synced", || {
        inf.has_synced() && inf.indexer().len() == 20
    });
    for round in 0..5 {
        // Hold the writer lock (as a busy pool does) so the registration
        // waits after spawning its delivery thread.
        let (locked_tx, locked_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let idx = inf.indexer();
        let holder = std::thread::spawn(move || {
            idx.write(|_| {
                locked_tx.send(()).unwrap();
                let _ = release_rx.recv();
            })
        });
        locked_rx.recv_timeout(T).unwrap();
        let (h, events) = recorder();
        let registrar = {
            let inf = inf.clone();
            std::thread::spawn(move || inf.add_event_handler(h).unwrap())
        };
        // Not a synchronization: this only gives the delivery thread time to
        // start, which is what exposed the bug. The assertions below hold
        // whatever the timing.
        std::thread::sleep(Duration::from_millis(20));
        release_tx.send(()).unwrap();
        holder.join().unwrap();
        let reg = registrar.join().unwrap();
        for _ in 0..20 {
            match events.recv_timeout(T) {
                Ok(Ev::Add(_, 1, true)) => {}
                other => panic!(
                    "round {round}: expected a replayed add, got {other:?}; {:?}",
                    inf.metrics().handlers
                ),
            }
        }
        wait_until(T, "late registration synced", || reg.has_synced());
        assert!(inf.remove_event_handler(&reg));
    }
    inf.shutdown();
}

/// Objects queued through `prepare` carry the digest of their index inputs
/// computed on the producing thread: the pool threads never run the digest
/// function, and an update with the same inputs computes no values. A
/// digest prepared before `add_indexers` is computed again by the writer,
/// and the new index files the object.
#[test]
fn digests_prepared_by_the_producer_spare_the_pool_reading_the_old_object() {
    let computed = Arc::new(AtomicUsize::new(0));
    let digested_on = Threads::default();
    let inf = SharedIndexInformer::builder()
        .name("digests")
        .threads(2)
        .indexers(vec![(
            "zone".into(),
            zone_index(&computed, Some(&digested_on)),
        )])
        .build();
    let indexer = inf.indexer();
    inf.start().unwrap();
    let here = std::thread::current().id();
    inf.queue().add(cm_zone("a", 1, "z1")).unwrap();
    inf.queue().update(cm_zone("a", 2, "z1")).unwrap();
    wait_until(T, "rv 2 applied", || {
        indexer.get("ns/a").map(|o| rv(&o)) == Some(2)
    });
    assert_eq!(
        computed.load(Ordering::Relaxed),
        1,
        "only the added object's values"
    );
    inf.queue().update(cm_zone("a", 3, "z2")).unwrap();
    wait_until(T, "rv 3 applied", || {
        indexer.get("ns/a").map(|o| rv(&o)) == Some(3)
    });
    assert_eq!(computed.load(Ordering::Relaxed), 3, "both objects' values");
    assert_eq!(indexer.by_index("zone", "z2").unwrap().len(), 1);
    assert!(digested_on.lock().unwrap().iter().all(|t| *t == here));

    // Prepared in one epoch, written in the next.
    let early = inf.queue().prepare(cm_zone("a", 4, "z3")).unwrap();
    let (later, later_on) = (Arc::new(AtomicUsize::new(0)), Threads::default());
    inf.add_indexers(vec![(
        "zone-later".into(),
        zone_index(&later, Some(&later_on)),
    )])
    .unwrap();
    inf.queue()
        .push_observed([(kinformer_core::Observed::Updated, early)])
        .unwrap();
    wait_until(T, "rv 4 applied", || {
        indexer.get("ns/a").map(|o| rv(&o)) == Some(4)
    });
    for index in ["zone", "zone-later"] {
        assert!(indexer.by_index(index, "z2").unwrap().is_empty(), "{index}");
        assert_eq!(indexer.by_index(index, "z3").unwrap().len(), 1, "{index}");
    }
    assert!(
        digested_on.lock().unwrap().iter().any(|t| *t != here),
        "the writer digested it"
    );
    inf.shutdown();
}

#[test]
fn latency_histograms_sample_one_key_in_sample_every() {
    use kinformer_core::latency::SAMPLE_EVERY;
    let inf = informer();
    let delivered = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&delivered);
    let slow = Duration::from_millis(2);
    inf.add_event_handler(EventHandlerFns::new().on_add(move |_: &Arc<ConfigMap>, _| {
        std::thread::sleep(slow);
        d.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    inf.start().unwrap();
    // Distinct keys: each starts a pending run, so exactly one in
    // SAMPLE_EVERY is stamped.
    let n = 4 * SAMPLE_EVERY as usize;
    for i in 0..n {
        inf.queue().add(cm(&format!("c{i}"), 1)).unwrap();
    }
    wait_until(T, "all delivered", || delivered.load(Ordering::SeqCst) == n);
    let m = inf.metrics();
    assert_eq!(m.event_to_cache.count, 4, "{:?}", m.event_to_cache);
    assert_eq!(m.fifo.enqueued, n as u64);
    let last = m.event_to_cache.buckets.last().unwrap().1;
    assert_eq!(
        last, 4,
        "all samples under a minute: {:?}",
        m.event_to_cache
    );
    // The handler's thread took at least one batch, the first is a sample,
    // and no take records more than one.
    let wait = &m.handlers[0].wait;
    assert!(wait.count >= 1, "{wait:?}");
    assert!(
        wait.count <= n.div_ceil(SAMPLE_EVERY as usize) as u64,
        "{wait:?}"
    );
    inf.shutdown();
}

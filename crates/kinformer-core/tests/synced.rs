//! Waiting for has-synced by notification: informers, registrations, and
//! shutdown waking the waiters.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::{EventHandlerFns, SharedIndexInformer};

const T: Duration = Duration::from_secs(10);

fn informer() -> SharedIndexInformer<ConfigMap> {
    SharedIndexInformer::builder()
        .name("synced")
        .threads(2)
        .build()
}

/// A handler that takes `per_add` over each add, counting them.
fn slow_handler(per_add: Duration) -> (EventHandlerFns<ConfigMap>, Arc<AtomicUsize>) {
    let n = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&n);
    let h = EventHandlerFns::new().on_add(move |_: &Arc<ConfigMap>, _| {
        std::thread::sleep(per_add);
        c.fetch_add(1, Ordering::SeqCst);
    });
    (h, n)
}

#[test]
fn blocking_wait_returns_once_the_first_list_is_applied() {
    let inf = informer();
    inf.start().unwrap();
    assert!(
        !inf.wait_synced_blocking(Duration::from_millis(50)),
        "no list yet: the wait times out"
    );
    let feeder = {
        let q = Arc::clone(inf.queue());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            q.replace((0..100).map(|i| cm(&format!("c{i}"), 1)), "7")
                .unwrap();
        })
    };
    let started = Instant::now();
    assert!(inf.wait_synced_blocking(T));
    assert!(started.elapsed() < T);
    assert_eq!(inf.indexer().len(), 100, "synced means applied");
    assert_eq!(inf.last_sync_resource_version(), "7");
    feeder.join().unwrap();
    inf.shutdown();
}

#[test]
fn a_registration_is_synced_once_its_handler_has_the_initial_list() {
    let inf = informer();
    let (h, seen) = slow_handler(Duration::from_millis(2));
    let reg = inf.add_event_handler(h).unwrap();
    inf.start().unwrap();
    inf.queue()
        .replace((0..50).map(|i| cm(&format!("c{i}"), 1)), "1")
        .unwrap();
    futures::executor::block_on(reg.synced());
    assert!(reg.has_synced());
    assert_eq!(
        seen.load(Ordering::SeqCst),
        50,
        "every initial add delivered"
    );
    // The informer's own wait with handlers says the same.
    futures::executor::block_on(inf.synced_with_handlers());
    assert!(inf.has_synced_with_handlers());
    inf.shutdown();
}

#[test]
fn a_late_registration_waits_for_its_replay() {
    let inf = informer();
    inf.start().unwrap();
    inf.queue()
        .replace((0..40).map(|i| cm(&format!("c{i}"), 1)), "1")
        .unwrap();
    assert!(inf.wait_synced_blocking(T));
    let (h, seen) = slow_handler(Duration::from_millis(2));
    let reg = inf.add_event_handler(h).unwrap();
    assert!(reg.wait_synced_blocking(T));
    assert_eq!(seen.load(Ordering::SeqCst), 40);
    inf.shutdown();
}

#[test]
fn shutdown_wakes_every_waiter() {
    let inf = informer();
    let (h, _) = slow_handler(Duration::ZERO);
    let reg = inf.add_event_handler(h).unwrap();
    inf.start().unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let (inf, reg) = (inf.clone(), reg.clone());
            std::thread::spawn(move || match i {
                0 => futures::executor::block_on(inf.synced()),
                1 => futures::executor::block_on(reg.synced()),
                _ => futures::executor::block_on(inf.synced_with_handlers()),
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    inf.shutdown();
    for w in waiters {
        w.join().unwrap();
    }
    assert!(started.elapsed() < T, "the waiters were woken");
    assert!(!inf.has_synced(), "woken by the shutdown, not synced");
}

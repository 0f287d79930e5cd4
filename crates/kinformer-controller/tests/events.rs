//! The async bridge: informer events as a Stream, isolated like a handler.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_controller::InformerEvents;
use kinformer_core::{MAX_WAITING_SEGMENTS, Notification};

/// A short description of an event: kind, name, old and new versions.
fn describe(n: &Notification<ConfigMap>) -> (char, String, u64, u64) {
    let name = |o: &ConfigMap| o.metadata.name.clone().unwrap();
    match n {
        Notification::Add { obj, .. } => ('A', name(obj), 0, rv(obj.as_ref())),
        Notification::Update { old, new, .. } => {
            ('U', name(new), rv(old.as_ref()), rv(new.as_ref()))
        }
        Notification::Delete(d) => ('D', name(d.object()), rv(d.object().as_ref()), 0),
    }
}

#[tokio::test]
async fn events_yields_the_cache_then_each_keys_changes_in_order() {
    let cms = informer("events", vec![cm("a", 1)]);
    let mut events = cms.events().unwrap();
    let first = within("the replay", events.next()).await.unwrap();
    assert!(matches!(
        first,
        Notification::Add {
            is_in_initial_list: true,
            ..
        }
    ));
    assert_eq!(describe(&first), ('A', "a".into(), 0, 1));
    cms.queue().add(cm("b", 2)).unwrap();
    cms.queue().update(cm("a", 3)).unwrap();
    cms.queue().delete(cm("b", 4)).unwrap();
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(describe(&within("events", events.next()).await.unwrap()));
    }
    // Each key's events in order (keys interleave as the queue hands them out).
    let of = |name: &str| {
        got.iter()
            .filter(|e| e.1 == name)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(of("a"), vec![('U', "a".into(), 1, 3)]);
    assert_eq!(
        of("b"),
        vec![('A', "b".into(), 0, 2), ('D', "b".into(), 4, 0)]
    );
}

#[tokio::test]
async fn a_slow_stream_never_slows_the_cache_and_its_backlog_is_bounded() {
    let keys = 10;
    let cms = informer("slow", vec![]);
    let mut events = cms.events_with_buffer(4).unwrap();
    // The consumer does not poll while 10,000 changes of 10 keys go through.
    for v in 1..=1000u64 {
        for k in 0..keys {
            cms.queue().add(cm(&format!("k{k}"), v)).unwrap();
        }
    }
    let indexer = cms.indexer();
    until("the cache's newest states", || {
        (0..keys).all(|k| indexer.get(&format!("ns/k{k}")).map(|o| rv(o.as_ref())) == Some(1000))
    })
    .await;
    assert!(events.buffered_len() <= 4);
    // The handler's backlog coalesces per key: at most one entry per key
    // beyond the batches it holds as pushed (each batch holds a key once).
    let stats = events.stats();
    assert!(
        stats.backlog <= MAX_WAITING_SEGMENTS * keys + keys,
        "{stats:?}"
    );
    // Draining yields each key's states in order, ending at the newest.
    let mut newest = vec![0u64; keys];
    while newest.iter().any(|&v| v < 1000) {
        let (_, name, old, new) = describe(&within("drain", events.next()).await.unwrap());
        let k: usize = name[1..].parse().unwrap();
        assert!(
            new > newest[k],
            "{name}: {old} -> {new} after {}",
            newest[k]
        );
        newest[k] = new;
    }
    let stats = events.stats();
    assert!(
        stats.merged > 0,
        "a lagging stream coalesced nothing: {stats:?}"
    );
}

#[tokio::test]
async fn dropping_the_stream_removes_its_handler() {
    let cms = informer("drop", vec![cm("a", 1)]);
    let events = cms.events_with_buffer(1).unwrap();
    assert_eq!(cms.metrics().handlers.len(), 1);
    // Fill the buffer so that the handler's thread waits on it.
    cms.queue().update(cm("a", 2)).unwrap();
    cms.queue().update(cm("a", 3)).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    within("the drop", async move { drop(events) }).await;
    assert!(cms.metrics().handlers.is_empty());
    // The informer goes on.
    cms.queue().update(cm("a", 4)).unwrap();
    until("the cache", || {
        cms.indexer().get("ns/a").map(|o| rv(o.as_ref())) == Some(4)
    })
    .await;
}

//! An object whose decode panics (a poison object) is skipped and counted;
//! the reflector goes on listing and watching, with a decode pool or
//! decoding inline. (A panicking transform is caught by the queue itself:
//! `FifoStats::transform_panics`.)

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::DecodePool;
use kinformer_reflector::object_decode::{Decoders, ObjectDecode, SerdeDecode};
use serde::Deserializer;

/// Pods through their own `Deserialize` impl, except that decoding the
/// one named `poison` panics.
struct PoisonDecode;

impl ObjectDecode<Pod> for PoisonDecode {
    fn deserialize<'de, D: Deserializer<'de>>(de: D, skip: bool) -> Result<Pod, D::Error> {
        let pod: Pod = <SerdeDecode as ObjectDecode<Pod>>::deserialize(de, skip)?;
        assert_ne!(
            pod.metadata.name.as_deref(),
            Some("poison"),
            "poison object"
        );
        Ok(pod)
    }
}

fn poisoned() -> Decoders<Pod> {
    Decoders::with::<PoisonDecode>()
}

fn pool(pooled: bool) -> Option<Arc<DecodePool>> {
    pooled.then(|| DecodePool::new(2, "decode").unwrap())
}

async fn a_poison_object_in_the_first_list_is_skipped(pooled: bool) {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(
            10,
            vec![pod("a", 5), pod("poison", 6), pod("b", 7)],
            None,
        )))
        .watch(Reply::lines_then_hang(vec![event("ADDED", pod("c", 11))]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start_decoding(client(addr), fast(false), pool(pooled), poisoned());
    eventually("the watch after the list", || {
        h.cache() == kv(&[("a", 5), ("b", 7), ("c", 11)])
    })
    .await;
    assert!(h.informer.has_synced());
    assert!(!h.task.is_finished(), "the reflector is still running");
    assert!(h.has_error("decode_panicked"), "{:?}", h.errors.lock());
    assert_eq!(h.metrics.get().decode_errors, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_object_in_the_first_list_is_skipped_on_the_decode_pool() {
    a_poison_object_in_the_first_list_is_skipped(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_object_in_the_first_list_is_skipped_decoding_inline() {
    a_poison_object_in_the_first_list_is_skipped(false).await;
}

/// The poison arrives through a watch, then again in the relist that a
/// 410 forces: both are skipped, and the reflector watches on.
async fn a_poison_object_through_watch_and_relist_is_skipped(pooled: bool) {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::lines(vec![
            event("ADDED", pod("poison", 11)),
            event("ADDED", pod("b", 12)),
            error_event(410, "Expired"),
        ]))
        .list(Reply::Json(list(
            13,
            vec![pod("a", 5), pod("poison", 11), pod("b", 12)],
            None,
        )))
        .watch(Reply::lines_then_hang(vec![event("ADDED", pod("c", 14))]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start_decoding(client(addr), fast(false), pool(pooled), poisoned());
    eventually("the watch after the relist", || {
        h.cache() == kv(&[("a", 5), ("b", 12), ("c", 14)])
    })
    .await;
    assert!(!h.task.is_finished(), "the reflector is still running");
    let m = h.metrics.get();
    assert_eq!((m.lists, m.relists), (2, 1));
    assert_eq!(m.decode_errors, 2, "once in the watch, once in the relist");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_object_through_watch_and_relist_is_skipped_on_the_decode_pool() {
    a_poison_object_through_watch_and_relist_is_skipped(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_object_through_watch_and_relist_is_skipped_decoding_inline() {
    a_poison_object_through_watch_and_relist_is_skipped(false).await;
}

/// A panic payload whose own `Drop` panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload's drop panicked too");
    }
}

/// Pods, except that decoding the one named `poison` panics with a
/// [`Bomb`].
struct BombDecode;

impl ObjectDecode<Pod> for BombDecode {
    fn deserialize<'de, D: Deserializer<'de>>(de: D, skip: bool) -> Result<Pod, D::Error> {
        let pod: Pod = <SerdeDecode as ObjectDecode<Pod>>::deserialize(de, skip)?;
        if pod.metadata.name.as_deref() == Some("poison") {
            std::panic::panic_any(Bomb);
        }
        Ok(pod)
    }
}

/// A poison object whose panic payload panics again when dropped is
/// skipped like any other: the second panic never reaches the decode
/// thread or the reflector's task.
async fn a_poison_whose_payload_panics_on_drop_is_skipped(pooled: bool) {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(
            10,
            vec![pod("a", 5), pod("poison", 6)],
            None,
        )))
        .watch(Reply::lines_then_hang(vec![
            event("ADDED", pod("poison", 11)),
            event("ADDED", pod("b", 12)),
        ]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start_decoding(
        client(addr),
        fast(false),
        pool(pooled),
        Decoders::with::<BombDecode>(),
    );
    eventually("the watch after the list", || {
        h.cache() == kv(&[("a", 5), ("b", 12)])
    })
    .await;
    assert!(!h.task.is_finished(), "the reflector is still running");
    assert_eq!(
        h.metrics.get().decode_errors,
        2,
        "once in the list, once in the watch"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_whose_payload_panics_on_drop_is_skipped_on_the_decode_pool() {
    a_poison_whose_payload_panics_on_drop_is_skipped(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_whose_payload_panics_on_drop_is_skipped_decoding_inline() {
    a_poison_whose_payload_panics_on_drop_is_skipped(false).await;
}

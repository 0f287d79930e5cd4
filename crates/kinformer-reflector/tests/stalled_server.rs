//! A server that accepts a request and then goes quiet: the idle timeout
//! holds from the moment a LIST or WATCH is sent, on both watch transports,
//! and quiet watches that get bookmarks are not cut.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use kinformer_reflector::{DirectWatch, ReflectorConfig};

/// Fast settings with a short idle timeout and list timeout (and a
/// shorter "very short watch", so an idle watch is re-watched rather than
/// relisted).
fn quick(watch_list: bool) -> ReflectorConfig {
    fast(watch_list)
        .idle_timeout(Duration::from_millis(300))
        .list_timeout(Duration::from_millis(300))
        .short_watch(Duration::from_millis(50))
}

/// A harness on `addr`, its watches on direct connections or the client.
fn start(addr: SocketAddr, config: ReflectorConfig, direct: bool) -> Harness {
    if direct {
        let cfg = kube::Config::new(format!("http://{addr}").parse().unwrap());
        let direct = DirectWatch::from_config(&cfg).unwrap();
        Harness::start_direct(client(addr), config, direct)
    } else {
        Harness::start(client(addr), config)
    }
}

async fn an_unanswered_watch_is_abandoned_and_rewatched(direct: bool) {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::NoAnswer)
        .watch(Reply::lines_then_hang(vec![event("ADDED", pod("b", 11))]));
    let addr = fake_server(script.clone()).await;
    let h = start(addr, quick(false), direct);
    eventually("the second watch's event", || {
        h.cache() == kv(&[("a", 5), ("b", 11)])
    })
    .await;
    assert!(h.has_error("idle_timeout"), "{:?}", h.errors.lock());
    let watches = script.seen_watches();
    assert_eq!(watches[1].param("resourceVersion"), Some("10"));
    let m = h.metrics.get();
    assert_eq!((m.lists, m.relists), (1, 0), "re-watched without a relist");
    assert_eq!(m.direct_watches > 0, direct);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_watch_is_abandoned_and_rewatched_on_the_client() {
    an_unanswered_watch_is_abandoned_and_rewatched(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_watch_is_abandoned_and_rewatched_on_direct_watches() {
    an_unanswered_watch_is_abandoned_and_rewatched(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_list_is_abandoned_and_listed_again() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::NoAnswer)
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)));
    let addr = fake_server(script.clone()).await;
    let h = start(addr, quick(false), false);
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache(), kv(&[("a", 5)]));
    assert_eq!(script.seen_lists().len(), 2);
    assert!(h.has_error("idle_timeout"), "{:?}", h.errors.lock());
    assert!(h.metrics.get().backoffs >= 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_body_that_stops_arriving_is_abandoned_and_listed_again() {
    let script = Arc::new(Script::default());
    let start_of_list =
        r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"10"},"items":["#;
    script
        .list(Reply::lines_then_hang(vec![start_of_list.to_string()]))
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)));
    let addr = fake_server(script.clone()).await;
    let h = start(addr, quick(false), false);
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache(), kv(&[("a", 5)]));
    assert_eq!(script.seen_lists().len(), 2);
    assert!(h.has_error("idle_timeout"), "{:?}", h.errors.lock());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_watch_list_falls_back_to_a_list() {
    let script = Arc::new(Script::default());
    script
        .watch(Reply::NoAnswer)
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::lines_then_hang(vec![event("ADDED", pod("b", 11))]));
    let addr = fake_server(script.clone()).await;
    let h = start(addr, quick(true), true);
    eventually("listed, then watched", || {
        h.cache() == kv(&[("a", 5), ("b", 11)])
    })
    .await;
    assert_eq!(
        script.seen_watches()[0].param("sendInitialEvents"),
        Some("true")
    );
    assert!(h.has_error("idle_timeout"), "{:?}", h.errors.lock());
    h.stop().await;
}

async fn a_quiet_watch_with_bookmarks_is_not_cut(direct: bool) {
    let script = Arc::new(Script::default());
    // Eight bookmarks 100 ms apart: 800 ms of watch, each gap well inside
    // the 300 ms idle timeout.
    let bookmarks = (11..=18).map(|rv| bookmark(rv, false)).collect();
    script
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::Paced {
            lines: bookmarks,
            every: Duration::from_millis(100),
        });
    let addr = fake_server(script.clone()).await;
    let h = start(addr, quick(false), direct);
    eventually("every bookmark", || h.metrics.get().bookmarks == 8).await;
    let m = h.metrics.get();
    assert_eq!(m.watches, 1, "{:?}", h.errors.lock());
    assert_eq!(m.events, 0, "bookmarks are not events");
    assert_eq!(m.last_resource_version, "18");
    assert!(!h.has_error("idle_timeout"), "{:?}", h.errors.lock());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_watch_with_bookmarks_is_not_cut_on_the_client() {
    a_quiet_watch_with_bookmarks_is_not_cut(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_watch_with_bookmarks_is_not_cut_on_direct_watches() {
    a_quiet_watch_with_bookmarks_is_not_cut(true).await;
}

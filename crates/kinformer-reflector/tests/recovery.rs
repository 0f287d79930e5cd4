//! client-go's list/watch recovery behaviours, against a scripted fake API
//! server where exact answers are needed.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use tokio::sync::Notify;

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rv_sequence_on_first_list_and_relist_is_zero_then_last() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::lines(vec![
            event("ADDED", pod("b", 11)),
            error_event(410, "Expired"),
        ]))
        .list(Reply::Json(list(12, vec![pod("a", 5), pod("b", 11)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("relist", || script.seen_lists().len() == 2).await;
    eventually("second watch", || script.seen_watches().len() == 2).await;
    assert_eq!(script.list_rvs(), s(&["0", "11"]));
    let first = &script.seen_lists()[0];
    assert_eq!(first.param("limit"), Some("500"));
    // A relist at an exact resourceVersion is unpaged: with a limit the
    // apiserver would read etcd at that (possibly stale) revision instead
    // of serving its watch cache.
    assert_eq!(script.seen_lists()[1].param("limit"), None);
    let watches = script.seen_watches();
    assert_eq!(watches[0].param("resourceVersion"), Some("10"));
    assert_eq!(watches[0].param("allowWatchBookmarks"), Some("true"));
    let timeout: u64 = watches[0].param("timeoutSeconds").unwrap().parse().unwrap();
    assert!((300..=600).contains(&timeout), "{timeout}");
    assert_eq!(watches[1].param("resourceVersion"), Some("12"));
    assert_eq!(h.cache(), kv(&[("a", 5), ("b", 11)]));
    let m = h.metrics.get();
    assert_eq!((m.lists, m.relists), (2, 1));
    assert_eq!(m.events, 1, "the ADDED; not the ERROR");
    assert!(h.has_error("api"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_exact_rv_relists_at_zero_last_then_quorum() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::lines(vec![error_event(410, "Expired")]))
        .list(Reply::Status(410, status(410, "Expired")))
        .list(Reply::Json(list(15, vec![pod("a", 14)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("watch after quorum list", || {
        script.seen_watches().len() == 2
    })
    .await;
    assert_eq!(script.list_rvs(), s(&["0", "10", ""]));
    assert_eq!(
        script.seen_watches()[1].param("resourceVersion"),
        Some("15")
    );
    eventually("cache updated", || h.cache() == kv(&[("a", 14)])).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_large_resource_version_relists_from_quorum() {
    let script = Arc::new(Script::default());
    let too_large = serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": "Too large resource version: 10, current: 3", "reason": "Timeout", "code": 504});
    script
        .list(Reply::Json(list(10, vec![], None)))
        .watch(Reply::lines(vec![error_event(410, "Expired")]))
        .list(Reply::Status(504, too_large))
        .list(Reply::Json(list(3, vec![], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("watch after quorum list", || {
        script.seen_watches().len() == 2
    })
    .await;
    assert_eq!(script.list_rvs(), s(&["0", "10", ""]));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_stays_paged_when_the_first_list_came_back_paged() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(20, vec![pod("a", 1)], Some("tok-1"))))
        .list(Reply::Json(list(20, vec![pod("b", 2)], None)))
        .watch(Reply::lines(vec![error_event(410, "Expired")]))
        .list(Reply::Json(list(30, vec![pod("a", 1), pod("b", 2)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false).page_size(1));
    eventually("relist", || script.seen_lists().len() == 3).await;
    let lists = script.seen_lists();
    assert_eq!(lists[2].param("resourceVersion"), Some("20"));
    assert_eq!(lists[2].param("limit"), Some("1"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_list_when_a_continue_token_expires() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(20, vec![pod("a", 1)], Some("tok-1"))))
        .list(Reply::Status(410, status(410, "Expired")))
        .list(Reply::Json(list(25, vec![pod("a", 1), pod("b", 22)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false).page_size(1));
    eventually("watch", || !script.seen_watches().is_empty()).await;
    let lists = script.seen_lists();
    assert_eq!(lists.len(), 3);
    assert_eq!(lists[1].param("continue"), Some("tok-1"));
    assert_eq!(lists[1].param("resourceVersion"), None);
    assert_eq!(lists[2].param("continue"), None);
    assert_eq!(lists[2].param("limit"), None);
    assert_eq!(lists[2].param("resourceVersion"), None);
    assert_eq!(
        script.seen_watches()[0].param("resourceVersion"),
        Some("25")
    );
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache(), kv(&[("a", 1), ("b", 22)]));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_list_follows_continue_tokens() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(20, vec![pod("a", 1)], Some("t1"))))
        .list(Reply::Json(list(20, vec![pod("b", 2)], Some("t2"))))
        .list(Reply::Json(list(20, vec![pod("c", 3)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false).page_size(1));
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache(), kv(&[("a", 1), ("b", 2), ("c", 3)]));
    let conts: Vec<Option<String>> = script
        .seen_lists()
        .iter()
        .map(|l| l.param("continue").map(str::to_string))
        .collect();
    assert_eq!(conts, vec![None, Some("t1".into()), Some("t2".into())]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_watch_end_rewatches_from_last_rv_without_relist() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::lines(vec![event("ADDED", pod("b", 11))]))
        .watch(Reply::lines_then_hang(vec![event("ADDED", pod("c", 12))]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("c cached", || h.cache().len() == 3).await;
    assert_eq!(script.seen_lists().len(), 1);
    let w = script.seen_watches();
    assert_eq!(w[1].param("resourceVersion"), Some("11"));
    let m = h.metrics.get();
    assert_eq!((m.relists, m.watch_restarts), (0, 1));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmark_advances_the_watch_resource_version() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![], None)))
        .watch(Reply::lines(vec![bookmark(30, false)]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("rewatch", || script.seen_watches().len() == 2).await;
    assert_eq!(
        script.seen_watches()[1].param("resourceVersion"),
        Some("30")
    );
    assert_eq!(script.seen_lists().len(), 1);
    assert_eq!(h.metrics.get().bookmarks, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn very_short_watch_without_events_relists() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![], None)))
        .watch(Reply::lines(vec![]))
        .list(Reply::Json(list(10, vec![], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("relist", || script.seen_lists().len() == 2).await;
    assert_eq!(script.list_rvs(), s(&["0", "10"]));
    assert!(h.has_error("very_short_watch"));
    h.stop().await;
}

/// Each of `refusals` answers one watch with 429; then the watch goes on.
/// Every watch resumes from the list's resourceVersion, after a backoff,
/// and nothing is relisted.
async fn too_many_requests_back_off_and_rewatch(refusals: Vec<Reply>) {
    let n = refusals.len();
    let script = Arc::new(Script::default());
    script.list(Reply::Json(list(10, vec![pod("a", 5)], None)));
    for r in refusals {
        script.watch(r);
    }
    script.watch(Reply::lines_then_hang(vec![event("ADDED", pod("b", 11))]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("b cached", || h.cache().len() == 2).await;
    assert_eq!(script.seen_lists().len(), 1);
    let w = script.seen_watches();
    assert_eq!(w.len(), n + 1);
    assert!(w.iter().all(|w| w.param("resourceVersion") == Some("10")));
    let m = h.metrics.get();
    assert!(m.backoffs >= n as u64, "{m:?}");
    assert_eq!(m.relists, 0);
    assert!(h.has_error("api: API error 429"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_backs_off_and_rewatches_without_relist() {
    let refused = || Reply::Status(429, status(429, "TooManyRequests"));
    too_many_requests_back_off_and_rewatch(vec![refused(), refused()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_in_the_stream_rewatches_without_relist() {
    let refused = Reply::lines(vec![error_event(429, "TooManyRequests")]);
    too_many_requests_back_off_and_rewatch(vec![refused]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_error_in_the_stream_relists_from_the_last_rv() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::lines(vec![
            event("ADDED", pod("b", 11)),
            error_event(500, "InternalError"),
        ]))
        .list(Reply::Json(list(12, vec![pod("b", 11)], None)))
        .watch(Reply::lines_then_hang(vec![]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("second watch", || script.seen_watches().len() == 2).await;
    assert_eq!(script.list_rvs(), s(&["0", "11"]));
    assert_eq!(
        script.seen_watches()[1].param("resourceVersion"),
        Some("12")
    );
    // The relist removed `a`, which the server no longer lists.
    eventually("cache relisted", || h.cache() == kv(&[("b", 11)])).await;
    assert_eq!(h.metrics.get().relists, 1);
    assert!(h.has_error("api: API error 500"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_list_is_reported_backed_off_and_retried() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Status(403, status(403, "Forbidden")))
        .list(Reply::Status(500, status(500, "InternalError")))
        .list(Reply::Json(list(7, vec![pod("a", 6)], None)))
        .watch(Reply::lines_then_hang(vec![]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache(), kv(&[("a", 6)]));
    // Each failed list was retried from the start, after a backoff.
    assert_eq!(script.list_rvs(), s(&["0", "0", "0"]));
    assert!(h.has_error("api: API error 403"));
    assert!(h.has_error("api: API error 500"));
    let m = h.metrics.get();
    assert!(m.backoffs >= 2, "{m:?}");
    eventually("watch from the list", || script.seen_watches().len() == 1).await;
    assert_eq!(script.seen_watches()[0].param("resourceVersion"), Some("7"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_relists_and_delivers_tombstones_for_objects_deleted_while_disconnected() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(
            10,
            vec![pod("a", 1), pod("b", 2), pod("c", 3)],
            None,
        )))
        .watch(Reply::Status(410, status(410, "Gone")))
        .list(Reply::Json(list(20, vec![pod("a", 1), pod("c", 15)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("b deleted", || {
        h.events.lock().contains(&Seen2::Delete("b".into(), true))
    })
    .await;
    eventually("c updated", || h.cache() == kv(&[("a", 1), ("c", 15)])).await;
    assert_eq!(script.list_rvs(), s(&["0", "10"]));
    assert!(
        h.events
            .lock()
            .contains(&Seen2::Update("c".into(), "15".into()))
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_is_not_synced_before_the_end_bookmark() {
    let script = Arc::new(Script::default());
    let gate = Arc::new(Notify::new());
    script.watch(Reply::Stream {
        before: vec![event("ADDED", pod("a", 3)), event("ADDED", pod("b", 4))],
        gate: Some(gate.clone()),
        after: vec![bookmark(9, true), event("ADDED", pod("c", 10))],
        hang: true,
    });
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(true));
    eventually("watch-list request", || !script.seen_watches().is_empty()).await;
    // The initial events are applied as they stream in, but the informer
    // is not synced before the end bookmark.
    eventually("a and b cached", || h.cache() == kv(&[("a", 3), ("b", 4)])).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!h.informer.has_synced());
    let m = h.metrics.get();
    assert_eq!((m.lists_started, m.lists), (1, 0), "a list under way shows");
    gate.notify_one();
    eventually("synced", || h.informer.has_synced()).await;
    eventually("c cached", || h.cache().len() == 3).await;
    let w = &script.seen_watches()[0];
    assert_eq!(w.param("sendInitialEvents"), Some("true"));
    assert_eq!(w.param("resourceVersionMatch"), Some("NotOlderThan"));
    assert_eq!(w.param("allowWatchBookmarks"), Some("true"));
    assert!(script.seen_lists().is_empty());
    assert_eq!(script.seen_watches().len(), 1, "the same stream goes on");
    let m = h.metrics.get();
    assert_eq!(
        (m.lists_started, m.lists, m.watch_list_syncs, m.relists),
        (1, 1, 1, 0),
        "a WatchList sync is a list"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_shows_in_the_counters_while_it_is_under_way() {
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, vec![pod("a", 5)], None)))
        .watch(Reply::lines(vec![error_event(410, "Expired")]))
        .list(Reply::NoAnswer);
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("the relist's request", || script.seen_lists().len() == 2).await;
    let m = h.metrics.get();
    assert_eq!((m.lists_started, m.lists, m.relists), (2, 1, 0));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_falls_back_to_list_when_unsupported() {
    let script = Arc::new(Script::default());
    script
        .watch(Reply::Status(422, status(422, "Invalid")))
        .list(Reply::Json(list(7, vec![pod("a", 6)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(true));
    eventually("synced", || h.informer.has_synced()).await;
    eventually("plain watch", || script.seen_watches().len() == 2).await;
    let w = script.seen_watches();
    assert_eq!(w[0].param("sendInitialEvents"), Some("true"));
    assert_eq!(w[1].param("sendInitialEvents"), None);
    assert_eq!(w[1].param("resourceVersion"), Some("7"));
    assert_eq!(script.list_rvs(), s(&["0"]));
    assert!(h.has_error("watch_list_unsupported"));
    assert_eq!(h.cache(), kv(&[("a", 6)]));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_and_deletes_during_streaming_are_applied_in_order() {
    let script = Arc::new(Script::default());
    let gate = Arc::new(Notify::new());
    script.watch(Reply::Stream {
        before: vec![
            event("ADDED", pod("a", 1)),
            event("ADDED", pod("b", 2)),
            event("MODIFIED", pod("a", 3)),
            event("DELETED", pod("b", 4)),
            bookmark(4, true),
        ],
        gate: Some(gate.clone()),
        after: vec![event("MODIFIED", pod("a", 5)), event("ADDED", pod("c", 6))],
        hang: true,
    });
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(true));
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache(), kv(&[("a", 3)]));
    gate.notify_one();
    eventually("final state", || h.cache() == kv(&[("a", 5), ("c", 6)])).await;
    let events = h.events.lock().clone();
    let of = |name: &str| -> Vec<Seen2> {
        events
            .iter()
            .filter(|e| match e {
                Seen2::Add(n, _, _) | Seen2::Update(n, _) | Seen2::Delete(n, _) => n == name,
            })
            .cloned()
            .collect()
    };
    // a: added as part of the initial list (at 1, or at 3 when the update
    // joined it in the queue), then brought to 3, then to 5 after the gate.
    let a = of("a");
    assert!(
        matches!(&a[0], Seen2::Add(_, rv, true) if rv == "1" || rv == "3"),
        "{a:?}"
    );
    assert!(
        a.contains(&Seen2::Update("a".into(), "3".into()))
            || a[0] == Seen2::Add("a".into(), "3".into(), true),
        "{a:?}"
    );
    assert_eq!(a.last(), Some(&Seen2::Update("a".into(), "5".into())));
    // b: never delivered, or delivered and then deleted.
    let b = of("b");
    assert!(
        b.is_empty() || matches!(b.last(), Some(Seen2::Delete(..))),
        "{b:?}"
    );
    assert!(events.contains(&Seen2::Add("c".into(), "6".into(), false)));
    h.stop().await;
}

/// The events that follow the end bookmark in the same read (decoded in
/// one batch with it) belong to the watch that goes on: none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_read_with_the_end_bookmark_go_on_to_the_watch() {
    let script = Arc::new(Script::default());
    // One chunk of the body: every line is in hand when the batch forms.
    let lines = [
        event("ADDED", pod("a", 1)),
        event("ADDED", pod("b", 2)),
        bookmark(2, true),
        event("MODIFIED", pod("a", 3)),
        event("DELETED", pod("b", 4)),
        event("ADDED", pod("c", 5)),
    ];
    script.watch(Reply::Stream {
        before: vec![lines.join("\n")],
        gate: None,
        after: vec![],
        hang: true,
    });
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(true));
    eventually("synced", || h.informer.has_synced()).await;
    eventually("the watch's events applied", || {
        h.cache() == kv(&[("a", 3), ("c", 5)])
    })
    .await;
    assert_eq!(script.seen_watches().len(), 1, "the same stream goes on");
    assert_eq!(h.metrics.get().watch_list_syncs, 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_stream_ending_early_falls_back_to_list() {
    let script = Arc::new(Script::default());
    script
        .watch(Reply::lines(vec![event("ADDED", pod("a", 1))]))
        .list(Reply::Json(list(8, vec![pod("a", 1), pod("b", 8)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(true));
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache(), kv(&[("a", 1), ("b", 8)]));
    assert!(h.has_error("watch_list_incomplete"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_unknown_events_never_corrupt_the_cache() {
    let script = Arc::new(Script::default());
    let nameless = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "default"}});
    script
        .list(Reply::Json(list(
            10,
            vec![pod("a", 5), nameless.clone()],
            None,
        )))
        .watch(Reply::lines(vec![
            event("SURPRISE", pod("x", 11)),
            event("ADDED", nameless),
            r#"{"type":"ADDED"}"#.to_string(),
            event("ADDED", serde_json::json!({"metadata": {"name": 7}})),
            event("ADDED", pod("c", 12)),
            "{\"type\":\"MODIFIED\",\"object\":{this is not json}".to_string(),
        ]))
        .list(Reply::Json(list(13, vec![pod("a", 5), pod("c", 12)], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("relist after malformed line", || {
        script.seen_lists().len() == 2
    })
    .await;
    eventually("synced", || h.informer.has_synced()).await;
    eventually("cache", || h.cache() == kv(&[("a", 5), ("c", 12)])).await;
    for kind in [
        "unknown_event_type",
        "missing_name",
        "missing_object",
        "decode_object",
        "malformed_event",
    ] {
        assert!(h.has_error(kind), "{kind}: {:?}", h.errors.lock());
    }
    assert_eq!(script.list_rvs(), s(&["0", "12"]));
    assert!(h.metrics.get().decode_errors >= 5);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_stream_rewatches_without_applying_the_partial_event() {
    let script = Arc::new(Script::default());
    let half = event("ADDED", pod("z", 13));
    let half = half[..half.len() / 2].to_string();
    script
        .list(Reply::Json(list(10, vec![], None)))
        .watch(Reply::Raw(vec![
            format!("{}\n", event("ADDED", pod("b", 11))),
            half,
        ]));
    script.watch(Reply::lines_then_hang(vec![event("ADDED", pod("c", 12))]));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("c cached", || h.cache().len() == 2).await;
    assert_eq!(h.cache(), kv(&[("b", 11), ("c", 12)]));
    assert_eq!(script.seen_lists().len(), 1);
    assert_eq!(
        script.seen_watches()[1].param("resourceVersion"),
        Some("11")
    );
    assert!(h.has_error("truncated_event"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_refused_backs_off_until_the_server_listens() {
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let script = Arc::new(Script::default());
    script.list(Reply::Json(list(3, vec![pod("a", 2)], None)));
    let h = Harness::start(client(addr), fast(false));
    eventually("refused twice", || h.metrics.get().errors >= 2).await;
    assert!(!h.informer.has_synced());
    fake_server_at(script.clone(), addr).await;
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache(), kv(&[("a", 2)]));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_connection_refused_backs_off_and_rewatches_without_relist() {
    let script = Arc::new(Script::default());
    script.list(Reply::Json(list(10, vec![pod("a", 5)], None)));
    let addr = fake_server_closing_after_first_list(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("watch refused twice", || h.metrics.get().backoffs >= 2).await;
    assert!(h.informer.has_synced());
    assert!(script.seen_watches().is_empty());
    script.watch(Reply::lines_then_hang(vec![event("ADDED", pod("b", 11))]));
    fake_server_at(script.clone(), addr).await;
    eventually("b cached", || h.cache().len() == 2).await;
    assert_eq!(script.seen_lists().len(), 1);
    let w = script.seen_watches();
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].param("resourceVersion"), Some("10"));
    let m = h.metrics.get();
    assert_eq!(m.relists, 0, "{m:?}");
    assert!(h.has_error("transport"), "{:?}", h.errors.lock());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_an_open_watch_promptly() {
    let script = Arc::new(Script::default());
    script.list(Reply::Json(list(3, vec![], None)));
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("watching", || !script.seen_watches().is_empty()).await;
    assert!(!h.task.is_finished());
    h.token.cancel();
    tokio::time::timeout(Duration::from_secs(2), h.task)
        .await
        .expect("reflector did not stop")
        .unwrap();
    h.informer.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_stops_when_the_queue_is_closed() {
    let script = Arc::new(Script::default());
    let gate = Arc::new(Notify::new());
    script.list(Reply::Json(list(3, vec![], None)));
    script.watch(Reply::Stream {
        before: vec![],
        gate: Some(gate.clone()),
        after: vec![event("ADDED", pod("late", 4))],
        hang: true,
    });
    let addr = fake_server(script.clone()).await;
    let h = Harness::start(client(addr), fast(false));
    eventually("watching", || !script.seen_watches().is_empty()).await;
    h.informer.shutdown();
    assert!(!h.task.is_finished());
    // The next event cannot be queued: the reflector returns on its own.
    gate.notify_one();
    within(h.task).await.unwrap();
    assert!(!h.token.is_cancelled());
}

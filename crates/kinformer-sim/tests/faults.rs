//! Every fault type is observable by a kube client and counted.

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kinformer_sim::{FaultAction, FaultConfig, FaultSchedule, Sim};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use serde_json::json;

#[allow(clippy::unwrap_used)]
async fn watch_now(
    api: &Api<Pod>,
    rv: u64,
) -> futures::stream::BoxStream<'static, kube::Result<WatchEvent<Pod>>> {
    within(api.watch(&WatchParams::default().disable_bookmarks(), &rv.to_string()))
        .await
        .unwrap()
        .boxed()
}

/// Waits until the sim counts `n` open watches.
async fn watches_open(sim: &kinformer_sim::RunningSim, n: i64) {
    while sim.handle().stats().watches_open < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_watches_ends_open_streams_and_is_counted() {
    let (sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let mut s1 = watch_now(&api, sim.handle().current_rv()).await;
    let mut s2 = watch_now(&api, sim.handle().current_rv()).await;
    watches_open(&sim, 2).await;
    sim.handle()
        .trigger(FaultAction::CloseWatches { fraction: 1.0 });
    assert!(within(s1.next()).await.is_none());
    assert!(within(s2.next()).await.is_none());
    assert_eq!(sim.handle().faults().counts().watches_closed, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flaky_watch_schedule_closes_watches_periodically() {
    let (sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let mut s = watch_now(&api, sim.handle().current_rv()).await;
    sim.handle().set_faults(FaultConfig {
        close_watches_every_ms: 100,
        close_watches_fraction: 1.0,
        ..FaultConfig::default()
    });
    assert!(within(s.next()).await.is_none());
    assert!(sim.handle().faults().counts().watches_closed >= 1);
    let flaky = FaultSchedule::by_name("flaky-watch").unwrap();
    assert_eq!(
        (flaky.close_watches_every_ms, flaky.close_watches_fraction),
        (5000, 0.5)
    );
    for name in FaultSchedule::NAMES {
        assert!(FaultSchedule::by_name(name).is_some(), "{name}");
    }
    assert!(FaultSchedule::by_name("nonsense").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_410_on_next_watch_and_on_open_watches() {
    let (sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let mut open = watch_now(&api, sim.handle().current_rv()).await;
    watches_open(&sim, 1).await;
    sim.handle()
        .trigger(FaultAction::ExpireWatches { fraction: 1.0 });
    match within(open.try_next()).await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {other:?}"),
    }
    sim.handle()
        .trigger(FaultAction::ExpireNextWatches { count: 1 });
    let mut next = watch_now(&api, sim.handle().current_rv()).await;
    match within(next.try_next()).await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    // Only one was armed: the watch after that is healthy.
    let mut healthy = watch_now(&api, sim.handle().current_rv()).await;
    sim.handle()
        .create("pods", pod("default", "a", json!({}), "n"))
        .unwrap();
    assert!(matches!(
        within(healthy.try_next()).await.unwrap().unwrap(),
        WatchEvent::Added(_)
    ));
    assert_eq!(sim.handle().faults().counts().watches_expired, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_closes_watches_and_forgets_history() {
    let (sim, client) = start(Sim::builder()).await;
    fill(&sim, "default", 3);
    let api: Api<Pod> = Api::namespaced(client, "default");
    let old = sim.handle().current_rv();
    sim.handle()
        .create("pods", pod("default", "a", json!({}), "n"))
        .unwrap();
    let mut open = watch_now(&api, old).await;
    assert!(matches!(
        within(open.try_next()).await.unwrap().unwrap(),
        WatchEvent::Added(_)
    ));
    sim.handle().trigger(FaultAction::Restart);
    assert!(within(open.next()).await.is_none());
    // Resuming from before the restart needs a relist.
    let mut resumed = watch_now(&api, old).await;
    match within(resumed.try_next()).await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    // Objects survive; a fresh list works.
    assert_eq!(
        within(api.list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        4
    );
    assert_eq!(sim.handle().faults().counts().restarts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_is_added_to_responses() {
    let (sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    sim.handle().set_faults(FaultConfig {
        latency_ms: 300,
        ..FaultConfig::default()
    });
    let t = Instant::now();
    within(api.list(&ListParams::default())).await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(sim.handle().faults().counts().delayed, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_429_and_500_are_status_errors() {
    let (sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    sim.handle().set_faults(FaultConfig {
        error_429_fraction: 1.0,
        retry_after_seconds: 2,
        ..FaultConfig::default()
    });
    let status = api_err(within(api.list(&ListParams::default())).await.unwrap_err());
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests")
    );
    let (code, headers, body) = raw(&client, "GET", "/api/v1/pods", None, None, "").await;
    assert_eq!(code, 429);
    assert_eq!(headers.get("retry-after").unwrap(), "2");
    let v = assert_status(&body, 429, "TooManyRequests");
    assert_eq!(v["details"]["retryAfterSeconds"], 2);
    sim.handle().set_faults(FaultConfig {
        error_500_fraction: 1.0,
        ..FaultConfig::default()
    });
    let status = api_err(within(api.list(&ListParams::default())).await.unwrap_err());
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "InternalError")
    );
    sim.handle().set_faults(FaultConfig::default());
    within(api.list(&ListParams::default())).await.unwrap();
    let c = sim.handle().faults().counts();
    assert_eq!((c.http_429, c.http_500), (2, 1));
    // The admin API is exempt from faults: read the same counters over HTTP.
    sim.handle().set_faults(FaultConfig {
        error_500_fraction: 1.0,
        ..FaultConfig::default()
    });
    let (code, _, body) = raw(&client, "GET", "/__sim/stats", None, None, "").await;
    assert_eq!(code, 200);
    let stats: kinformer_sim::Stats = serde_json::from_str(&body).unwrap();
    assert_eq!(stats.faults.http_429, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_truncated_event_lines_break_the_stream() {
    let (sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    sim.handle().set_faults(FaultConfig {
        malformed_line_fraction: 1.0,
        ..FaultConfig::default()
    });
    let mut s = watch_now(&api, sim.handle().current_rv()).await;
    sim.handle()
        .create("pods", pod("default", "a", json!({}), "n"))
        .unwrap();
    let first = within(s.next()).await;
    assert!(
        matches!(first, Some(Err(_))),
        "expected a decode error, got {first:?}"
    );
    assert_eq!(sim.handle().faults().counts().malformed_lines, 1);

    sim.handle().set_faults(FaultConfig {
        truncated_line_fraction: 1.0,
        ..FaultConfig::default()
    });
    let mut s = watch_now(&api, sim.handle().current_rv()).await;
    sim.handle()
        .create("pods", pod("default", "b", json!({}), "n"))
        .unwrap();
    // A half line then EOF: never a valid event.
    let mut valid = 0;
    while let Some(ev) = within(s.next()).await {
        if matches!(ev, Ok(WatchEvent::Added(_))) {
            valid += 1;
        }
    }
    assert_eq!(valid, 0);
    assert_eq!(sim.handle().faults().counts().truncated_lines, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_endpoint_switches_faults_at_runtime() {
    let (sim, client) = start(Sim::builder()).await;
    let (code, _, body) = raw(&client, "PUT", "/__sim/faults/chaos", None, None, "").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        sim.handle().faults().config(),
        FaultSchedule::by_name("chaos").unwrap()
    );
    let cfg = serde_json::to_string(&FaultConfig {
        latency_ms: 7,
        ..FaultConfig::default()
    })
    .unwrap();
    let (code, _, _) = raw(
        &client,
        "PUT",
        "/__sim/faults",
        Some("application/json"),
        None,
        &cfg,
    )
    .await;
    assert_eq!(code, 200);
    let (_, _, body) = raw(&client, "GET", "/__sim/faults", None, None, "").await;
    let got: FaultConfig = serde_json::from_str(&body).unwrap();
    assert_eq!(got.latency_ms, 7);
    let (code, _, _) = raw(&client, "PUT", "/__sim/faults/bogus", None, None, "").await;
    assert_eq!(code, 400);
    let action = r#"{"action":"restart"}"#;
    let (code, _, _) = raw(
        &client,
        "POST",
        "/__sim/faults/actions",
        Some("application/json"),
        None,
        action,
    )
    .await;
    assert_eq!(code, 204);
    assert_eq!(sim.handle().faults().counts().restarts, 1);
    // Fill and churn through the admin API.
    sim.handle().set_faults(FaultConfig::default());
    let (code, _, body) = raw(
        &client,
        "POST",
        "/__sim/fill",
        Some("application/json"),
        None,
        r#"{"kind":"pods","objects":20,"namespaces":2}"#,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(sim.handle().len("pods").unwrap(), 20);
    let churn = r#"{"kind":"pods","rate_per_sec":200,"duration_ms":200,"updates":1,"creates":0,"deletes":0}"#;
    let (code, _, body) = raw(
        &client,
        "POST",
        "/__sim/churn",
        Some("application/json"),
        None,
        churn,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let report: kinformer_sim::ChurnReport = serde_json::from_str(&body).unwrap();
    assert!(report.updates > 10 && report.creates == 0, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_watches_send_nothing_until_released_then_everything_in_order() {
    let (sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let mut s = watch_now(&api, sim.handle().current_rv()).await;
    watches_open(&sim, 1).await;
    sim.handle().trigger(FaultAction::HoldWatches);
    fill(&sim, "default", 50);
    // Held: not one of the 50 events arrives.
    let quiet = tokio::time::timeout(Duration::from_millis(300), s.next()).await;
    assert!(
        quiet.is_err(),
        "an event went out during the hold: {quiet:?}"
    );
    sim.handle().trigger(FaultAction::ReleaseWatches);
    let mut names = Vec::new();
    while names.len() < 50 {
        match within(s.try_next()).await.unwrap().unwrap() {
            WatchEvent::Added(p) => names.push(p.metadata.name.unwrap()),
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
    let want: Vec<String> = (0..50).map(|i| format!("p-{i:03}")).collect();
    assert_eq!(names, want);
    // Released: new events flow again.
    sim.handle()
        .create("pods", pod("default", "after", json!({}), "n"))
        .unwrap();
    match within(s.try_next()).await.unwrap().unwrap() {
        WatchEvent::Added(p) => assert_eq!(p.metadata.name.as_deref(), Some("after")),
        other => panic!("expected ADDED, got {other:?}"),
    }
}

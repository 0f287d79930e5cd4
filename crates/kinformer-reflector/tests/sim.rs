//! The reflector against kinformer-sim: restarts, selectors, streaming.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::ListWatchTarget;
use kinformer_sim::{FaultAction, FaultConfig, RunningSim, Sim};
use serde_json::{Value, json};

async fn sim() -> RunningSim {
    Sim::builder()
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// A sim holding `n` pods in `default`, named `p-00`, `p-01`, ...
async fn sim_with_pods(n: usize) -> RunningSim {
    let sim = sim().await;
    for i in 0..n {
        sim.handle()
            .create("pods", sim_pod(&format!("p-{i:02}"), json!({})))
            .unwrap();
    }
    sim
}

fn sim_pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "busybox"}]}})
}

/// Cuts the watches; while their reconnect is held up, deletes `pod` and
/// restarts the server, losing its history; then waits for `h`'s handler
/// to see the delete as a tombstone (which only a relist can give it).
async fn delete_while_disconnected_and_lose_history(sim: &RunningSim, h: &Harness, pod: &str) {
    sim.handle().set_faults(FaultConfig {
        latency_ms: 400,
        ..FaultConfig::default()
    });
    sim.handle()
        .trigger(FaultAction::CloseWatches { fraction: 1.0 });
    sim.handle().delete("pods", "default", pod).unwrap();
    sim.handle().trigger(FaultAction::Restart);
    tokio::time::sleep(Duration::from_millis(50)).await;
    sim.handle().set_faults(FaultConfig::default());
    eventually(&format!("tombstone for {pod}"), || {
        h.events.lock().contains(&Seen2::Delete(pod.into(), true))
    })
    .await;
}

/// The cache equals the sim's truth (keys and resourceVersions).
fn matches_source(h: &Harness, sim: &RunningSim) -> bool {
    let (_, truth) = sim.handle().keys_and_versions("pods").unwrap();
    let mut cache: Vec<(String, u64)> = h
        .informer
        .indexer()
        .list()
        .iter()
        .map(|p| {
            (
                format!(
                    "{}/{}",
                    p.metadata.namespace.clone().unwrap_or_default(),
                    p.metadata.name.clone().unwrap_or_default()
                ),
                p.metadata
                    .resource_version
                    .as_deref()
                    .unwrap_or("0")
                    .parse()
                    .unwrap(),
            )
        })
        .collect();
    cache.sort();
    cache == truth
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_with_lost_history_relists_and_delivers_missed_deletes() {
    for watch_list in [true, false] {
        let sim = sim_with_pods(5).await;
        let h = Harness::start(client(sim.addr()), fast(watch_list));
        eventually("synced", || h.informer.has_synced()).await;
        sim.handle()
            .create("pods", sim_pod("live", json!({})))
            .unwrap();
        eventually("live event", || h.cache().len() == 6).await;
        delete_while_disconnected_and_lose_history(&sim, &h, "p-01").await;
        eventually("cache matches source", || matches_source(&h, &sim)).await;
        assert!(h.metrics.get().relists >= 1, "{:?}", h.metrics.get());
        // And it keeps watching after the relist.
        sim.handle()
            .create("pods", sim_pod("after", json!({})))
            .unwrap();
        eventually("after restart", || matches_source(&h, &sim)).await;
        assert!(h.cache().iter().any(|(n, _)| n == "after"));
        h.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_field_selectors_are_honoured() {
    let sim = sim().await;
    for (name, app) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
        sim.handle()
            .create("pods", sim_pod(name, json!({"app": app})))
            .unwrap();
    }
    for watch_list in [true, false] {
        let target = ListWatchTarget::of::<Pod>(&(), Some("default"))
            .labels("app=web")
            .fields("spec.nodeName=n");
        let h = Harness::start_target(client(sim.addr()), fast(watch_list), target);
        eventually("synced", || h.informer.has_synced()).await;
        let names: Vec<String> = h.cache().into_iter().map(|(n, _)| n).collect();
        assert!(names.iter().all(|n| n.starts_with("web-")), "{names:?}");
        assert!(names.len() >= 2);
        h.stop().await;
    }
    // Leaving the selector is a delete for a selective watch.
    let target = ListWatchTarget::of::<Pod>(&(), None).labels("app=web");
    let h = Harness::start_target(client(sim.addr()), fast(false), target);
    eventually("synced", || h.informer.has_synced()).await;
    sim.handle()
        .patch(
            "pods",
            "default",
            "web-1",
            &json!({"metadata": {"labels": {"app": "db"}}}),
        )
        .unwrap();
    sim.handle()
        .create("pods", sim_pod("web-3", json!({"app": "web"})))
        .unwrap();
    sim.handle()
        .create("pods", sim_pod("db-2", json!({"app": "db"})))
        .unwrap();
    eventually("web-1 left, web-3 joined", || {
        let names: Vec<String> = h.cache().into_iter().map(|(n, _)| n).collect();
        names == ["web-2", "web-3"]
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_list_against_the_sim_syncs_without_list_and_follows_churn() {
    let sim = sim_with_pods(50).await;
    let h = Harness::start(client(sim.addr()), fast(true));
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(sim.handle().stats().lists, 0);
    for i in 0..10 {
        sim.handle()
            .delete("pods", "default", &format!("p-{i:02}"))
            .unwrap();
        sim.handle()
            .patch(
                "pods",
                "default",
                &format!("p-{:02}", 49 - i),
                &json!({"metadata": {"labels": {"x": "y"}}}),
            )
            .unwrap();
    }
    eventually("cache matches source", || matches_source(&h, &sim)).await;
    assert_eq!(h.metrics.get().watch_list_syncs, 1);
    h.stop().await;
}

/// Watches sent through a `DirectWatch` (connections of their own, bodies
/// read without hyper's client) sync, follow changes, re-watch after the
/// server closes them and relist after a restart that lost the history,
/// with WatchList on and off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_watches_sync_follow_changes_and_recover() {
    for watch_list in [true, false] {
        let sim = sim_with_pods(30).await;
        let config = kube::Config::new(format!("http://{}", sim.addr()).parse().unwrap());
        let direct = kinformer_reflector::DirectWatch::from_config(&config).unwrap();
        let h = Harness::start_direct(client(sim.addr()), fast(watch_list), direct);
        eventually("synced", || h.informer.has_synced()).await;
        let patch = |i: usize| {
            sim.handle()
                .patch(
                    "pods",
                    "default",
                    &format!("p-{i:02}"),
                    &json!({"metadata": {"labels": {"x": format!("{i}")}}}),
                )
                .unwrap();
        };
        (20..30).for_each(patch);
        sim.handle().delete("pods", "default", "p-00").unwrap();
        eventually("changes", || matches_source(&h, &sim)).await;
        let watches = h.metrics.get().watches;
        sim.handle()
            .trigger(FaultAction::CloseWatches { fraction: 1.0 });
        eventually("re-watched", || h.metrics.get().watches > watches).await;
        (10..20).for_each(patch);
        eventually("changes after the re-watch", || matches_source(&h, &sim)).await;
        // The re-watch is answered 410; a relist follows.
        let relists = h.metrics.get().relists;
        delete_while_disconnected_and_lose_history(&sim, &h, "p-01").await;
        eventually("relisted", || h.metrics.get().relists > relists).await;
        eventually("changes after the relist", || matches_source(&h, &sim)).await;
        let m = h.metrics.get();
        // The first watch, the one after the close, the one after the relist.
        assert!(m.direct_watches >= 3, "{m:?}");
        h.stop().await;
    }
}

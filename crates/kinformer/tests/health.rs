//! The factory's health: ready once synced and watching, stale (not ready)
//! once its reflectors cannot watch, not live once a reflector stopped.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer::{BackoffConfig, FactoryHealth, Phase, ReflectorConfig, SharedInformerFactory};
use kinformer_sim::{RunningSim, Sim};
use serde_json::json;

const SYNC: Duration = Duration::from_secs(15);

async fn sim() -> RunningSim {
    let sim = Sim::builder()
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    sim.handle()
        .create(
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-1", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .unwrap();
    sim
}

fn factory(sim: &RunningSim) -> SharedInformerFactory {
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    let config = ReflectorConfig::default().backoff(
        BackoffConfig::default()
            .initial(Duration::from_millis(20))
            .max(Duration::from_millis(100))
            .jitter(0.0),
    );
    SharedInformerFactory::builder(kube::Client::try_from(cfg).unwrap())
        .reflector_config(config)
        .stale_after(Duration::from_millis(300))
        .build()
}

async fn eventually(what: &str, f: &SharedInformerFactory, cond: impl Fn(&FactoryHealth) -> bool) {
    let deadline = tokio::time::Instant::now() + SYNC;
    loop {
        let h = f.health();
        if cond(&h) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: {h:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_once_synced_and_watching_then_stale_when_the_server_goes_away() {
    let sim = sim().await;
    let f = factory(&sim);
    let _pods = f.informer::<Pod>();
    let h = f.health();
    assert!(!h.is_ready());
    assert_eq!(h.readyz().status, 503);
    assert!(
        h.readyz().body.contains("factory not started"),
        "{}",
        h.readyz().body
    );
    assert_eq!(h.informers[0].reflector.phase, Phase::NotStarted);

    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    eventually("ready", &f, FactoryHealth::is_ready).await;
    let h = f.health();
    let probe = h.readyz();
    assert_eq!(probe.status, 200);
    assert!(probe.body.starts_with("ok\n"), "{}", probe.body);
    assert!(
        probe.body.contains("/api/v1/pods: ready (watching)"),
        "{}",
        probe.body
    );
    assert_eq!(h.livez().status, 200);
    assert_eq!(h.informers[0].reflector.not_watching_for, None);

    // The server goes away: the watch ends, relists are refused.
    drop(sim);
    eventually("stale", &f, |h| h.informers[0].stale).await;
    let h = f.health();
    assert!(h.informers[0].synced, "still synced, but stale");
    let probe = h.readyz();
    assert_eq!(probe.status, 503);
    assert!(probe.body.contains("stale"), "{}", probe.body);
    assert!(probe.body.contains("last error"), "{}", probe.body);
    assert_eq!(h.livez().status, 200, "its reflector still runs");
    assert!(!h.informers[0].reflector.relists_by_reason.is_empty());
    f.shutdown().await;
    assert!(!f.health().is_live());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_that_stopped_is_not_live() {
    let sim = sim().await;
    let f = factory(&sim);
    let _pods = f.informer::<Pod>();
    let configmaps = f.informer::<ConfigMap>();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    eventually("live and ready", &f, |h| h.is_live() && h.is_ready()).await;
    // Shutting one informer down closes its queue: its reflector returns
    // when it next has a change to queue.
    configmaps.shutdown();
    sim.handle()
        .create(
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm", "namespace": "default"}}),
        )
        .unwrap();
    eventually("not live", &f, |h| !h.is_live()).await;
    let h = f.health();
    let probe = h.livez();
    assert_eq!(probe.status, 503);
    assert!(
        probe
            .body
            .contains("/api/v1/configmaps: stopped (stopped: queue closed"),
        "{}",
        probe.body
    );
    assert!(
        probe.body.contains("/api/v1/pods: running"),
        "{}",
        probe.body
    );
    assert_eq!(
        h.readyz().status,
        503,
        "a stopped reflector's cache is stale"
    );
    f.shutdown().await;
}

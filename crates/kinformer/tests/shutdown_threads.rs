//! Shutdown leaves no thread behind (its own test binary, so that no other
//! test's threads are counted).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer::SharedInformerFactory;
use kinformer_sim::{RunningSim, Sim};
use serde_json::json;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

#[test]
fn blocking_shutdown_joins_every_thread_and_task() {
    let sim =
        RunningSim::start_in_background(Sim::builder().build(), "127.0.0.1:0".parse().unwrap())
            .unwrap();
    sim.handle()
        .create(
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
        )
        .unwrap();
    // kube's client runs a buffer task on the runtime it is built on.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    let client = rt.block_on(async { kube::Client::try_from(cfg).unwrap() });
    let before = threads();
    assert!(before > 0, "needs /proc");
    // No current runtime here: the factory runs its reflectors on its own.
    let f = SharedInformerFactory::builder(client)
        .tuning(kinformer::Tuning::default().threads_per_informer(2))
        .build();
    let pods = f.informer::<Pod>();
    let _ = f.informer::<ConfigMap>();
    f.start().unwrap();
    f.wait_for_cache_sync_blocking(Duration::from_secs(15))
        .unwrap();
    assert_eq!(pods.indexer().len(), 1);
    assert!(threads() > before, "informer threads running");
    f.shutdown_blocking();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while threads() > before {
        assert!(
            std::time::Instant::now() < deadline,
            "threads left: {} > {before}",
            threads()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sim.handle().stats().watches_open, 0);
    drop(rt);
    sim.shutdown();
}

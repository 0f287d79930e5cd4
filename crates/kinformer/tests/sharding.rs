//! Sharded informers against kinformer-sim (KEP-5866's `shardSelector`):
//! N shards of one collection together cache it exactly (no object twice,
//! none missing) through creates, updates and deletes, whether the server
//! applies the selector or ignores it (then the reflector filters, and
//! says so in its metrics); and a replica that takes over a dead peer's
//! shard while it runs, then gives it back.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::{
    EventHandlerFns, InformerOptions, ShardSelector, SharedIndexInformer, SharedInformerFactory,
};
use kinformer_sim::{RunningSim, Sim, SimConfig};
use serde_json::json;

const SHARDS: u32 = 3;
const SYNC: Duration = Duration::from_secs(15);

async fn sim(server_side: bool) -> (RunningSim, kube::Client) {
    let mut config = SimConfig::default();
    config.serve.sharded_list_and_watch = server_side;
    let sim = Sim::builder()
        .config(config)
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    (sim, kube::Client::try_from(cfg).unwrap())
}

fn cm(name: &str, v: u32) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}, "data": {"v": v.to_string()}})
}

/// The server's ConfigMaps: (name, resourceVersion).
fn source(sim: &RunningSim) -> BTreeSet<(String, String)> {
    let h = sim.handle();
    let res = h.resource("configmaps").unwrap();
    h.shared()
        .store
        .snapshot(res)
        .objects
        .iter()
        .map(|(_, o)| (o.meta.name.clone(), o.meta.rv.to_string()))
        .collect()
}

fn cached(shard: &SharedIndexInformer<ConfigMap>) -> Vec<(String, String)> {
    shard
        .indexer()
        .list()
        .iter()
        .map(|o| {
            let m = &o.metadata;
            (m.name.clone().unwrap(), m.resource_version.clone().unwrap())
        })
        .collect()
}

/// Waits until the shards' union equals the source with no object twice.
async fn union_matches(sim: &RunningSim, shards: &[SharedIndexInformer<ConfigMap>]) {
    let deadline = Instant::now() + SYNC;
    loop {
        let want = source(sim);
        let all: Vec<_> = shards.iter().flat_map(cached).collect();
        let union: BTreeSet<_> = all.iter().cloned().collect();
        if union == want && all.len() == want.len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the shards hold {} objects ({} distinct), the server {}",
            all.len(),
            union.len(),
            want.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn shards_cover_the_collection_exactly(server_side: bool) -> u64 {
    let (sim, client) = sim(server_side).await;
    for i in 0..60 {
        sim.handle()
            .create("configmaps", cm(&format!("cm-{i}"), 0))
            .unwrap();
    }
    let factories: Vec<SharedInformerFactory> = (0..SHARDS)
        .map(|_| SharedInformerFactory::new(client.clone()))
        .collect();
    let shards: Vec<SharedIndexInformer<ConfigMap>> = factories
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let shard = ShardSelector::uid_shard(u32::try_from(i).unwrap(), SHARDS);
            f.informer_with::<ConfigMap>(InformerOptions::default().shard(shard))
        })
        .collect();
    for f in &factories {
        f.start().unwrap();
        f.wait_for_cache_sync(SYNC).await.unwrap();
    }
    union_matches(&sim, &shards).await;
    assert!(
        shards.iter().all(|s| !s.indexer().is_empty()),
        "a shard is empty"
    );

    // Changes: creates, updates, deletes.
    for i in 60..90 {
        sim.handle()
            .create("configmaps", cm(&format!("cm-{i}"), 0))
            .unwrap();
    }
    for i in 0..30 {
        sim.handle()
            .update("configmaps", cm(&format!("cm-{i}"), 1))
            .unwrap();
    }
    for i in 30..50 {
        sim.handle()
            .delete("configmaps", "default", &format!("cm-{i}"))
            .unwrap();
    }
    union_matches(&sim, &shards).await;

    let metrics: Vec<_> = factories
        .iter()
        .zip(&shards)
        .map(|(f, s)| f.reflector_metrics_of(s).unwrap())
        .collect();
    // Each shard synced through its WatchList stream, objects of other
    // shards in it or not, and never fell back to a LIST.
    for m in &metrics {
        assert_eq!((m.watch_list_syncs, m.list_requests), (1, 0), "{m:?}");
    }
    let filtered = metrics.iter().map(|m| m.shard_filtered).sum();
    for f in &factories {
        f.shutdown().await;
    }
    filtered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_applied_by_the_server_cover_the_collection_exactly() {
    let filtered = shards_cover_the_collection_exactly(true).await;
    assert_eq!(
        filtered, 0,
        "the server applied the selector: nothing to filter here"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_filtered_on_this_side_cover_the_collection_exactly() {
    let filtered = shards_cover_the_collection_exactly(false).await;
    // A server without the gate sends every shard every object: the 60
    // listed and 30 created, 30 updates and 20 deletes, each left out by
    // the SHARDS - 1 shards it is not in.
    assert_eq!(
        filtered,
        u64::from(SHARDS - 1) * (60 + 30 + 30 + 20),
        "a server without the gate sends everything: the reflector filters"
    );
}

/// What a handler heard: adds, deletes, changes, resyncs.
#[derive(Default)]
struct Heard {
    adds: AtomicU64,
    deletes: AtomicU64,
    changes: AtomicU64,
    resyncs: AtomicU64,
}

impl Heard {
    fn get(&self) -> [u64; 4] {
        [&self.adds, &self.deletes, &self.changes, &self.resyncs].map(|c| c.load(Ordering::SeqCst))
    }
}

fn listen(informer: &SharedIndexInformer<ConfigMap>) -> Arc<Heard> {
    let heard = Arc::new(Heard::default());
    let (a, d, u) = (Arc::clone(&heard), Arc::clone(&heard), Arc::clone(&heard));
    informer
        .add_event_handler(
            EventHandlerFns::<ConfigMap>::new()
                .on_add(move |_, _| {
                    a.adds.fetch_add(1, Ordering::SeqCst);
                })
                .on_delete(move |_| {
                    d.deletes.fetch_add(1, Ordering::SeqCst);
                })
                .on_update(move |old, new| {
                    let same = old.metadata.resource_version == new.metadata.resource_version;
                    let c = if same { &u.resyncs } else { &u.changes };
                    c.fetch_add(1, Ordering::SeqCst);
                }),
        )
        .unwrap();
    heard
}

/// Waits until `f` holds.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + SYNC;
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_takes_over_a_dead_peers_shard_and_gives_it_back_without_a_restart() {
    for server_side in [true, false] {
        let (sim, client) = sim(server_side).await;
        for i in 0..60 {
            sim.handle()
                .create("configmaps", cm(&format!("cm-{i}"), 0))
                .unwrap();
        }
        let shard = |i| ShardSelector::uid_shard(i, SHARDS);
        let factories: Vec<SharedInformerFactory> = (0..SHARDS)
            .map(|_| SharedInformerFactory::new(client.clone()))
            .collect();
        let shards: Vec<SharedIndexInformer<ConfigMap>> = factories
            .iter()
            .zip(0..)
            .map(|(f, i)| f.informer_with::<ConfigMap>(InformerOptions::default().shard(shard(i))))
            .collect();
        let heard = listen(&shards[0]);
        for f in &factories {
            f.start().unwrap();
            f.wait_for_cache_sync(SYNC).await.unwrap();
        }
        union_matches(&sim, &shards).await;
        let own = shards[0].indexer().len() as u64;
        let dead = shards[2].indexer().len() as u64;
        eventually("the first sync heard", || heard.get() == [own, 0, 0, 0]).await;

        // Shard 2's replica dies; replica 0 takes its range over.
        factories[2].shutdown().await;
        let both = shard(0).union(&shard(2)).unwrap();
        assert_eq!(
            factories[0].reshard(&shards[0], Some(both.clone())),
            Some(true)
        );
        assert_eq!(
            factories[0].reshard(&shards[0], Some(both.clone())),
            Some(false)
        );
        assert_eq!(factories[0].shard_of(&shards[0]), Some(both));
        let living = &shards[..2];
        union_matches(&sim, living).await;
        // The taken-over objects are adds; the kept ones resyncs at most:
        // nothing was deleted or changed, and the cache was never cleared.
        eventually("the takeover heard as adds", || {
            heard.get()[0] == own + dead
        })
        .await;
        let [_, deletes, changes, _] = heard.get();
        assert_eq!((deletes, changes), (0, 0));

        // Changes in every range reach the living replicas.
        for i in 0..60 {
            sim.handle()
                .update("configmaps", cm(&format!("cm-{i}"), 1))
                .unwrap();
        }
        for i in 50..60 {
            sim.handle()
                .delete("configmaps", "default", &format!("cm-{i}"))
                .unwrap();
        }
        union_matches(&sim, living).await;

        // A new replica for shard 2 comes up; replica 0 gives the range back.
        let back = SharedInformerFactory::new(client.clone());
        let revived = back.informer_with::<ConfigMap>(InformerOptions::default().shard(shard(2)));
        back.start().unwrap();
        back.wait_for_cache_sync(SYNC).await.unwrap();
        let before = heard.get();
        assert_eq!(factories[0].reshard(&shards[0], Some(shard(0))), Some(true));
        let returned = revived.indexer().len() as u64;
        eventually("the range given back heard as deletes", || {
            heard.get()[1] == before[1] + returned
        })
        .await;
        union_matches(&sim, &[shards[0].clone(), shards[1].clone(), revived]).await;
        let m = factories[0].reflector_metrics_of(&shards[0]).unwrap();
        assert_eq!(m.reshards, 2, "{m:?}");
        for f in [&factories[0], &factories[1], &back] {
            f.shutdown().await;
        }
    }
}

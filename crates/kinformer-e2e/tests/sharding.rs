//! Sharded informers (KEP-5866's `shardSelector`), each scenario against
//! kinformer-sim (applying the selector, and ignoring it as a server
//! without the gate does) and against kube-apiserver (`cargo xtask e2e`'s
//! first run turns the ShardedListAndWatch gate on, its second leaves it
//! off):
//! - three informers of `ShardSelector::uid_shard(i, 3)` together cache
//!   exactly the collection (no object twice, none missing) through
//!   creates, updates and deletes; when the server ignores the selector
//!   the reflectors filter, and say so in their metrics;
//! - a replica takes over a dead peer's shard while it runs
//!   (`SharedInformerFactory::reshard`), then gives it back to a new one.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::{
    EventHandlerFns, InformerOptions, ShardSelector, SharedIndexInformer, SharedInformerFactory,
};
use kinformer_e2e::{real_client, sharded_list_and_watch_enabled, sim_client, unique};
use kinformer_sim::{RunningSim, Sim};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

const SHARDS: u32 = 3;
const WITHIN: Duration = Duration::from_secs(30);

/// The ConfigMaps of one test: a label of their own in `default`.
struct Group {
    api: Api<ConfigMap>,
    label: String,
    client: kube::Client,
    /// Whether the server applies the selector.
    server_side: bool,
    /// Whether the filtered counts are exact (no relist can happen).
    exact: bool,
}

impl Group {
    fn new(client: kube::Client, server_side: bool, exact: bool) -> Self {
        Self {
            api: Api::namespaced(client.clone(), "default"),
            label: unique("shards"),
            client,
            server_side,
            exact,
        }
    }

    fn name(&self, i: u32) -> String {
        format!("{}-{i}", self.label)
    }

    async fn create(&self, range: std::ops::Range<u32>) {
        for i in range {
            let cm: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": self.name(i), "labels": {"group": self.label}},
                "data": {"v": "0"}
            }))
            .unwrap();
            self.api.create(&PostParams::default(), &cm).await.unwrap();
        }
    }

    async fn update(&self, range: std::ops::Range<u32>) {
        for i in range {
            let mut c = self.api.get(&self.name(i)).await.unwrap();
            c.data = Some([("v".to_string(), "1".to_string())].into());
            self.api
                .replace(&self.name(i), &PostParams::default(), &c)
                .await
                .unwrap();
        }
    }

    async fn delete(&self, range: std::ops::Range<u32>) {
        for i in range {
            self.api
                .delete(&self.name(i), &DeleteParams::default())
                .await
                .unwrap();
        }
    }

    /// The server's ConfigMaps of the group: (name, resourceVersion).
    async fn source(&self) -> BTreeSet<(String, String)> {
        self.api
            .list(&ListParams::default().labels(&format!("group={}", self.label)))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|c| {
                (
                    c.metadata.name.unwrap(),
                    c.metadata.resource_version.unwrap(),
                )
            })
            .collect()
    }

    /// A factory (not started) with the group's informer of shard `i`.
    fn shard(&self, i: u32) -> (SharedInformerFactory, SharedIndexInformer<ConfigMap>) {
        let f = SharedInformerFactory::new(self.client.clone());
        let informer = f.informer_with::<ConfigMap>(
            InformerOptions::default()
                .namespace("default")
                .labels(format!("group={}", self.label))
                .shard(ShardSelector::uid_shard(i, SHARDS)),
        );
        (f, informer)
    }

    /// Waits until the shards' union equals the source, no object twice.
    async fn union_matches(&self, shards: &[&SharedIndexInformer<ConfigMap>]) {
        let deadline = Instant::now() + WITHIN;
        loop {
            let want = self.source().await;
            let all: Vec<_> = shards.iter().flat_map(|s| cached(s)).collect();
            let union: BTreeSet<_> = all.iter().cloned().collect();
            if union == want && all.len() == want.len() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the shards hold {} objects ({} distinct), the server {}; {}",
                all.len(),
                union.len(),
                want.len(),
                kinformer_e2e::log_hint()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
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

async fn sim(server_side: bool) -> (RunningSim, Group) {
    let (sim, client) = sim_client(Sim::builder().sharded_list_and_watch(server_side))
        .await
        .unwrap();
    (sim, Group::new(client, server_side, true))
}

async fn real() -> Group {
    let client = real_client(false).await.unwrap();
    Group::new(client, sharded_list_and_watch_enabled(), false)
}

async fn shards_cover_the_collection_exactly(g: Group) {
    g.create(0..60).await;
    let mut factories = Vec::new();
    let mut shards = Vec::new();
    for i in 0..SHARDS {
        let (f, s) = g.shard(i);
        f.start().unwrap();
        f.wait_for_cache_sync(WITHIN).await.unwrap();
        factories.push(f);
        shards.push(s);
    }
    let all: Vec<_> = shards.iter().collect();
    g.union_matches(&all).await;
    assert!(
        shards.iter().all(|s| !s.indexer().is_empty()),
        "a shard is empty"
    );

    g.create(60..90).await;
    g.update(0..30).await;
    g.delete(30..50).await;
    g.union_matches(&all).await;

    let metrics: Vec<_> = factories
        .iter()
        .zip(&shards)
        .map(|(f, s)| f.reflector_metrics_of(s).unwrap())
        .collect();
    if g.exact {
        // Each shard synced once through its WatchList stream, objects of
        // other shards in it or not, and never fell back to a LIST.
        for m in &metrics {
            assert_eq!((m.watch_list_syncs, m.list_requests), (1, 0), "{m:?}");
        }
    }
    let filtered: u64 = metrics.iter().map(|m| m.shard_filtered).sum();
    if g.server_side {
        assert_eq!(filtered, 0, "the server applied the selector");
    } else {
        // The server sends every shard every object: the 60 listed and 30
        // created, 30 updates and 20 deletes, each left out by the shards
        // it is not in (more than once only after a relist).
        let once = u64::from(SHARDS - 1) * (60 + 30 + 30 + 20);
        if g.exact {
            assert_eq!(filtered, once);
        } else {
            assert!(filtered >= once, "{filtered} filtered");
        }
    }
    for f in &factories {
        f.shutdown().await;
    }
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
    let deadline = Instant::now() + WITHIN;
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_replica_takes_over_a_dead_peers_shard_and_gives_it_back(g: Group) {
    g.create(0..60).await;
    let shard = |i| ShardSelector::uid_shard(i, SHARDS);
    let mut factories = Vec::new();
    let mut shards = Vec::new();
    for i in 0..SHARDS {
        let (f, s) = g.shard(i);
        factories.push(f);
        shards.push(s);
    }
    let heard = listen(&shards[0]);
    for f in &factories {
        f.start().unwrap();
        f.wait_for_cache_sync(WITHIN).await.unwrap();
    }
    g.union_matches(&shards.iter().collect::<Vec<_>>()).await;
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
    let living = [&shards[0], &shards[1]];
    g.union_matches(&living).await;
    // The taken-over objects are adds; the kept ones resyncs at most:
    // nothing was deleted or changed, and the cache was never cleared.
    eventually("the takeover heard as adds", || {
        heard.get()[0] == own + dead
    })
    .await;
    let [_, deletes, changes, _] = heard.get();
    assert_eq!((deletes, changes), (0, 0));

    // Changes in every range reach the living replicas.
    g.update(0..60).await;
    g.delete(50..60).await;
    g.union_matches(&living).await;

    // A new replica for shard 2 comes up; replica 0 gives the range back.
    let (back, revived) = g.shard(2);
    back.start().unwrap();
    back.wait_for_cache_sync(WITHIN).await.unwrap();
    let before = heard.get();
    assert_eq!(factories[0].reshard(&shards[0], Some(shard(0))), Some(true));
    let returned = revived.indexer().len() as u64;
    eventually("the range given back heard as deletes", || {
        heard.get()[1] == before[1] + returned
    })
    .await;
    g.union_matches(&[&shards[0], &shards[1], &revived]).await;
    let m = factories[0].reflector_metrics_of(&shards[0]).unwrap();
    assert_eq!(m.reshards, 2, "{m:?}");
    for f in [&factories[0], &factories[1], &back] {
        f.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_shards_applied_by_the_server_cover_the_collection_exactly() {
    let (_sim, g) = sim(true).await;
    shards_cover_the_collection_exactly(g).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_shards_filtered_on_this_side_cover_the_collection_exactly() {
    let (_sim, g) = sim(false).await;
    shards_cover_the_collection_exactly(g).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_a_replica_takes_over_a_dead_peers_shard_and_gives_it_back() {
    for server_side in [true, false] {
        let (_sim, g) = sim(server_side).await;
        a_replica_takes_over_a_dead_peers_shard_and_gives_it_back(g).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn real_shards_cover_the_collection_exactly() {
    shards_cover_the_collection_exactly(real().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn real_a_replica_takes_over_a_dead_peers_shard_and_gives_it_back() {
    a_replica_takes_over_a_dead_peers_shard_and_gives_it_back(real().await).await;
}

//! Per-shard leases (`kinformer::controller::ShardLeases`), against
//! kinformer-sim and against the real kube-apiserver: three replicas share
//! six shards evenly, each replica's informer resharded to the shards it
//! holds; a crashed replica's shards move to the living within the lease
//! duration + 2 s, a new replica takes its share, a replica that shuts
//! down hands its shards over at once; no shard is ever held by two
//! replicas, and the replicas' caches together equal the source.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::controller::{LeaseTiming, ShardLeases};
use kinformer::{
    CancellationToken, InformerOptions, ShardSelector, SharedIndexInformer, SharedInformerFactory,
};
use kinformer_e2e::{real_client, sim_client, unique};
use kinformer_sim::Sim;
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

const SHARDS: u32 = 6;
const LEASE: Duration = Duration::from_secs(2);
/// The failover target: a lease duration and 2 s.
const FAILOVER: Duration = Duration::from_secs(4);

fn timing() -> LeaseTiming {
    LeaseTiming::default()
        .lease_duration(LEASE)
        .renew_deadline(Duration::from_millis(1500))
        .retry_period(Duration::from_millis(200))
}

/// Which replicas hold each shard now, as their `owned` watches say.
#[derive(Default)]
struct Holders {
    by_shard: Mutex<BTreeMap<u32, BTreeSet<String>>>,
    most_at_once: Mutex<usize>,
}

impl Holders {
    fn set(&self, who: &str, owned: &BTreeSet<u32>) {
        let mut by = self.by_shard.lock();
        for shard in 0..SHARDS {
            let holders = by.entry(shard).or_default();
            if owned.contains(&shard) {
                holders.insert(who.to_owned());
            } else {
                holders.remove(who);
            }
            let mut most = self.most_at_once.lock();
            *most = (*most).max(holders.len());
        }
    }

    fn shares(&self) -> BTreeMap<String, usize> {
        let mut shares = BTreeMap::new();
        for holders in self.by_shard.lock().values() {
            for h in holders {
                *shares.entry(h.clone()).or_default() += 1;
            }
        }
        shares
    }

    /// Every shard held by exactly one of `replicas`, `per` each.
    fn balanced(&self, replicas: &[&str], per: usize) -> bool {
        let by = self.by_shard.lock();
        let all_held = (0..SHARDS).all(|s| {
            by.get(&s)
                .is_some_and(|h| h.len() == 1 && replicas.iter().any(|r| h.contains(*r)))
        });
        drop(by);
        all_held && replicas.iter().all(|r| self.shares().get(*r) == Some(&per))
    }
}

/// One replica: its leases, and an informer of the group's ConfigMaps
/// resharded to the shards it holds.
struct Replica {
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    factory: SharedInformerFactory,
    informer: SharedIndexInformer<ConfigMap>,
}

async fn replica(client: &kube::Client, group: &str, who: &str, holders: &Arc<Holders>) -> Replica {
    let leases = ShardLeases::new(client.clone(), "default", group, who, SHARDS).timing(timing());
    let mut owned = leases.owned();
    let factory = SharedInformerFactory::new(client.clone());
    // Until it holds a shard, the informer waits on one it may never get.
    let informer = factory.informer_with::<ConfigMap>(
        InformerOptions::default()
            .namespace("default")
            .labels(format!("group={group}"))
            .shard(ShardSelector::uid_shard(0, SHARDS)),
    );
    factory.start().unwrap();
    let shutdown = CancellationToken::new();
    let (token, f, i, h, who) = (
        shutdown.clone(),
        factory.clone(),
        informer.clone(),
        Arc::clone(holders),
        who.to_owned(),
    );
    let task = tokio::spawn(async move {
        let follow = async {
            loop {
                let now = owned.borrow_and_update().clone();
                h.set(&who, &now);
                if let Some(s) = ShardLeases::selector(&now, SHARDS) {
                    f.reshard(&i, Some(s));
                }
                tokio::select! {
                    () = token.cancelled() => return,
                    changed = owned.changed() => if changed.is_err() { return },
                }
            }
        };
        tokio::join!(leases.run(token.clone()), follow);
        h.set(&who, &BTreeSet::new());
    });
    Replica {
        shutdown,
        task,
        factory,
        informer,
    }
}

async fn until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

/// The names the replicas' informers cache, once each holds its shards.
fn cached(replicas: &[&Replica]) -> Vec<String> {
    replicas
        .iter()
        .flat_map(|r| r.informer.indexer().list())
        .map(|c| c.metadata.name.clone().unwrap())
        .collect()
}

async fn replicas_share_shards_and_take_over_a_crashed_ones(client: kube::Client) {
    let group = unique("grp");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut names = BTreeSet::new();
    for i in 0..60 {
        let name = format!("{group}-{i}");
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"group": group}}
        }))
        .unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
        names.insert(name);
    }
    let caches_equal_source = |rs: &[&Replica]| {
        let all = cached(rs);
        all.len() == names.len() && all.iter().cloned().collect::<BTreeSet<_>>() == names
    };

    let holders = Arc::new(Holders::default());
    let a = replica(&client, &group, "a", &holders).await;
    let b = replica(&client, &group, "b", &holders).await;
    let c = replica(&client, &group, "c", &holders).await;
    until("two shards each", Duration::from_secs(15), || {
        holders.balanced(&["a", "b", "c"], 2)
    })
    .await;
    until("caches of the shards held", Duration::from_secs(15), || {
        caches_equal_source(&[&a, &b, &c])
    })
    .await;

    // Crash: b's task is aborted, its leases left to expire.
    b.task.abort();
    let _ = b.task.await;
    b.factory.shutdown().await;
    holders.set("b", &BTreeSet::new());
    let failover = until("the crashed replica's shards taken over", FAILOVER, || {
        holders.balanced(&["a", "c"], 3)
    })
    .await;
    println!("failover after a crash: {failover:?} (lease {LEASE:?})");
    until("caches after the takeover", Duration::from_secs(15), || {
        caches_equal_source(&[&a, &c])
    })
    .await;

    // A new replica takes its share.
    let d = replica(&client, &group, "d", &holders).await;
    until(
        "a share for the new replica",
        Duration::from_secs(15),
        || holders.balanced(&["a", "c", "d"], 2),
    )
    .await;
    until(
        "caches after the rebalance",
        Duration::from_secs(15),
        || caches_equal_source(&[&a, &c, &d]),
    )
    .await;

    // A graceful shutdown hands the shards over well within a lease.
    a.shutdown.cancel();
    a.task.await.unwrap();
    a.factory.shutdown().await;
    let handover = until("the shards of a replica that shut down", FAILOVER, || {
        holders.balanced(&["c", "d"], 3)
    })
    .await;
    println!("handover after a shutdown: {handover:?}");
    assert!(handover < LEASE, "took {handover:?} after a release");
    until("caches after the handover", Duration::from_secs(15), || {
        caches_equal_source(&[&c, &d])
    })
    .await;

    assert_eq!(
        *holders.most_at_once.lock(),
        1,
        "a shard held by two replicas at once"
    );
    for r in [c, d] {
        r.shutdown.cancel();
        r.task.await.unwrap();
        r.factory.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_replicas_share_shards_and_take_over_a_crashed_ones() {
    let (_sim, client) = sim_client(Sim::builder()).await.unwrap();
    replicas_share_shards_and_take_over_a_crashed_ones(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn real_replicas_share_shards_and_take_over_a_crashed_ones() {
    let client = real_client(false).await.unwrap();
    replicas_share_shards_and_take_over_a_crashed_ones(client).await;
}

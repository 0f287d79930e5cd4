//! Sharded informers (KEP-5866) against kube-apiserver: three informers of
//! `ShardSelector::uid_shard(i, 3)` together cache exactly the collection
//! (no object twice, none missing) through creates, updates and deletes.
//! With the ShardedListAndWatch gate on (`cargo xtask e2e`'s first run) the
//! server applies the selector and nothing is filtered on this side; with
//! it off (the second run) the server sends everything and the reflectors
//! filter, with the same result.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer::{InformerOptions, ShardSelector, SharedIndexInformer, SharedInformerFactory};
use kinformer_e2e::{real_client, sharded_list_and_watch_enabled, unique};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

const SHARDS: u32 = 3;
const WITHIN: Duration = Duration::from_secs(30);

fn cm(name: &str, label: &str, v: u32) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"group": label}},
        "data": {"v": v.to_string()}
    }))
    .unwrap()
}

/// The server's ConfigMaps of the group: (name, resourceVersion).
async fn source(api: &Api<ConfigMap>, label: &str) -> BTreeSet<(String, String)> {
    api.list(&ListParams::default().labels(&format!("group={label}")))
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

async fn union_matches(
    api: &Api<ConfigMap>,
    label: &str,
    shards: &[SharedIndexInformer<ConfigMap>],
) {
    let deadline = Instant::now() + WITHIN;
    loop {
        let want = source(api, label).await;
        let all: Vec<_> = shards.iter().flat_map(cached).collect();
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
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn real_shards_cover_the_collection_exactly() {
    let client = real_client(false).await.unwrap();
    let label = unique("shards");
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    for i in 0..60 {
        api.create(&pp, &cm(&format!("{label}-{i}"), &label, 0))
            .await
            .unwrap();
    }
    let factories: Vec<SharedInformerFactory> = (0..SHARDS)
        .map(|_| SharedInformerFactory::new(client.clone()))
        .collect();
    let shards: Vec<SharedIndexInformer<ConfigMap>> = factories
        .iter()
        .zip(0..)
        .map(|(f, i)| {
            f.informer_with::<ConfigMap>(
                InformerOptions::default()
                    .namespace("default")
                    .labels(format!("group={label}"))
                    .shard(ShardSelector::uid_shard(i, SHARDS)),
            )
        })
        .collect();
    for f in &factories {
        f.start().unwrap();
        f.wait_for_cache_sync(WITHIN).await.unwrap();
    }
    union_matches(&api, &label, &shards).await;
    assert!(
        shards.iter().all(|s| !s.indexer().is_empty()),
        "a shard is empty"
    );

    for i in 60..90 {
        api.create(&pp, &cm(&format!("{label}-{i}"), &label, 0))
            .await
            .unwrap();
    }
    for i in 0..30 {
        let name = format!("{label}-{i}");
        let mut c = api.get(&name).await.unwrap();
        c.data = Some([("v".to_string(), "1".to_string())].into());
        api.replace(&name, &pp, &c).await.unwrap();
    }
    for i in 30..50 {
        api.delete(&format!("{label}-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    union_matches(&api, &label, &shards).await;

    let filtered: u64 = factories
        .iter()
        .zip(&shards)
        .map(|(f, s)| f.reflector_metrics_of(s).unwrap().shard_filtered)
        .sum();
    if sharded_list_and_watch_enabled() {
        assert_eq!(filtered, 0, "the server applied the selector");
    } else {
        // The label selector still applies: each of the group's 90 objects
        // (and 30 updates, 20 deletes) reaches the two shards it is not in,
        // once each, or more after a relist.
        assert!(
            filtered >= u64::from(SHARDS - 1) * (60 + 30 + 30 + 20),
            "{filtered} filtered"
        );
    }
    for f in &factories {
        f.shutdown().await;
    }
}

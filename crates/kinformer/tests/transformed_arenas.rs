//! With the object arenas as the process's allocator, an informer whose
//! transform drops much of each object (`strip_managed_fields`) holds the
//! arena memory of what it keeps, not of what was decoded, and replacing
//! its objects many times over does not grow it. Its own binary: the arenas
//! are this process's global allocator, and only this test takes chunks.

#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::alloc::ObjectArenas;
use kinformer::{ReflectorConfig, SharedIndexInformer, SharedInformerFactory};
use kinformer_alloc::region::REGION;
use kinformer_sim::{RunningSim, Sim};
use kube::Client;
use kube_core::Resource;

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

const PODS: u64 = 2_000;
const ROUNDS: u64 = 3;
const SYNC: Duration = Duration::from_secs(30);

/// Bytes of the arena chunks in use (cut, and not free for reuse).
fn chunk_bytes_held() -> usize {
    let s = REGION.stats();
    s.cut_bytes - s.free_bytes
}

async fn filled_sim() -> (RunningSim, Client) {
    let sim = Sim::builder()
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    for i in 0..PODS {
        let pod = kinformer_sim::template::pod("ns-1", &format!("web-{i}"), i);
        sim.handle().create("pods", pod).unwrap();
    }
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    (sim, Client::try_from(cfg).unwrap())
}

/// Updates every pod `ROUNDS` times; returns the last resourceVersion.
fn churn(sim: &RunningSim) -> String {
    let mut last = String::new();
    for round in 1..=ROUNDS {
        for i in 0..PODS {
            let pod = kinformer_sim::template::pod("ns-1", &format!("web-{i}"), i + round * PODS);
            let stored = sim.handle().update("pods", pod).unwrap();
            last = stored.meta.rv.to_string();
        }
    }
    last
}

async fn eventually_at<K: Resource + Send + Sync + 'static>(
    informer: &SharedIndexInformer<K>,
    rv: &str,
) {
    let deadline = tokio::time::Instant::now() + SYNC;
    let name = format!("web-{}", PODS - 1);
    loop {
        let seen = informer
            .indexer()
            .get(&format!("ns-1/{name}"))
            .and_then(|o| o.meta().resource_version.clone());
        if seen.as_deref() == Some(rv) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not at {rv}: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `factory`, syncs `informer` and churns `sim`: the chunk bytes
/// held after the sync and after the churn.
async fn sync_then_churn<K: Resource + Send + Sync + 'static>(
    factory: &SharedInformerFactory,
    informer: &SharedIndexInformer<K>,
    sim: &RunningSim,
) -> (usize, usize) {
    factory.start().unwrap();
    factory.wait_for_cache_sync(SYNC).await.unwrap();
    let synced = chunk_bytes_held();
    let o = informer.indexer().get("ns-1/web-0").unwrap();
    assert!(o.meta().managed_fields.is_none());
    eventually_at(informer, &churn(sim)).await;
    (synced, chunk_bytes_held())
}

/// Chunk bytes per cached object after the sync, and their growth per
/// object over the churn, for an informer of Pods (typed, or
/// metadata-only) that drops `managedFields`: after the decode, by the
/// `strip_managed_fields` transform, or during it (`skip_managed_fields`,
/// the reference: the decode never allocates them).
async fn held_per_object(metadata_only: bool, strip: bool) -> (usize, isize) {
    let (sim, client) = filled_sim().await;
    let config = ReflectorConfig::default()
        .watch_list(false)
        .skip_managed_fields(!strip);
    let mut builder = SharedInformerFactory::builder(client).reflector_config(config);
    if strip {
        builder = builder.transform_meta(kinformer::strip_managed_fields);
    }
    let factory = builder.build();
    let before = chunk_bytes_held();
    let (synced, churned) = if metadata_only {
        let informer = factory.metadata_informer::<Pod>();
        sync_then_churn(&factory, &informer, &sim).await
    } else {
        let informer = factory.informer::<Pod>();
        sync_then_churn(&factory, &informer, &sim).await
    };
    factory.shutdown().await;
    let n = PODS as usize;
    let per_object = (synced - before) / n;
    let growth = (churned as isize - synced as isize) / n as isize;
    (per_object, growth)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stripping_transform_keeps_the_arena_memory_of_what_it_keeps() {
    for metadata_only in [true, false] {
        let (skipped, skipped_growth) = held_per_object(metadata_only, false).await;
        let (stripped, stripped_growth) = held_per_object(metadata_only, true).await;
        eprintln!(
            "metadata_only={metadata_only}: chunk bytes per object {stripped} stripped, \
             {skipped} skipped; growth per object over {ROUNDS} rounds of updates \
             {stripped_growth} and {skipped_growth}"
        );
        // Decoded with managedFields and stripped after, an object holds
        // about what one decoded without them holds (before the copy into
        // a chunk of its size: 11x for metadata-only, 1.8x for typed Pods).
        assert!(
            stripped * 4 <= skipped * 5,
            "metadata_only={metadata_only}: {stripped} against {skipped} bytes"
        );
        for growth in [stripped_growth, skipped_growth] {
            assert!(
                growth.unsigned_abs() * 20 <= skipped,
                "metadata_only={metadata_only}: {growth} bytes per object more after the updates"
            );
        }
    }
}

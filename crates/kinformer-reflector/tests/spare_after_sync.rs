//! A completed list has the reflector's decode pool make spare object-arena
//! chunks ready (its own binary: the arenas are this process's global
//! allocator, and no other test takes or frees chunks meanwhile).
#![allow(clippy::unwrap_used)]

mod common;

use std::alloc::System;
use std::sync::Arc;

use common::*;
use kinformer_alloc::ObjectArenas;
use kinformer_alloc::region::REGION;
use kinformer_reflector::DecodePool;
use serde_json::Value;

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_list_leaves_spare_chunks_for_the_updates_after_it() {
    let pods: Vec<Value> = (0..2000).map(|i| pod(&format!("p-{i}"), 5)).collect();
    let script = Arc::new(Script::default());
    script
        .list(Reply::Json(list(10, pods, None)))
        .watch(Reply::lines_then_hang(vec![]));
    let addr = fake_server(script.clone()).await;
    let before = REGION.stats();
    let pool = DecodePool::new(2, "spare-sync").unwrap();
    let h = Harness::start_pooled(client(addr), fast(false), pool);
    eventually("synced", || h.informer.has_synced()).await;
    assert_eq!(h.cache().len(), 2000);
    // Ten spare chunks per thousand cut: 1% of the bytes the sync cut, less
    // what rounds down in classes of fewer than a hundred chunks.
    eventually("spare chunks", || {
        let now = REGION.stats();
        let cut = now.cut_bytes - before.cut_bytes;
        let spare = now.free_bytes.saturating_sub(before.free_bytes);
        spare * 1000 >= cut * 8
    })
    .await;
    h.stop().await;
}

//! A pods-by-node controller: an index of Pods by `spec.nodeName`, and a
//! handler that reports how many Pods each node runs whenever one changes.
//!
//! `cargo run -p kinformer-examples --example pods_by_node` (needs a cluster).

use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::{DeletedObject, EventHandlerFns, FactoryBuilder, IndexFn};

const BY_NODE: &str = "by-node";

fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kinformer_examples::init_tracing();
    let factory = FactoryBuilder::from_config(kube::Config::infer().await?)?
        .drop_managed_fields()
        .build();
    let pods = factory.informer::<Pod>();
    pods.add_indexers(vec![(
        BY_NODE.to_string(),
        // The digest of the node name lets an update that keeps it skip
        // reading the replaced Pod (cold in a large cache).
        IndexFn::new(|p: &Pod| node_of(p).into_iter().collect()).with_digest(|p: &Pod, mut h| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .hash(&mut h)
        }),
    )])?;

    let indexer = pods.indexer();
    let report = move |node: Option<String>| {
        if let Some(node) = node {
            let n = indexer.index_keys(BY_NODE, &node).map_or(0, |k| k.len());
            tracing::info!(%node, pods = n, "node changed");
        }
    };
    let (on_add, on_update, on_delete) = (report.clone(), report.clone(), report);
    pods.add_event_handler(
        EventHandlerFns::new()
            .on_add(move |p: &Arc<Pod>, initial| {
                if !initial {
                    on_add(node_of(p));
                }
            })
            .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
                if node_of(old) != node_of(new) {
                    on_update(node_of(old));
                    on_update(node_of(new));
                }
            })
            .on_delete(move |p: &DeletedObject<Pod>| on_delete(node_of(p.object()))),
    )?;

    factory.start()?;
    factory
        .wait_for_cache_sync(Duration::from_secs(120))
        .await?;
    for node in pods.indexer().index_values(BY_NODE)? {
        let n = pods.indexer().index_keys(BY_NODE, &node)?.len();
        println!("{node}: {n} pods");
    }
    tokio::signal::ctrl_c().await?;
    factory.shutdown().await;
    Ok(())
}

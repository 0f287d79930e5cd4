//! One factory shared by two controllers: both ask for the Pod informer and
//! get the same one (one watch, one cache), each with its own handler and
//! resync period.
//!
//! `cargo run -p kinformer-examples --example shared_factory` (needs a cluster).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kinformer::{EventHandlerFns, InformerError, Lister, SharedInformerFactory};

/// Counts Pods that are not running.
fn pending_pods_controller(
    factory: &SharedInformerFactory,
) -> Result<Arc<AtomicU64>, InformerError> {
    let pending = Arc::new(AtomicU64::new(0));
    let seen = pending.clone();
    factory.informer::<Pod>().add_event_handler_with_resync(
        EventHandlerFns::new().on_update(move |_, p: &Arc<Pod>| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            if phase == Some("Pending") {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        }),
        Some(Duration::from_secs(30)),
    )?;
    Ok(pending)
}

/// Logs Pods that mount a ConfigMap which does not exist.
fn config_controller(factory: &SharedInformerFactory) -> Result<(), InformerError> {
    let configmaps = Lister::new(factory.informer::<ConfigMap>().indexer());
    factory
        .informer::<Pod>()
        .add_event_handler(EventHandlerFns::new().on_add(move |p: &Arc<Pod>, _| {
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        let volumes = p.spec.iter().flat_map(|s| s.volumes.iter().flatten());
        for cm in volumes.filter_map(|v| v.config_map.as_ref()) {
            if configmaps.get(ns, &cm.name).is_none() {
                tracing::warn!(pod = ?p.metadata.name, configmap = %cm.name, "missing configmap");
            }
        }
    }))?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kinformer_examples::init_tracing();
    let factory = SharedInformerFactory::try_default().await?;
    let pending = pending_pods_controller(&factory)?;
    config_controller(&factory)?;
    println!("informers: {:?}", factory.informer_names()); // pods and configmaps, once each
    factory.start()?;
    factory
        .wait_for_cache_sync(Duration::from_secs(120))
        .await?;
    tokio::time::sleep(Duration::from_secs(60)).await;
    println!(
        "pending pod updates seen: {}",
        pending.load(Ordering::Relaxed)
    );
    factory.shutdown().await;
    Ok(())
}

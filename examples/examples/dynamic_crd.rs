//! A dynamic informer for a CRD found through discovery, without Rust types:
//! `cargo run -p kinformer-examples --example dynamic_crd -- GROUP KIND`
//! (e.g. `cert-manager.io Certificate`; needs a cluster).

use std::sync::Arc;
use std::time::Duration;

use kinformer::{EventHandlerFns, SharedInformerFactory};
use kube::core::DynamicObject;
use kube::discovery::Discovery;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kinformer_examples::init_tracing();
    let mut args = std::env::args().skip(1);
    let group = args.next().unwrap_or_else(|| "apiextensions.k8s.io".into());
    let kind = args
        .next()
        .unwrap_or_else(|| "CustomResourceDefinition".into());
    let client = kube::Client::try_default().await?;
    let discovery = Discovery::new(client.clone())
        .filter(&[group.as_str()])
        .run()
        .await?;
    let (resource, _caps) = discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .find(|(r, _)| r.kind == kind)
        .ok_or_else(|| anyhow::anyhow!("{kind} not found in group {group}"))?;

    let factory = SharedInformerFactory::new(client);
    let informer = factory.dynamic_informer(&resource);
    informer.add_event_handler(
        EventHandlerFns::new()
            .on_add(|o: &Arc<DynamicObject>, _| println!("added {:?}", o.metadata.name))
            .on_update(|_, o: &Arc<DynamicObject>| println!("updated {:?}", o.metadata.name))
            .on_delete(|o| println!("deleted {:?}", o.object().metadata.name)),
    )?;
    factory.start()?;
    factory.wait_for_cache_sync(Duration::from_secs(60)).await?;
    println!("{} {kind} objects cached", informer.indexer().len());
    tokio::signal::ctrl_c().await?;
    factory.shutdown().await;
    Ok(())
}

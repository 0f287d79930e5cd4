//! A metadata-only informer over all Pods: the server sends
//! `PartialObjectMetadata`, and managedFields are dropped before caching,
//! the documented way to hold a very large number of objects. Its watches
//! go on connections of their own, read without hyper's client
//! (`DirectWatch`), when the configuration allows it.
//!
//! `cargo run -p kinformer-examples --example metadata_pods` (needs a cluster).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kinformer::{FactoryBuilder, Lister};
use kube_selector::web_selector;

mod kube_selector {
    use kube::core::{Expression, Selector};

    /// `app=web`.
    pub fn web_selector() -> Selector {
        Expression::Equal("app".into(), "web".into()).into()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kinformer_examples::init_tracing();
    let factory = FactoryBuilder::from_config(kube::Config::infer().await?)?
        .drop_managed_fields()
        .build();
    let pods = factory.metadata_informer::<Pod>();
    let started = Instant::now();
    factory.start()?;
    factory
        .wait_for_cache_sync(Duration::from_secs(300))
        .await?;
    let lister = Lister::new(pods.indexer());
    println!(
        "{} pods (metadata only) synced in {:?}; {} labelled app=web; {} in kube-system",
        lister.list_all().len(),
        started.elapsed(),
        lister.list(&web_selector()).len(),
        lister.namespaced("kube-system").list_all().len(),
    );
    for (name, m) in factory.reflector_metrics() {
        println!("{name}: {m:?}");
    }
    factory.shutdown().await;
    Ok(())
}

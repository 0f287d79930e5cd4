//! A controller on the current kubeconfig context: every Namespace labelled
//! `kinformer.example/settings=enabled` gets a `settings` ConfigMap (see
//! `kinformer_examples::namespace_settings`). Stops on Ctrl-C, finishing
//! the reconciles in flight.
//!
//! ```text
//! cargo run -p kinformer-examples --example namespace_settings
//! kubectl label namespace default kinformer.example/settings=enabled
//! ```

use std::time::Duration;

use kinformer::SharedInformerFactory;
use kinformer_examples::namespace_settings::SettingsController;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kinformer_examples::init_tracing();
    let client = kube::Client::try_default().await?;
    let factory = SharedInformerFactory::new(client.clone());
    let controller = SettingsController::new(&factory, client)?;
    let handle = controller.handle();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        handle.shutdown();
    });
    factory.start()?;
    factory.wait_for_cache_sync(Duration::from_secs(60)).await?;
    let stats = controller.run().await?;
    tracing::info!(?stats, "controller stopped");
    factory.shutdown().await;
    Ok(())
}

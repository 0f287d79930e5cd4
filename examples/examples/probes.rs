//! A Pod informer with the endpoints its orchestrator probes: `/metrics`
//! (Prometheus), `/readyz` (synced and watching) and `/livez` (no
//! reflector stopped), on 127.0.0.1:9090 (or `PROBES_ADDR`).
//!
//! `cargo run -p kinformer-examples --example probes` (needs a cluster),
//! then `curl 127.0.0.1:9090/metrics`.

use k8s_openapi::api::core::v1::Pod;
use kinformer::FactoryBuilder;
use kinformer::metrics::prometheus_client::registry::Registry;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    kinformer_examples::init_tracing();
    let factory = FactoryBuilder::from_config(kube::Config::infer().await?)?
        .drop_managed_fields()
        .build();
    let _pods = factory.informer::<Pod>();
    factory.start()?;
    let addr = std::env::var("PROBES_ADDR").unwrap_or_else(|_| "127.0.0.1:9090".into());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    tracing::info!(%addr, "serving /metrics, /readyz and /livez");
    let app = kinformer_examples::probes::router(factory.clone(), Registry::default());
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    factory.shutdown().await;
    Ok(())
}

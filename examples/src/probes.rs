//! The HTTP endpoints a controller built on kinformer serves for its
//! orchestrator: `/metrics` (Prometheus, OpenMetrics text), `/readyz` and
//! `/livez` (see `kinformer::health`).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kinformer::SharedInformerFactory;
use kinformer::health::Probe;
use kinformer::metrics::prometheus_client::registry::Registry;

/// What the handlers read.
struct Shared {
    factory: SharedInformerFactory,
    registry: Registry,
}

/// A router serving `/metrics`, `/readyz` and `/livez` for `factory`; its
/// collector is registered in `registry` (which may hold the program's
/// own metrics too).
pub fn router(factory: SharedInformerFactory, mut registry: Registry) -> Router {
    factory.register_metrics(&mut registry);
    let shared = Arc::new(Shared { factory, registry });
    Router::new()
        .route("/metrics", get(metrics))
        .route("/readyz", get(readyz))
        .route("/livez", get(livez))
        .with_state(shared)
}

async fn metrics(State(shared): State<Arc<Shared>>) -> Response {
    let mut body = String::new();
    match kinformer::metrics::prometheus_client::encoding::text::encode(&mut body, &shared.registry)
    {
        Ok(()) => (
            [(header::CONTENT_TYPE, kinformer::metrics::CONTENT_TYPE)],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn answer(probe: Probe) -> Response {
    let status = StatusCode::from_u16(probe.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    (status, probe.body).into_response()
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    answer(shared.factory.health().readyz())
}

async fn livez(State(shared): State<Arc<Shared>>) -> Response {
    answer(shared.factory.health().livez())
}

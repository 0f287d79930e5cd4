//! The admin API under `/__sim/` (a path kube never uses): faults, stats, fill and churn.

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::{Deserialize, Serialize};

use crate::churn::{self, ChurnConfig};
use crate::faults::{FaultAction, FaultConfig, FaultSchedule};
use crate::state::SharedRef;
use crate::status::ApiError;

/// `GET /__sim/faults`.
pub async fn get_faults(State(shared): State<SharedRef>) -> Json<FaultConfig> {
    Json(shared.faults.config())
}

/// `PUT /__sim/faults` with a [`FaultConfig`].
pub async fn put_faults(
    State(shared): State<SharedRef>,
    Json(cfg): Json<FaultConfig>,
) -> Json<FaultConfig> {
    shared.faults.set_config(cfg);
    Json(shared.faults.config())
}

/// `PUT /__sim/faults/{schedule}` with a name from [`FaultSchedule::NAMES`].
pub async fn put_schedule(State(shared): State<SharedRef>, Path(name): Path<String>) -> Response {
    match FaultSchedule::by_name(&name) {
        Some(cfg) => {
            shared.faults.set_config(cfg);
            Json(shared.faults.config()).into_response()
        }
        None => ApiError::bad_request(format!(
            "unknown fault schedule {name:?}; known: {:?}",
            FaultSchedule::NAMES
        ))
        .into_response(),
    }
}

/// `POST /__sim/faults/actions` with a [`FaultAction`].
pub async fn post_action(
    State(shared): State<SharedRef>,
    Json(action): Json<FaultAction>,
) -> StatusCode {
    crate::server::apply_action(&shared, &action);
    StatusCode::NO_CONTENT
}

/// `GET /__sim/stats`.
pub async fn get_stats(State(shared): State<SharedRef>) -> Json<crate::stats::Stats> {
    Json(shared.stats())
}

/// Body of `POST /__sim/fill`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct FillRequest {
    /// Resource (plural or kind).
    pub kind: String,
    /// Objects to create.
    pub objects: usize,
    /// Namespaces to spread them over.
    pub namespaces: usize,
}

impl Default for FillRequest {
    fn default() -> Self {
        Self {
            kind: "pods".into(),
            objects: 1000,
            namespaces: 10,
        }
    }
}

/// Answer of `POST /__sim/fill`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FillResponse {
    /// Objects created.
    pub created: usize,
    /// The resourceVersion after the fill.
    pub resource_version: u64,
}

/// `POST /__sim/fill`: create objects from templates; answers when done.
pub async fn post_fill(State(shared): State<SharedRef>, Json(req): Json<FillRequest>) -> Response {
    let Some(res) = shared.store.registry().find_by_name(&req.kind) else {
        return ApiError::unknown_resource().into_response();
    };
    let s = shared.clone();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    match tokio::task::spawn_blocking(move || {
        churn::fill(&s, res, req.objects, req.namespaces, threads)
    })
    .await
    {
        Ok(created) => Json(FillResponse {
            created,
            resource_version: shared.store.current_rv(),
        })
        .into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

/// `POST /__sim/churn`: run a churn with a [`ChurnConfig`]; answers with its report when done.
pub async fn post_churn(State(shared): State<SharedRef>, Json(cfg): Json<ChurnConfig>) -> Response {
    let Some(res) = shared.store.registry().find_by_name(&cfg.kind) else {
        return ApiError::unknown_resource().into_response();
    };
    let task = match churn::start(shared.clone(), res, cfg) {
        Ok(t) => t,
        Err(e) => return ApiError::internal(e.to_string()).into_response(),
    };
    match tokio::task::spawn_blocking(move || task.join()).await {
        Ok(report) => Json(report).into_response(),
        Err(e) => ApiError::internal(e.to_string()).into_response(),
    }
}

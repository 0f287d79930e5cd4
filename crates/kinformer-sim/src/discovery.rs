//! Discovery (`/api`, `/api/v1`, `/apis`, `/apis/{g}`, `/apis/{g}/{v}`, aggregated v2), `/version`, health.

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::resource::ResourceDef;
use crate::state::SharedRef;
use crate::status::ApiError;

const VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

fn respond(v: Value, content_type: &'static str) -> Response {
    let body = serde_json::to_vec(&v).unwrap_or_default();
    let mut resp = (StatusCode::OK, body).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn resource_entry(d: &ResourceDef) -> Value {
    json!({"name": d.plural, "singularName": d.singular, "namespaced": d.namespaced, "kind": d.kind, "verbs": VERBS})
}

fn resource_list(defs: &[&ResourceDef], group_version: &str) -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
        "resources": defs.iter().map(|d| resource_entry(d)).collect::<Vec<_>>()})
}

fn api_group(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({"name": name, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(Value::Null)})
}

/// Aggregated discovery (apidiscovery.k8s.io/v2) of the core group or of all named groups.
fn aggregated(shared: &SharedRef, core: bool) -> Value {
    let reg = shared.store.registry();
    let groups: Vec<(String, Vec<String>)> = if core {
        vec![(String::new(), vec!["v1".to_string()])]
    } else {
        reg.groups()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|(g, versions)| {
            let vs: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = reg
                        .defs()
                        .iter()
                        .filter(|d| d.group == *g && d.version == *v)
                        .map(|d| {
                            json!({"resource": d.plural,
                                "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
                                "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": d.singular, "verbs": VERBS})
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g}, "versions": vs})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}

/// Answer a discovery path (already known not to name a resource).
pub fn handle(shared: &SharedRef, req: &Request) -> Response {
    let reg = shared.store.registry();
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let wants_aggregated =
        accept.contains("g=apidiscovery.k8s.io") && accept.contains("as=APIGroupDiscoveryList");
    const AGG_CT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let segs: Vec<&str> = req.uri().path().trim_matches('/').split('/').collect();
    match segs.as_slice() {
        ["api"] if wants_aggregated => respond(aggregated(shared, true), AGG_CT),
        ["apis"] if wants_aggregated => respond(aggregated(shared, false), AGG_CT),
        ["api"] => {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1");
            respond(
                json!({"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}),
                "application/json",
            )
        }
        ["api", "v1"] => {
            let defs: Vec<&ResourceDef> = reg
                .defs()
                .iter()
                .filter(|d| d.group.is_empty() && d.version == "v1")
                .collect();
            respond(resource_list(&defs, "v1"), "application/json")
        }
        ["apis"] => {
            let groups: Vec<Value> = reg
                .groups()
                .iter()
                .map(|(g, vs)| api_group(g, vs))
                .collect();
            respond(
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
                "application/json",
            )
        }
        ["apis", g] => match reg.groups().into_iter().find(|(name, _)| name == g) {
            Some((name, vs)) => {
                let mut v = api_group(&name, &vs);
                v["kind"] = json!("APIGroup");
                v["apiVersion"] = json!("v1");
                respond(v, "application/json")
            }
            None => ApiError::unknown_resource().into_response(),
        },
        ["apis", g, v] => {
            let defs: Vec<&ResourceDef> = reg
                .defs()
                .iter()
                .filter(|d| d.group == *g && d.version == *v)
                .collect();
            if defs.is_empty() {
                return ApiError::unknown_resource().into_response();
            }
            respond(
                resource_list(&defs, &format!("{g}/{v}")),
                "application/json",
            )
        }
        _ => ApiError::unknown_resource().into_response(),
    }
}

/// `GET /version`.
pub async fn version() -> Response {
    respond(
        json!({"major": "1", "minor": "34", "gitVersion": "v1.34.0-kinformer-sim", "gitCommit": "0000000",
            "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.24.0",
            "compiler": "gc", "platform": "linux/amd64"}),
        "application/json",
    )
}

/// `GET /readyz`, `/livez`, `/healthz`.
pub async fn ok() -> &'static str {
    "ok"
}

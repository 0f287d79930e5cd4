//! Shared helpers: start a sim in process on 127.0.0.1:0 and a kube client against it.

#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use std::future::Future;
use std::time::Duration;

use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use kinformer_sim::{RunningSim, SimBuilder};
use kube::Client;
use serde_json::{Value, json};

pub const TIMEOUT: Duration = Duration::from_secs(20);

/// Start `builder`'s sim and a kube client (client-side retries off, so faults are visible).
pub async fn start(builder: SimBuilder) -> (RunningSim, Client) {
    let sim = builder
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    let client = Client::try_from(cfg).unwrap();
    (sim, client)
}

/// Fail instead of hanging.
pub async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, f).await.expect("timed out")
}

/// A small pod with labels and a node.
pub fn pod(ns: &str, name: &str, labels: Value, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}})
}

/// Create `n` pods `p-0..` in `ns` in process.
pub fn fill(sim: &RunningSim, ns: &str, n: usize) {
    let pods = (0..n)
        .map(|i| pod(ns, &format!("p-{i:03}"), json!({"app": "a"}), "node-0"))
        .collect();
    assert_eq!(sim.handle().create_many("pods", pods).unwrap(), n);
}

pub fn typed(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

/// A raw request through the kube client: (status code, headers, body).
pub async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    accept: Option<&str>,
    body: &str,
) -> (u16, http::HeaderMap, String) {
    let mut req = http::Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let req = req
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (
        parts.status.as_u16(),
        parts.headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

/// Assert a `Status` body with the given code and reason.
pub fn assert_status(body: &str, code: u16, reason: &str) -> Value {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    assert_eq!(v["kind"], "Status", "{body}");
    assert_eq!(v["apiVersion"], "v1", "{body}");
    assert_eq!(v["status"], "Failure", "{body}");
    assert_eq!(v["code"], code, "{body}");
    assert_eq!(v["reason"], reason, "{body}");
    assert!(v["metadata"].is_object(), "{body}");
    v
}

/// The Status of a kube API error.
pub fn api_err(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

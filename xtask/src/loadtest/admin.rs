//! Talking to the source server: the simulator's admin endpoints (churn,
//! stats) and a paged LIST for the final comparison.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

/// The server side of a load test.
pub struct SimAdmin {
    /// A client for the server.
    pub client: Client,
}

/// What the server reports about itself.
pub struct ServerStats {
    /// The newest resourceVersion.
    pub resource_version: u64,
    /// Faults injected so far.
    pub faults_injected: u64,
}

impl SimAdmin {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())?;
        let text = self
            .client
            .request_text(req)
            .await
            .with_context(|| format!("{method} {path}"))?;
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Churns for `duration` at `rate` writes/s (0 = flat out): 80% updates,
    /// 10% creates, 10% deletes. Returns the number of committed writes.
    pub async fn churn(
        &self,
        rate: u64,
        duration: Duration,
        namespaces: usize,
    ) -> anyhow::Result<u64> {
        let body = json!({
            "kind": "pods",
            "rate_per_sec": (rate > 0).then_some(rate),
            "duration_ms": duration.as_millis() as u64,
            "updates": 8, "creates": 1, "deletes": 1,
            "namespaces": namespaces,
        });
        let report = self.call("POST", "/__sim/churn", Some(body)).await?;
        let n = |k: &str| report.get(k).and_then(Value::as_u64).unwrap_or(0);
        Ok(n("updates") + n("creates") + n("deletes"))
    }

    /// Commits `count` updates as fast as the server can, each to a different
    /// object while `count` does not exceed the objects. Returns the number
    /// of committed updates.
    pub async fn update_each_once(&self, count: u64) -> anyhow::Result<u64> {
        let body = json!({
            "kind": "pods",
            "rate_per_sec": null,
            "duration_ms": 3_600_000u64,
            "updates": 1, "creates": 0, "deletes": 0,
            "max_writes": count,
            "round_robin": true,
        });
        let report = self.call("POST", "/__sim/churn", Some(body)).await?;
        Ok(report.get("updates").and_then(Value::as_u64).unwrap_or(0))
    }

    /// Holds (`true`) or releases every watch's events.
    pub async fn hold_watches(&self, held: bool) -> anyhow::Result<()> {
        let action = if held {
            "hold_watches"
        } else {
            "release_watches"
        };
        self.call(
            "POST",
            "/__sim/faults/actions",
            Some(json!({"action": action})),
        )
        .await?;
        Ok(())
    }

    /// Ends every open watch with a 410 Expired ERROR event (clients relist).
    pub async fn expire_watches(&self) -> anyhow::Result<()> {
        let body = json!({"action": "expire_watches", "fraction": 1.0});
        self.call("POST", "/__sim/faults/actions", Some(body))
            .await?;
        Ok(())
    }

    /// The server's counters.
    pub async fn stats(&self) -> anyhow::Result<ServerStats> {
        let v = self.call("GET", "/__sim/stats", None).await?;
        Ok(ServerStats {
            resource_version: v
                .get("resource_version")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            faults_injected: v
                .pointer("/faults/total")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        })
    }

    /// Every Pod's key and resourceVersion, by a paged metadata-only LIST.
    pub async fn truth(&self) -> anyhow::Result<HashMap<String, String>> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let mut truth = HashMap::new();
        let mut params = ListParams::default().limit(5000);
        loop {
            let page = api
                .list_metadata(&params)
                .await
                .context("listing the source")?;
            for o in &page.items {
                let key = format!(
                    "{}/{}",
                    o.metadata.namespace.as_deref().unwrap_or_default(),
                    o.metadata.name.as_deref().unwrap_or_default()
                );
                truth.insert(key, o.metadata.resource_version.clone().unwrap_or_default());
            }
            match page.metadata.continue_ {
                Some(c) if !c.is_empty() => params = params.continue_token(&c),
                _ => break,
            }
        }
        Ok(truth)
    }
}

//! A real cluster as the load-test source (`--kubeconfig`): the load test
//! creates, churns and lists its own Pods through the API in one namespace.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use rand::Rng;
use serde_json::json;

use super::measure::now_unix_nanos;
use super::pods::COMMIT_ANNOTATION;

/// The namespace the load test owns on a real cluster.
pub const NAMESPACE: &str = "kinformer-loadtest";

/// Drives writes against a real cluster and remembers the newest
/// resourceVersion its own writes produced.
pub struct ClusterDriver {
    api: Api<Pod>,
    max_rv: AtomicU64,
}

fn pod(i: usize) -> Pod {
    let p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("lt-{i:08}"), "namespace": NAMESPACE,
            "labels": {"app": format!("app-{}", i % 50), "kinformer.dev/loadtest": "true"},
            "annotations": {COMMIT_ANNOTATION: now_unix_nanos().to_string()}
        },
        "spec": {"containers": [{"name": "app", "image": "registry.example.invalid/app:1.0"}]}
    });
    serde_json::from_value(p).unwrap_or_default()
}

impl ClusterDriver {
    /// A driver over `client`, creating the namespace if needed.
    pub async fn new(client: Client) -> anyhow::Result<Self> {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e).context("creating the load-test namespace"),
        }
        Ok(Self {
            api: Api::namespaced(client, NAMESPACE),
            max_rv: AtomicU64::new(0),
        })
    }

    fn saw(&self, p: &Pod) {
        if let Some(rv) = p
            .metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
        {
            self.max_rv.fetch_max(rv, Ordering::Relaxed);
        }
    }

    /// Deletes what an earlier run left, then creates `n` Pods, 32 at a time.
    pub async fn fill(&self, n: usize) -> anyhow::Result<()> {
        self.api
            .delete_collection(
                &DeleteParams::default().grace_period(0),
                &ListParams::default(),
            )
            .await
            .context("cleaning the load-test namespace")?;
        let pp = PostParams::default();
        futures::stream::iter(0..n)
            .map(|i| {
                let api = self.api.clone();
                let pp = pp.clone();
                async move { api.create(&pp, &pod(i)).await }
            })
            .buffer_unordered(32)
            .try_for_each(|p| {
                self.saw(&p);
                async { Ok(()) }
            })
            .await
            .context("creating Pods")?;
        Ok(())
    }

    /// Churns for `duration` (80% label/annotation patches, 10% creates,
    /// 10% deletes; at `rate` writes/s, 0 = as fast as the server allows).
    pub async fn churn(
        &self,
        first_new: usize,
        rate: u64,
        duration: Duration,
    ) -> anyhow::Result<u64> {
        let mut live: Vec<usize> = (0..first_new).collect();
        let mut next = first_new;
        let mut done = 0u64;
        let start = Instant::now();
        while start.elapsed() < duration {
            let roll = rand::rng().random_range(0..100u32);
            if roll < 10 || live.is_empty() {
                let p = self.api.create(&PostParams::default(), &pod(next)).await?;
                self.saw(&p);
                live.push(next);
                next += 1;
            } else if roll < 20 {
                let at = rand::rng().random_range(0..live.len());
                let i = live.swap_remove(at);
                let res = self
                    .api
                    .delete(
                        &format!("lt-{i:08}"),
                        &DeleteParams::default().grace_period(0),
                    )
                    .await?;
                if let Some(p) = res.left() {
                    self.saw(&p);
                }
            } else {
                let i = live[rand::rng().random_range(0..live.len())];
                let patch = json!({"metadata": {
                    "labels": {"kinformer.dev/round": done.to_string()},
                    "annotations": {COMMIT_ANNOTATION: now_unix_nanos().to_string()}}});
                let p = self
                    .api
                    .patch(
                        &format!("lt-{i:08}"),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await?;
                self.saw(&p);
            }
            done += 1;
            if rate > 0 {
                let due = Duration::from_secs_f64(done as f64 / rate as f64);
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
            }
        }
        Ok(done)
    }

    /// The newest resourceVersion produced by this driver's writes.
    pub fn newest_rv(&self) -> u64 {
        self.max_rv.load(Ordering::Relaxed)
    }

    /// Every Pod's key and resourceVersion in the namespace.
    pub async fn truth(&self) -> anyhow::Result<HashMap<String, String>> {
        let list = self.api.list_metadata(&ListParams::default()).await?;
        Ok(list
            .items
            .into_iter()
            .map(|o| {
                let key = format!("{NAMESPACE}/{}", o.metadata.name.unwrap_or_default());
                (key, o.metadata.resource_version.unwrap_or_default())
            })
            .collect())
    }
}

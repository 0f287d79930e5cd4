//! Objects and informers for the controller tests: informers fed through
//! their queue, as a reflector feeds them.
#![allow(dead_code, clippy::unwrap_used)]

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kinformer_core::SharedIndexInformer;

/// How long a test waits for something that should happen at once.
pub const T: Duration = Duration::from_secs(10);

pub fn meta(name: &str, rv: u64) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some("ns".to_owned()),
        uid: Some(format!("uid-{name}")),
        resource_version: Some(rv.to_string()),
        ..ObjectMeta::default()
    }
}

pub fn cm(name: &str, rv: u64) -> ConfigMap {
    ConfigMap {
        metadata: meta(name, rv),
        ..ConfigMap::default()
    }
}

/// A Secret owned by the ConfigMap `owner`.
pub fn owned_secret(name: &str, rv: u64, owner: &str) -> Secret {
    let mut metadata = meta(name, rv);
    metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        name: owner.to_owned(),
        uid: format!("uid-{owner}"),
        ..OwnerReference::default()
    }]);
    Secret {
        metadata,
        ..Secret::default()
    }
}

pub fn rv<K: kube_core::Resource>(o: &K) -> u64 {
    o.meta()
        .resource_version
        .as_deref()
        .unwrap_or("0")
        .parse()
        .unwrap()
}

/// A started informer whose cache holds `initial` (synced at rv "1").
pub fn informer<K>(name: &str, initial: Vec<K>) -> SharedIndexInformer<K>
where
    K: kube_core::Resource + Clone + Send + Sync + 'static,
{
    let inf = SharedIndexInformer::builder()
        .name(name)
        .threads(1)
        .indexers(kinformer_core::builtin_indexers())
        .build();
    inf.start().unwrap();
    inf.queue().replace(initial, "1").unwrap();
    inf
}

/// Waits (polling every few milliseconds) until `cond` holds; fails the
/// test after [`T`].
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + T;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs `fut` with a deadline of [`T`].
pub async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(T, fut).await {
        Ok(out) => out,
        Err(_) => panic!("timed out: {what}"),
    }
}

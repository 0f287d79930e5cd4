//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::{DeletedObject, Delta, DeltaFifo, DeltaType, Indexer, ObjectKey, Popped};
use kube_core::ObjectMeta;

/// A ConfigMap `ns/name` at resource version `rv`.
pub fn cm(name: &str, rv: u64) -> ConfigMap {
    cm_labels(name, rv, &[])
}

/// A ConfigMap with labels.
pub fn cm_labels(name: &str, rv: u64, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.to_string()),
            labels: (!labels.is_empty()).then(|| {
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<BTreeMap<_, _>>()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("ns"), name)
}

pub fn rv(o: &ConfigMap) -> u64 {
    o.metadata
        .resource_version
        .as_deref()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// A delta rendered as (type, rv, is tombstone).
pub fn shape(d: &Delta<ConfigMap>) -> Shape {
    let tomb = matches!(d, Delta::Deleted(DeletedObject::Unknown(_)));
    (d.kind(), rv(d.object()), tomb)
}

/// A FIFO over a fresh cache.
pub fn fifo() -> (DeltaFifo<ConfigMap>, Indexer<ConfigMap>) {
    let indexer = Indexer::new(Vec::new());
    (DeltaFifo::new(indexer.clone(), None), indexer)
}

/// Pops one key without blocking, marks it done, returns (key, shapes).
pub type Shape = (DeltaType, u64, bool);

pub fn pop_now(f: &DeltaFifo<ConfigMap>) -> Option<(String, Vec<Shape>)> {
    let mut v = f.try_pop_batch(1);
    let p: Popped<ConfigMap> = v.pop()?;
    f.done([(&p.key, p.is_in_initial_list)]);
    Some((p.key.to_string(), p.deltas.iter().map(shape).collect()))
}

/// Stores objects directly in the cache (as if applied earlier).
pub fn seed_cache(indexer: &Indexer<ConfigMap>, objs: &[ConfigMap]) {
    indexer.write(|w| {
        for o in objs {
            w.upsert(ObjectKey::of(o).unwrap(), Arc::new(o.clone()));
        }
    });
}

/// Polls `cond` until true or panics after `timeout`.
pub fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

//! Objects for benchmarks: Pods carrying only metadata, since the cache's
//! cost does not depend on the size of the object behind its `Arc`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{IndexFn, Indexers, LABEL_INDEX, NAMESPACE_INDEX, ObjectKey};
use kube_core::ObjectMeta;

/// Namespaces objects are spread over.
pub const NAMESPACES: usize = 50;

/// Pod `i` at resource version `rv`, with three labels.
pub fn pod(i: usize, rv: u64) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("web-7d4b9c8f6-{i:08}")),
            namespace: Some(format!("ns-{}", i % NAMESPACES)),
            resource_version: Some(rv.to_string()),
            labels: Some(BTreeMap::from([
                ("app".to_string(), format!("app-{}", i % 500)),
                ("tier".to_string(), "frontend".to_string()),
                ("env".to_string(), "prod".to_string()),
            ])),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Keys and shared objects `0..n`.
pub fn objects(n: usize) -> Vec<(ObjectKey, Arc<Pod>)> {
    (0..n)
        .map(|i| {
            let p = pod(i, 1);
            (ObjectKey::of(&p).expect("fixture has a name"), Arc::new(p))
        })
        .collect()
}

/// The two secondary indexes of the benchmarks: namespace and labels.
pub fn two_indexes() -> Indexers<Pod> {
    vec![
        (NAMESPACE_INDEX.to_string(), IndexFn::namespace()),
        (LABEL_INDEX.to_string(), IndexFn::labels()),
    ]
}

/// A cheap deterministic pseudo-random sequence (xorshift).
pub struct Rng(pub u64);

impl Rng {
    /// The next value below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

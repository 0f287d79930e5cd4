//! Compact informers from the factory, against kinformer-sim: the cache holds
//! packed objects, listers and handlers see whole ones equal to what a plain
//! informer caches, and the indexes, selectors and transforms work as on
//! the plain store.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::sim;
use k8s_openapi::api::core::v1::Pod;
use kinformer::{
    EventHandlerFns, IndexFn, InformerOptions, Lister, NAMESPACE_INDEX, SharedInformerFactory,
};
use kinformer_sim::RunningSim;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube_core::{Expression, Resource, Selector};
use serde_json::{Value, json};

const SYNC: Duration = Duration::from_secs(15);

fn pod(ns: &str, name: &str, app: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app},
            "annotations": {"note": "ünïcødé \"quoted\""},
            "managedFields": [{"manager": "test", "operation": "Apply"}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox",
            "env": [{"name": "A", "value": "1"}]}]},
        "status": {"phase": "Running"}})
}

async fn filled() -> (RunningSim, SharedInformerFactory) {
    let (sim, client) = sim().await;
    for (ns, name, app) in [
        ("default", "web-1", "web"),
        ("default", "db-1", "db"),
        ("prod", "web-2", "web"),
    ] {
        sim.handle()
            .create("pods", pod(ns, name, app, "node-1"))
            .unwrap();
    }
    let f = SharedInformerFactory::builder(client)
        .tuning(kinformer::Tuning::default().threads_per_informer(1))
        .build();
    (sim, f)
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + SYNC;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compact_cache_holds_packed_objects_equal_to_the_plain_cache() {
    let (_sim, f) = filled().await;
    let plain = f.informer::<Pod>();
    let compact = f.compact_informer::<Pod>();
    // One informer (and one hot set) per type and target, however often asked.
    assert!(Arc::ptr_eq(
        compact.hot(),
        f.compact_informer::<Pod>().hot()
    ));
    compact
        .informer()
        .add_indexers(vec![(
            "node".to_string(),
            // An index over the spec decodes the object, once per write.
            IndexFn::fallible(|p: &kinformer::compact::Compact<Pod>| {
                let pod = p
                    .decode()
                    .map_err(|e| kinformer::InformerError::IndexFn(e.to_string()))?;
                Ok(pod.spec.and_then(|s| s.node_name).into_iter().collect())
            }),
        )])
        .unwrap();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();

    let lister = compact.lister();
    let plain_lister = Lister::new(plain.indexer());
    assert_eq!(lister.len(), 3);
    for entry in lister.indexer().list() {
        assert!(entry.is_packed(), "{entry:?}");
        assert!(
            entry.meta().managed_fields.is_none(),
            "kept in the packed bytes"
        );
    }
    let web1 = lister.get_by_name(Some("default"), "web-1").unwrap();
    assert_eq!(*web1, *plain_lister.get("default", "web-1").unwrap());
    assert!(web1.metadata.managed_fields.is_some());
    assert!(lister.get("prod/web-1").is_none());
    let web: Selector = Expression::Equal("app".into(), "web".into()).into();
    assert_eq!(lister.list_by_labels(&web).count(), 2);
    let mut all: Vec<String> = lister
        .list()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    all.sort();
    assert_eq!(all, ["db-1", "web-1", "web-2"]);
    assert_eq!(
        lister.by_index(NAMESPACE_INDEX, "default").unwrap().count(),
        2
    );
    assert_eq!(lister.list_namespace("prod").count(), 1);
    assert_eq!(lister.by_index("node", "node-1").unwrap().count(), 3);
    let stats = compact.hot().stats();
    assert_eq!((stats.decode_failures, stats.pack_failures), (0, 0));
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_of_a_compact_informer_receive_whole_transformed_objects() {
    let (sim, f) = filled().await;
    // The type's transform runs before packing.
    f.set_transform(|mut p: Pod| {
        p.metadata.managed_fields = None;
        p
    });
    let compact = f.compact_informer_with::<Pod>(InformerOptions::default().namespace("default"));
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
    let image = |p: &Pod| {
        p.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap()
    };
    compact
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |p: &Arc<Pod>, initial| {
                    a.lock().push(format!(
                        "add {} {initial} {} {}",
                        p.metadata.name.as_deref().unwrap(),
                        image(p),
                        p.metadata.managed_fields.is_some()
                    ));
                })
                .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
                    u.lock().push(format!(
                        "update {} {} -> {}",
                        new.metadata.name.as_deref().unwrap(),
                        old.metadata.labels.as_ref().unwrap()["app"],
                        new.metadata.labels.as_ref().unwrap()["app"]
                    ));
                })
                .on_delete(move |gone| {
                    d.lock().push(format!(
                        "delete {}",
                        gone.object().metadata.name.as_deref().unwrap()
                    ));
                }),
        )
        .unwrap();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let h = sim.handle();
    h.patch(
        "pods",
        "default",
        "web-1",
        &json!({"metadata": {"labels": {"app": "web2"}}}),
    )
    .unwrap();
    h.delete("pods", "default", "db-1").unwrap();
    eventually("four notifications", || seen.lock().len() >= 4).await;
    let mut got = seen.lock().clone();
    got[..2].sort();
    assert_eq!(
        got,
        [
            "add db-1 true busybox false",
            "add web-1 true busybox false",
            "update web-1 web -> web2",
            "delete db-1",
        ]
    );
    let cached = compact.lister().get("default/web-1").unwrap();
    assert!(cached.metadata.managed_fields.is_none());
    assert_eq!(cached.metadata.labels.as_ref().unwrap()["app"], "web2");
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_compact_informer_decodes_dynamic_objects() {
    let (_sim, f) = filled().await;
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods");
    let compact = f.dynamic_compact_informer_with(&resource, InformerOptions::default());
    let plain = f.dynamic_informer_with(&resource, InformerOptions::default());
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let got: Arc<DynamicObject> = compact.lister().get("prod/web-2").unwrap();
    assert_eq!(*got, *plain.indexer().get("prod/web-2").unwrap());
    assert_eq!(got.data["spec"]["nodeName"], "node-1");
    f.shutdown().await;
}

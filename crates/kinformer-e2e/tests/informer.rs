//! The informer against the real kube-apiserver: typed, metadata-only and
//! dynamic informers, selectors, and factory sharing (one watch however
//! many callers), as seen by the server's own metrics.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kinformer::{
    DirectWatch, EventHandlerFns, InformerOptions, Lister, ReflectorConfig, SharedInformerFactory,
};
use kinformer_e2e::{ensure_namespace, raw, real_client, real_config, unique};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;
use tokio::sync::mpsc;

const SYNC: Duration = Duration::from_secs(60);
const EVENT: Duration = Duration::from_secs(30);

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"k": "v0"}}),
    )
    .unwrap()
}

/// A client, a fresh namespace named after `prefix`, and its ConfigMaps.
async fn configmaps_in_new_namespace(prefix: &str) -> (Client, String, Api<ConfigMap>) {
    let client = real_client(false).await.unwrap();
    let ns = unique(prefix);
    ensure_namespace(&client, &ns).await.unwrap();
    let cms = Api::namespaced(client.clone(), &ns);
    (client, ns, cms)
}

async fn factory(client: &Client, ns: &str) -> SharedInformerFactory {
    SharedInformerFactory::builder(client.clone())
        .namespace(ns)
        .tuning(kinformer::Tuning::default().runtime(tokio::runtime::Handle::current()))
        .build()
}

#[derive(Debug, PartialEq)]
enum Seen {
    Add(String, bool),
    Update(String, String),
    Delete(String),
}

/// The next event a handler reported, within [`EVENT`].
async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(EVENT, rx.recv())
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn typed_informers_sync_and_observe_changes_in_order_cache_first() {
    let (client, ns, cms) = configmaps_in_new_namespace("inf").await;
    for i in 0..3 {
        cms.create(&PostParams::default(), &cm(&format!("pre-{i}"), json!({})))
            .await
            .unwrap();
    }
    let f = factory(&client, &ns).await;
    let informer = f.informer::<ConfigMap>();
    let pods = f.informer::<Pod>();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (t2, t3) = (tx.clone(), tx.clone());
    let (i1, i2, i3) = (informer.indexer(), informer.indexer(), informer.indexer());
    let key = |o: &ConfigMap| {
        format!(
            "{}/{}",
            o.metadata.namespace.clone().unwrap(),
            o.metadata.name.clone().unwrap()
        )
    };
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |o: &Arc<ConfigMap>, initial| {
                    // The cache holds the object before the handler hears of it.
                    assert!(
                        i1.get(&key(o)).is_some(),
                        "add delivered before the cache had it"
                    );
                    t2.send(Seen::Add(o.metadata.name.clone().unwrap(), initial))
                        .unwrap();
                })
                .on_update(move |_, n: &Arc<ConfigMap>| {
                    let rv = |o: &ConfigMap| {
                        o.metadata
                            .resource_version
                            .as_deref()
                            .unwrap()
                            .parse::<u64>()
                            .unwrap()
                    };
                    let cached = i2.get(&key(n)).unwrap();
                    assert!(
                        rv(&cached) >= rv(n),
                        "update delivered before the cache had it"
                    );
                    let v = n
                        .data
                        .as_ref()
                        .and_then(|d| d.get("k").cloned())
                        .unwrap_or_default();
                    t3.send(Seen::Update(n.metadata.name.clone().unwrap(), v))
                        .unwrap();
                })
                .on_delete(move |d| {
                    let o = d.object();
                    assert!(
                        i3.get(&key(o)).is_none(),
                        "delete delivered before the cache dropped it"
                    );
                    tx.send(Seen::Delete(o.metadata.name.clone().unwrap()))
                        .unwrap();
                }),
        )
        .unwrap();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let mut initial = Vec::new();
    for _ in 0..3 {
        initial.push(next(&mut rx).await);
    }
    initial.sort_by_key(|s| format!("{s:?}"));
    assert_eq!(
        initial,
        (0..3)
            .map(|i| Seen::Add(format!("pre-{i}"), true))
            .collect::<Vec<_>>()
    );
    assert_eq!(pods.indexer().len(), 0);

    // Each change waits for its event before the next is made: the
    // handlers check the cache when they run, and a later change applied
    // before then (the delete of "x" before its add is delivered, as
    // client-go allows too) would fail those checks with nothing wrong.
    cms.create(&PostParams::default(), &cm("x", json!({})))
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, Seen::Add("x".into(), false));
    let patch = json!({"data": {"k": "v1"}});
    cms.patch("x", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, Seen::Update("x".into(), "v1".into()));
    cms.delete("x", &DeleteParams::default()).await.unwrap();
    assert_eq!(next(&mut rx).await, Seen::Delete("x".into()));

    // A typed Pod informer of the same factory follows its own resource.
    let pod_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "registry.example.invalid/c:1"}]}}))
    .unwrap();
    pod_api.create(&PostParams::default(), &pod).await.unwrap();
    let lister = Lister::new(pods.indexer());
    let deadline = tokio::time::Instant::now() + EVENT;
    while lister.get(&ns, "p").is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "pod never reached the cache"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn metadata_informer_and_label_and_field_selectors() {
    let (client, ns, cms) = configmaps_in_new_namespace("sel").await;
    cms.create(&PostParams::default(), &cm("a", json!({"tier": "web"})))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("b", json!({"tier": "db"})))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("c", json!({"tier": "web"})))
        .await
        .unwrap();
    let f = factory(&client, &ns).await;
    let meta = f.metadata_informer::<ConfigMap>();
    let web =
        f.informer_with::<ConfigMap>(InformerOptions::default().namespace(&ns).labels("tier=web"));
    let by_name = f.informer_with::<ConfigMap>(
        InformerOptions::default()
            .namespace(&ns)
            .fields("metadata.name=b"),
    );
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let names = |keys: Vec<kinformer::ObjectKey>| {
        let mut v: Vec<String> = keys.iter().map(|k| k.name().to_string()).collect();
        v.sort();
        v
    };
    // The metadata-only cache holds every object, without its data.
    assert_eq!(names(meta.indexer().list_keys()), ["a", "b", "c"]);
    assert_eq!(
        meta.indexer()
            .get(&format!("{ns}/a"))
            .unwrap()
            .metadata
            .labels
            .as_ref()
            .unwrap()["tier"],
        "web"
    );
    assert_eq!(names(web.indexer().list_keys()), ["a", "c"]);
    assert_eq!(names(by_name.indexer().list_keys()), ["b"]);
    // An object leaving the selector leaves the selective cache.
    let patch = json!({"metadata": {"labels": {"tier": "db"}}});
    cms.patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + EVENT;
    while web.indexer().get(&format!("{ns}/a")).is_some() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "relabelled object stayed in the selective cache"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    f.shutdown().await;
}

/// The resourceVersion `informer` caches for `key`.
fn cached_rv<K>(informer: &kinformer::SharedIndexInformer<K>, key: &str) -> Option<String>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
{
    informer
        .indexer()
        .get(key)
        .and_then(|o| o.meta().resource_version.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn skipping_managed_fields_caches_what_the_server_sent_without_them() {
    let (client, ns, cms) = configmaps_in_new_namespace("mf").await;
    for name in ["a", "b"] {
        cms.create(&PostParams::default(), &cm(name, json!({"tier": "web"})))
            .await
            .unwrap();
    }
    // A second manager, so that `a` has two `managedFields` entries.
    let apply = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"applied": "yes"}});
    cms.patch(
        "a",
        &PatchParams::apply("kinformer-e2e").force(),
        &Patch::Apply(&apply),
    )
    .await
    .unwrap();
    let whole = factory(&client, &ns).await;
    let skipping = SharedInformerFactory::builder(client.clone())
        .namespace(&ns)
        .tuning(kinformer::Tuning::default().runtime(tokio::runtime::Handle::current()))
        .reflector_config(ReflectorConfig::default().skip_managed_fields(true))
        .build();
    let (typed, typed_skipping) = (
        whole.informer::<ConfigMap>(),
        skipping.informer::<ConfigMap>(),
    );
    let (meta, meta_skipping) = (
        whole.metadata_informer::<ConfigMap>(),
        skipping.metadata_informer::<ConfigMap>(),
    );
    for f in [&whole, &skipping] {
        f.start().unwrap();
        f.wait_for_cache_sync(SYNC).await.unwrap();
    }
    // One change after the sync, so that watch lines are checked too.
    let patch = json!({"data": {"k": "v1"}});
    let changed = cms
        .patch("b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let rv = changed.metadata.resource_version.unwrap();
    let key = format!("{ns}/b");
    let deadline = tokio::time::Instant::now() + EVENT;
    loop {
        let rvs = [
            cached_rv(&typed, &key),
            cached_rv(&typed_skipping, &key),
            cached_rv(&meta, &key),
            cached_rv(&meta_skipping, &key),
        ];
        if rvs.iter().all(|r| r.as_deref() == Some(rv.as_str())) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the caches never all reached {rv}: {rvs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for name in ["a", "b"] {
        let key = format!("{ns}/{name}");
        let mut expected = (*typed.indexer().get(&key).unwrap()).clone();
        let entries = expected.metadata.managed_fields.take().unwrap_or_default();
        let managers = if name == "a" { 2 } else { 1 };
        assert!(
            entries.len() >= managers,
            "the server sent {} managedFields entries for {name}",
            entries.len()
        );
        assert_eq!(*typed_skipping.indexer().get(&key).unwrap(), expected);
        let mut expected = meta.indexer().get(&key).unwrap().metadata.clone();
        assert!(expected.managed_fields.take().is_some());
        let got = meta_skipping.indexer().get(&key).unwrap();
        assert_eq!(got.metadata, expected);
        assert_eq!(got.types, meta.indexer().get(&key).unwrap().types);
    }
    whole.shutdown().await;
    skipping.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn a_protobuf_metadata_informer_caches_what_a_json_one_does() {
    let (client, ns, cms) = configmaps_in_new_namespace("pb").await;
    for name in ["a", "b", "c"] {
        let labels = json!({"tier": name, "app.kubernetes.io/name": "e2e"});
        cms.create(&PostParams::default(), &cm(name, labels))
            .await
            .unwrap();
    }
    let with_config = |config: ReflectorConfig| {
        SharedInformerFactory::builder(client.clone())
            .namespace(&ns)
            .tuning(kinformer::Tuning::default().runtime(tokio::runtime::Handle::current()))
            .reflector_config(config)
            .build()
    };
    // Protobuf is the metadata informers' default: JSON by choice. The
    // informer that skips managedFields also syncs by LIST, so that a
    // protobuf LIST is read in either WatchList mode.
    let json_factory = with_config(ReflectorConfig::default().protobuf(false));
    let (pb, pb_skipping) = (
        with_config(ReflectorConfig::default()),
        with_config(
            ReflectorConfig::default()
                .skip_managed_fields(true)
                .watch_list(false),
        ),
    );
    let json_meta = json_factory.metadata_informer::<ConfigMap>();
    let pb_meta = pb.metadata_informer::<ConfigMap>();
    let pb_meta_skipping = pb_skipping.metadata_informer::<ConfigMap>();
    for f in [&json_factory, &pb, &pb_skipping] {
        f.start().unwrap();
        f.wait_for_cache_sync(SYNC).await.unwrap();
    }
    // After the sync (a WatchList stream): an update with an annotation and
    // a finalizer, and a delete, so that watch events are checked too.
    let patch =
        json!({"metadata": {"annotations": {"seq": "1"}, "finalizers": ["kinformer.dev/keep"]}});
    let changed = cms
        .patch("b", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let rv = changed.metadata.resource_version.unwrap();
    cms.delete("c", &DeleteParams::default()).await.unwrap();
    let b = format!("{ns}/b");
    let c = format!("{ns}/c");
    let deadline = tokio::time::Instant::now() + EVENT;
    let informers = [&json_meta, &pb_meta, &pb_meta_skipping];
    while !informers
        .iter()
        .all(|i| cached_rv(i, &b).as_deref() == Some(rv.as_str()) && i.indexer().get(&c).is_none())
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the caches never all reached {rv} without {c}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let keys = json_meta.indexer().list_keys();
    assert_eq!(keys.len(), 2);
    for key in keys {
        let key = key.to_string();
        let expected = json_meta.indexer().get(&key).unwrap();
        let got = pb_meta.indexer().get(&key).unwrap();
        assert_eq!(got.metadata, expected.metadata, "{key}");
        assert_eq!(got.types, expected.types, "{key}");
        let mut without = expected.metadata.clone();
        assert!(without.managed_fields.take().is_some());
        assert_eq!(
            pb_meta_skipping.indexer().get(&key).unwrap().metadata,
            without
        );
    }
    // The server answered the protobuf informers' watches (and the LIST)
    // in protobuf.
    for f in [&pb, &pb_skipping] {
        let metrics = f.reflector_metrics();
        assert!(
            metrics.iter().all(|(_, m)| m.protobuf_watches >= 1),
            "{metrics:?}"
        );
    }
    let metrics = pb_skipping.reflector_metrics();
    assert!(
        metrics
            .iter()
            .all(|(_, m)| m.lists >= 1 && m.protobuf_list_pages >= 1),
        "{metrics:?}"
    );
    assert!(
        json_factory
            .reflector_metrics()
            .iter()
            .all(|(_, m)| m.protobuf_watches == 0 && m.protobuf_list_pages == 0)
    );
    for f in [json_factory, pb, pb_skipping] {
        f.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn dynamic_informer_follows_a_crd_created_in_the_test() {
    let (client, ns, _) = configmaps_in_new_namespace("crd").await;
    let group = format!("{}.kinformer.dev", unique("g"));
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}
    }))
    .unwrap();
    // The CRD takes a moment to be served.
    let deadline = tokio::time::Instant::now() + EVENT;
    while api.create(&PostParams::default(), &obj).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "CRD never served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let f = factory(&client, &ns).await;
    let widgets = f.dynamic_informer(&ar);
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let w1 = widgets.indexer().get(&format!("{ns}/w1")).unwrap();
    assert_eq!(w1.data["spec"]["size"], 3);
    crds.delete(&format!("widgets.{group}"), &DeleteParams::default())
        .await
        .unwrap();
    f.shutdown().await;
}

/// `apiserver_longrunning_requests` for WATCHes of configmaps, summed over scopes.
async fn configmap_watches(client: &Client) -> f64 {
    let text = raw(client, "GET", "/metrics", None, Some("text/plain"))
        .await
        .unwrap()
        .text();
    text.lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{")
                && l.contains("resource=\"configmaps\"")
                && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn factory_sharing_opens_one_watch_as_counted_by_the_apiserver() {
    let (client, ns, _) = configmaps_in_new_namespace("share").await;
    let before = configmap_watches(&client).await;
    let f = factory(&client, &ns).await;
    let a = f.informer::<ConfigMap>();
    let b = f.informer::<ConfigMap>();
    let _c = f.informer::<ConfigMap>();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert!(
        Arc::ptr_eq(&a.queue().clone(), &b.queue().clone()),
        "one shared informer"
    );
    // Wait for the watch to be registered, then check that exactly one was opened.
    let deadline = tokio::time::Instant::now() + EVENT;
    let mut now = configmap_watches(&client).await;
    while now < before + 1.0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        now = configmap_watches(&client).await;
    }
    assert_eq!(now - before, 1.0, "watches before {before}, after {now}");
    f.shutdown().await;
}

/// Watches sent through a `DirectWatch` (connections of their own over TLS,
/// authenticated as the kubeconfig says, bodies read without hyper's
/// client): a typed informer and a protobuf metadata-only one sync, with
/// WatchList and by LIST, and follow an update and a delete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn direct_watches_over_tls_follow_the_real_server() {
    let (client, ns, cms) = configmaps_in_new_namespace("direct").await;
    let direct = DirectWatch::from_config(&real_config().await.unwrap()).unwrap();
    for (i, watch_list) in [true, false].into_iter().enumerate() {
        let (keep, drop) = (format!("keep-{i}"), format!("drop-{i}"));
        for name in [&keep, &drop] {
            cms.create(&PostParams::default(), &cm(name, json!({})))
                .await
                .unwrap();
        }
        let f = SharedInformerFactory::builder(client.clone())
            .namespace(&ns)
            .tuning(kinformer::Tuning::default().runtime(tokio::runtime::Handle::current()))
            .reflector_config(ReflectorConfig::default().watch_list(watch_list))
            .direct_watches(direct.clone())
            .build();
        let typed = f.informer::<ConfigMap>();
        let meta = f.metadata_informer::<ConfigMap>();
        f.start().unwrap();
        f.wait_for_cache_sync(SYNC).await.unwrap();
        let patch = json!({"metadata": {"annotations": {"seq": "1"}}});
        let changed = cms
            .patch(&keep, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        let rv = changed.metadata.resource_version.unwrap();
        cms.delete(&drop, &DeleteParams::default()).await.unwrap();
        let (keep, drop) = (format!("{ns}/{keep}"), format!("{ns}/{drop}"));
        let deadline = tokio::time::Instant::now() + EVENT;
        while !(cached_rv(&typed, &keep).as_deref() == Some(rv.as_str())
            && cached_rv(&meta, &keep).as_deref() == Some(rv.as_str())
            && typed.indexer().get(&drop).is_none()
            && meta.indexer().get(&drop).is_none())
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the caches never reached {rv} without {drop} (watch_list {watch_list})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let metrics = f.reflector_metrics();
        assert!(
            metrics.iter().all(|(_, m)| m.direct_watches >= 1),
            "{metrics:?}"
        );
        assert!(
            metrics.iter().any(|(_, m)| m.protobuf_watches >= 1),
            "{metrics:?}"
        );
        f.shutdown().await;
    }
}

//! The factory against kinformer-sim: sharing, lifecycle, listers,
//! dynamic and metadata-only informers.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::sim;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kinformer::{
    BackoffConfig, EventHandlerFns, FactoryError, InformerOptions, Lister, ReflectorConfig,
    SharedInformerFactory,
};
use kinformer_sim::RunningSim;
use kube::Client;
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube_core::{Expression, Selector};
use serde_json::{Value, json};

const SYNC: Duration = Duration::from_secs(15);

fn pod(ns: &str, name: &str, app: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": app},
            "managedFields": [{"manager": "test", "operation": "Apply"}]},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}})
}

fn fill(sim: &RunningSim) {
    for (ns, name, app) in [
        ("default", "web-1", "web"),
        ("default", "db-1", "db"),
        ("prod", "web-2", "web"),
    ] {
        sim.handle()
            .create("pods", pod(ns, name, app, "node-1"))
            .unwrap();
    }
    sim.handle()
        .create(
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "default"}, "data": {"k": "v"}}),
        )
        .unwrap();
}

fn fast() -> ReflectorConfig {
    ReflectorConfig::default().backoff(
        BackoffConfig::default()
            .initial(Duration::from_millis(20))
            .max(Duration::from_millis(200))
            .jitter(0.0),
    )
}

fn factory(client: Client) -> SharedInformerFactory {
    SharedInformerFactory::builder(client)
        .tuning(kinformer::Tuning::default().threads_per_informer(1))
        .reflector_config(fast())
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_watch_per_type_namespace_and_selectors_however_often_informer_is_called() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = factory(client);
    let a = f.informer::<Pod>();
    let b = f.informer::<Pod>();
    let _ = f.informer::<Pod>();
    let _ = f.informer::<ConfigMap>();
    let prod = f.informer_with::<Pod>(InformerOptions::default().namespace("prod"));
    let _ = f.informer_with::<Pod>(InformerOptions::default().namespace("prod"));
    let web = f.informer_with::<Pod>(InformerOptions::default().labels("app=web"));
    assert_eq!(f.informer_names().len(), 4, "{:?}", f.informer_names());
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(sim.handle().stats().watches_started, 4);
    // `a` and `b` are one informer: one cache.
    assert_eq!(a.indexer().len(), 3);
    assert!(Arc::ptr_eq(
        &a.indexer().snapshot(),
        &b.indexer().snapshot()
    ));
    assert_eq!(prod.indexer().len(), 1);
    assert_eq!(web.indexer().len(), 2);
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_is_idempotent_and_late_informers_start_at_once() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = factory(client);
    let pods = f.informer::<Pod>();
    f.start().unwrap();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    f.start().unwrap();
    assert_eq!(sim.handle().stats().watches_started, 1);
    let cms = f.informer::<ConfigMap>();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(sim.handle().stats().watches_started, 2);
    assert_eq!((pods.indexer().len(), cms.indexer().len()), (3, 1));
    f.shutdown().await;
    assert!(f.start().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_cache_sync_times_out_naming_the_unsynced_informers() {
    let (sim, client) = sim().await;
    let f = factory(client);
    let _ = f.informer::<Pod>();
    let _ = f.informer_with::<ConfigMap>(InformerOptions::default().namespace("x"));
    // Not started: nothing can sync.
    match f.wait_for_cache_sync(Duration::from_millis(100)).await {
        Err(FactoryError::SyncTimeout { unsynced, .. }) => {
            assert_eq!(unsynced.len(), 2);
            assert!(
                unsynced.iter().any(|n| n.contains("/api/v1/pods")),
                "{unsynced:?}"
            );
            assert!(
                unsynced
                    .iter()
                    .any(|n| n.contains("namespaces/x/configmaps")),
                "{unsynced:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    f.shutdown().await;
    assert!(matches!(
        f.wait_for_cache_sync(SYNC).await,
        Err(FactoryError::ShutDown)
    ));
    drop(sim);
}

/// A filled simulator, and a factory over it that strips `managedFields`.
async fn filled_sim_and_stripping_factory() -> (RunningSim, SharedInformerFactory) {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = SharedInformerFactory::builder(client)
        .tuning(kinformer::Tuning::default().threads_per_informer(1))
        .reflector_config(fast())
        .transform_meta(kinformer::strip_managed_fields)
        .build();
    (sim, f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listers_get_list_by_labels_and_namespace_and_indexers_work() {
    let (_sim, f) = filled_sim_and_stripping_factory().await;
    let pods = f.informer::<Pod>();
    pods.add_indexers(vec![(
        "node".to_string(),
        kinformer::IndexFn::new(|p: &Pod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .into_iter()
                .collect()
        }),
    )])
    .unwrap();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let lister = Lister::new(pods.indexer());
    let web1 = lister.get("default", "web-1").unwrap();
    assert!(web1.metadata.managed_fields.is_none(), "transform applied");
    assert!(lister.get("prod", "web-1").is_none());
    let web: Selector = Expression::Equal("app".into(), "web".into()).into();
    assert_eq!(lister.list(&web).len(), 2);
    assert_eq!(lister.list(&Selector::default()).len(), 3);
    let default = lister.namespaced("default");
    assert_eq!(default.list_all().len(), 2);
    assert_eq!(default.list(&web).len(), 1);
    assert!(default.get("db-1").is_some());
    assert_eq!(lister.by_index("node", "node-1").unwrap().len(), 3);
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transform_applies_to_watched_adds_updates_and_deletes() {
    let (sim, f) = filled_sim_and_stripping_factory().await;
    let pods = f.informer::<Pod>();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
    let kept = |p: &Pod| p.metadata.managed_fields.is_some();
    let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
    pods.add_event_handler(
        EventHandlerFns::new()
            .on_add(move |p: &Arc<Pod>, initial| {
                if !initial {
                    a.lock().push(format!("add {} {}", name(p), kept(p)));
                }
            })
            .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
                let kept = (kept(old), kept(new));
                u.lock().push(format!("update {} {kept:?}", name(new)));
            })
            .on_delete(move |gone| {
                let p = gone.object();
                d.lock().push(format!("delete {} {}", name(p), kept(p)));
            }),
    )
    .unwrap();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let h = sim.handle();
    h.create("pods", pod("default", "late", "web", "node-2"))
        .unwrap();
    let relabel = json!({"metadata": {"labels": {"app": "web2"}}});
    let patched = h.patch("pods", "default", "web-1", &relabel).unwrap();
    assert!(patched.to_value().unwrap()["metadata"]["managedFields"].is_array());
    h.delete("pods", "default", "db-1").unwrap();
    let want = [
        "add late false",
        "update web-1 (false, false)",
        "delete db-1 false",
    ];
    let deadline = tokio::time::Instant::now() + SYNC;
    while seen.lock().len() < want.len() {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", seen.lock());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*seen.lock(), want);
    let cached = pods.indexer().get("default/web-1").unwrap();
    assert!(cached.metadata.managed_fields.is_none());
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_before_and_after_start_see_every_object() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = factory(client);
    let pods = f.informer::<Pod>();
    let early = Arc::new(AtomicUsize::new(0));
    let e = early.clone();
    pods.add_event_handler(EventHandlerFns::new().on_add(move |_: &Arc<Pod>, _| {
        e.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let late = Arc::new(AtomicUsize::new(0));
    let l = late.clone();
    let reg = pods
        .add_event_handler(EventHandlerFns::new().on_add(move |_: &Arc<Pod>, initial| {
            if initial {
                l.fetch_add(1, Ordering::SeqCst);
            }
        }))
        .unwrap();
    let deadline = tokio::time::Instant::now() + SYNC;
    while !(reg.has_synced()
        && late.load(Ordering::SeqCst) == 3
        && early.load(Ordering::SeqCst) == 3)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "handlers did not see 3 pods"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_informer_caches_partial_objects() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = factory(client.clone());
    let meta = f.metadata_informer::<Pod>();
    let full = f.informer::<Pod>();
    let nodes = f.informer_with::<Node>(InformerOptions::default().namespace("ignored"));
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(meta.indexer().len(), 3);
    let m = meta.indexer().get("default/web-1").unwrap();
    assert_eq!(m.metadata.labels.as_ref().unwrap()["app"], "web");
    // The informer's own decoder (not kube's derive, see
    // `kinformer_reflector::partial_meta`) gives what kube gives for the
    // same object.
    let api = kube::Api::<Pod>::namespaced(client.clone(), "default");
    let kube_decoded = api.get_metadata("web-1").await.unwrap();
    let types = m.types.clone().unwrap();
    assert_eq!(
        (types.api_version.as_str(), types.kind.as_str()),
        ("meta.k8s.io/v1", "PartialObjectMetadata")
    );
    assert_eq!(m.types, kube_decoded.types);
    assert_eq!(m.metadata, kube_decoded.metadata);
    assert_eq!(full.indexer().len(), 3);
    assert!(nodes.indexer().is_empty());
    assert_eq!(sim.handle().stats().watches_started, 3);
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_informer_lists_by_api_resource() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = factory(client.clone());
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let cms = f.dynamic_informer(&ar);
    let again = f.dynamic_informer(&ar);
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(cms.indexer().len(), 1);
    let cm: Arc<DynamicObject> = again.indexer().get("default/cm").unwrap();
    assert_eq!(cm.metadata.name.as_deref(), Some("cm"));
    // The informer's own decoder (not kube's derive, see
    // `kinformer_reflector::dynamic_object`) gives what kube gives.
    let api = kube::Api::<DynamicObject>::namespaced_with(client.clone(), "default", &ar);
    assert_eq!(*cm, api.get("cm").await.unwrap());
    assert_eq!(
        cm.types.as_ref().map(|t| t.kind.as_str()),
        Some("ConfigMap")
    );
    assert_eq!(cm.data["data"]["k"], "v");
    assert_eq!(sim.handle().stats().watches_started, 1);
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_every_watch() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = factory(client);
    let pods = f.informer::<Pod>();
    let _ = f.informer::<ConfigMap>();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(sim.handle().stats().watches_open, 2);
    tokio::time::timeout(Duration::from_secs(5), f.shutdown())
        .await
        .expect("shutdown hung");
    let deadline = tokio::time::Instant::now() + SYNC;
    while sim.handle().stats().watches_open != 0 {
        assert!(tokio::time::Instant::now() < deadline, "watches still open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(pods.queue().is_closed());
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_types_on_one_target_get_distinct_names() {
    let (_sim, client) = sim().await;
    let f = factory(client);
    let _typed = f.informer::<Pod>();
    let pods = ApiResource::erase::<Pod>(&());
    let _dynamic = f.dynamic_informer(&pods);
    let names = f.informer_names();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_ne!(names[0], names[1], "metric series would collide");
    assert!(names[1].contains("DynamicObject"), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_config_watches_on_connections_of_its_own() {
    let (sim, _) = sim().await;
    fill(&sim);
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    let f = kinformer::FactoryBuilder::from_config(cfg)
        .unwrap()
        .tuning(kinformer::Tuning::default().threads_per_informer(1))
        .reflector_config(fast())
        .build();
    let pods = f.informer::<Pod>();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(pods.indexer().len(), 3);
    let m = &f.reflector_metrics()[0].1;
    assert!(m.direct_watches >= 1, "{m:?}");
    f.shutdown().await;

    // A configuration kube cannot build a client from is a typed error
    // (here a proxy, without kube's `http-proxy` feature).
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.proxy_url = Some("http://127.0.0.1:9".parse().unwrap());
    let b = kinformer::FactoryBuilder::from_config(cfg);
    assert!(
        matches!(b, Err(kinformer::FactoryError::Client(_))),
        "{:?}",
        b.err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_factory_wait_covers_handler_registrations() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = factory(client);
    let pods = f.informer::<Pod>();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&seen);
    pods.add_event_handler(EventHandlerFns::new().on_add(move |_: &Arc<Pod>, _| {
        std::thread::sleep(Duration::from_millis(150));
        s.fetch_add(1, Ordering::SeqCst);
    }))
    .unwrap();
    f.start().unwrap();
    // Too short for the handler's three slow adds: a timeout naming it.
    let err = f
        .wait_for_cache_sync(Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, FactoryError::SyncTimeout { unsynced, .. } if unsynced.len() == 1),
        "{err:?}"
    );
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 3, "synced means delivered");
    let blocking = f.clone();
    tokio::task::spawn_blocking(move || blocking.wait_for_cache_sync_blocking(SYNC))
        .await
        .unwrap()
        .unwrap();
    f.shutdown().await;
    assert!(matches!(
        f.wait_for_cache_sync(SYNC).await,
        Err(FactoryError::ShutDown)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_leads_to_its_own_reflector() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = factory(client.clone());
    let pods = f.informer::<Pod>();
    let cms = f.informer::<ConfigMap>();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let m = f.reflector_metrics_of(&pods).unwrap();
    assert!(m.lists + m.watch_list_syncs >= 1, "{m:?}");
    let status = f.reflector_status_of(&cms).unwrap();
    assert!(status.stopped.is_none(), "{status:?}");
    assert!(status.last_error.is_none(), "{status:?}");
    assert!(!pods.last_sync_resource_version().is_empty());
    // Another factory's informer is not this one's.
    let other = factory(client);
    assert!(other.reflector_metrics_of(&pods).is_none());
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_managed_fields_skips_them_in_typed_and_metadata_informers() {
    let (sim, client) = sim().await;
    fill(&sim);
    let f = SharedInformerFactory::builder(client)
        .tuning(kinformer::Tuning::default().threads_per_informer(1))
        // Set after: the reflector settings do not undo it.
        .drop_managed_fields()
        .reflector_config(fast())
        .build();
    let pods = f.informer::<Pod>();
    let meta = f.metadata_informer::<Pod>();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    let typed = Lister::new(pods.indexer()).get("default", "web-1").unwrap();
    assert!(typed.metadata.managed_fields.is_none());
    assert!(typed.spec.is_some(), "the rest is decoded");
    assert_eq!(meta.indexer().len(), 3);
    for (_, m) in meta.indexer().snapshot().iter() {
        assert!(m.metadata.managed_fields.is_none(), "{:?}", m.metadata.name);
    }
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reflectors_own_decodes_keep_a_cache_decoded_only_and_a_queue_add_does_not() {
    // Whole release stays on only while this holds: every object of the
    // cache came through the reflector's decoders (LIST, WatchList, watch,
    // typed JSON and metadata-only protobuf alike).
    let (sim, client) = sim().await;
    fill(&sim);
    let f = SharedInformerFactory::builder(client)
        .reflector_config(fast())
        .release_objects_whole::<Pod>()
        .release_objects_whole::<kube::core::PartialObjectMeta<Pod>>()
        .build();
    let pods = f.informer::<Pod>();
    let meta = f.metadata_informer::<Pod>();
    let cms = f.informer::<ConfigMap>();
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    sim.handle()
        .create("pods", pod("default", "web-3", "web", "node-2"))
        .unwrap();
    let deadline = std::time::Instant::now() + SYNC;
    while pods.indexer().len() < 4 || meta.indexer().len() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the watch did not deliver"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(pods.indexer().provenance().decoded_only());
    assert!(meta.indexer().provenance().decoded_only());
    assert!(cms.indexer().provenance().decoded_only());
    // An object given to the queue by other code turns it off for that cache.
    let mut extra = (*pods.indexer().list()[0]).clone();
    extra.metadata.name = Some("from-elsewhere".into());
    pods.queue().add(extra).unwrap();
    assert!(!pods.indexer().provenance().decoded_only());
    assert!(meta.indexer().provenance().decoded_only());
    f.shutdown().await;
}

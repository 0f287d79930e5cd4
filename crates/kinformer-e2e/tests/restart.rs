//! kube-apiserver restarted under running informers, etcd left running:
//!
//! - after a crash (SIGKILL), with objects created and deleted right before it, straight in etcd
//!   while the server is down, and after it is back, the informer resumes, every delete reaches
//!   the handler (as the final state or a tombstone) and the cache equals a fresh LIST;
//! - after a graceful stop (SIGTERM), with etcd compacted past the informer's resourceVersion
//!   while the server is down, the resumed watch is answered 410, the reflector relists, the
//!   deletes it missed arrive as tombstones, and the cache equals a fresh LIST. Secrets are served
//!   without watch cache by the harness (`--watch-cache-sizes=secrets#0`), so the 410 comes from
//!   etcd at once, with no cache window to wait out.
//!
//! These tests stop the server: `cargo xtask e2e` runs this binary after all the others, in a
//! `cargo test` of its own; within it, the tests take [`SERIAL`] so they never overlap.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::serde::Serialize;
use k8s_openapi::serde::de::DeserializeOwned;
use kinformer::{
    BackoffConfig, EventHandlerFns, HandlerRegistration, ReflectorConfig, ReflectorMetrics,
    SharedIndexInformer, SharedInformerFactory,
};
use kinformer_e2e::apiserver::{Apiserver, StopMode};
use kinformer_e2e::{
    compact_etcd, ensure_namespace, etcd_delete, etcd_put, log_hint, real_client, registry_key,
    unique,
};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

/// One restart at a time: every test here stops the shared server.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const SYNC: Duration = Duration::from_secs(60);
/// How long the informer may take to catch up after the server is back (it takes well under a
/// second here).
const CATCH_UP: Duration = Duration::from_secs(60);

/// What the handler was told, by object name.
#[derive(Debug, Default, Clone)]
struct Seen {
    added: BTreeSet<String>,
    /// Per delete notification: whether it was a tombstone.
    deleted: BTreeMap<String, Vec<bool>>,
}

fn record<K>(informer: &SharedIndexInformer<K>) -> (Arc<Mutex<Seen>>, HandlerRegistration<K>)
where
    K: Resource + Send + Sync + 'static,
{
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (s1, s2) = (Arc::clone(&seen), Arc::clone(&seen));
    let reg = informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |o: &Arc<K>, _| {
                    s1.lock()
                        .unwrap()
                        .added
                        .insert(o.meta().name.clone().unwrap());
                })
                .on_delete(move |d| {
                    s2.lock()
                        .unwrap()
                        .deleted
                        .entry(d.object().meta().name.clone().unwrap())
                        .or_default()
                        .push(d.is_tombstone());
                }),
        )
        .unwrap();
    (seen, reg)
}

/// The errors the reflectors recovered from: message, and whether it was a 410 (Expired).
type Errors = Arc<Mutex<Vec<(String, bool)>>>;

/// Fast retries: the server is down for seconds and the test waits for the informer.
fn factory(client: &Client, ns: &str, errors: &Errors) -> SharedInformerFactory {
    let errors = Arc::clone(errors);
    SharedInformerFactory::builder(client.clone())
        .namespace(ns)
        .tuning(kinformer::Tuning::default().runtime(tokio::runtime::Handle::current()))
        .reflector_config(
            ReflectorConfig::default().backoff(
                BackoffConfig::default()
                    .initial(Duration::from_millis(100))
                    .max(Duration::from_secs(1)),
            ),
        )
        .on_watch_error(move |e| {
            errors.lock().unwrap().push((e.to_string(), e.is_expired()));
        })
        .build()
}

fn only_metrics(f: &SharedInformerFactory) -> ReflectorMetrics {
    let mut all = f.reflector_metrics();
    assert_eq!(all.len(), 1, "one informer expected: {all:?}");
    all.remove(0).1
}

/// `complaint`, with the reflector's counters and its first and last errors.
fn diagnose(complaint: String, f: &SharedInformerFactory, errors: &Errors) -> String {
    let errors = errors.lock().unwrap();
    let n = errors.len();
    let last = n.saturating_sub(5).max(5);
    format!(
        "{complaint}\n  reflector: {:?}\n  {n} errors, first: {:?}\n  last: {:?}",
        only_metrics(f),
        &errors[..n.min(5)],
        &errors[last.min(n)..]
    )
}

/// Polls `check` until it returns `Ok`, or panics after `timeout` with its last complaint.
async fn wait_for<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(()) => return,
            Err(e) => e,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not reached after {timeout:?}: {last}\n{}",
            log_hint()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// name → resourceVersion.
fn versions<'a, K: Resource + 'a>(
    objs: impl IntoIterator<Item = &'a K>,
) -> BTreeMap<String, String> {
    objs.into_iter()
        .map(|o| (o.name_any(), o.resource_version().unwrap_or_default()))
        .collect()
}

/// `Ok` when the informer's cache holds exactly the objects of a fresh LIST, at the same
/// resourceVersions.
async fn cache_equals_list<K>(informer: &SharedIndexInformer<K>, api: &Api<K>) -> Result<(), String>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("LIST failed: {e}"))?;
    let listed = versions(listed.items.iter());
    let cached_objs = informer.indexer().list();
    let cached = versions(cached_objs.iter().map(|o| &**o));
    if cached == listed {
        Ok(())
    } else {
        Err(format!("cache {cached:?}\n  != LIST {listed:?}"))
    }
}

/// `Ok` once the handler has heard every delete of `expected` and has nothing left to deliver.
fn deletes_delivered<K: Send + Sync + 'static>(
    seen: &Mutex<Seen>,
    reg: &HandlerRegistration<K>,
    expected: &BTreeSet<String>,
) -> Result<(), String> {
    let deleted: BTreeSet<String> = seen.lock().unwrap().deleted.keys().cloned().collect();
    let missing: Vec<&String> = expected.difference(&deleted).collect();
    let backlog = reg.stats().backlog;
    if missing.is_empty() && backlog == 0 {
        Ok(())
    } else {
        Err(format!(
            "deletes not delivered: {missing:?}; handler backlog {backlog}"
        ))
    }
}

/// Every deleted object was reported deleted exactly once, nothing else was.
fn assert_deletes(seen: &Seen, expected: &BTreeSet<String>) {
    let deleted: BTreeSet<String> = seen.deleted.keys().cloned().collect();
    assert_eq!(&deleted, expected, "objects reported deleted");
    for (name, notes) in &seen.deleted {
        assert_eq!(
            notes.len(),
            1,
            "{name} reported deleted {} times",
            notes.len()
        );
    }
}

fn cm(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": value}})).unwrap()
}

fn secret(name: &str, value: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name}, "type": "Opaque",
        "data": {"k": ByteString(value.as_bytes().to_vec())}
    }))
    .unwrap()
}

/// `obj` as kube-apiserver would store it (apiVersion, kind, namespace, uid, creationTimestamp;
/// no resourceVersion: etcd's revision is the object's version), as JSON, which the server reads
/// from storage as well as its protobuf encoding.
fn storage_json<K: Resource + Serialize>(mut obj: K, ns: &str) -> Vec<u8> {
    let meta = obj.meta_mut();
    meta.namespace = Some(ns.into());
    meta.uid = Some(uuid::Uuid::new_v4().to_string());
    meta.creation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    meta.resource_version = None;
    serde_json::to_vec(&obj).unwrap()
}

fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i:02}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn informer_resumes_after_an_apiserver_restart_with_every_delete_reported() {
    let _serial = SERIAL.lock().await;
    let t0 = Instant::now();
    let mut apiserver = Apiserver::from_env().unwrap();
    apiserver.ensure_running().await.unwrap();
    let client = real_client(false).await.unwrap();
    let ns = unique("restart");
    ensure_namespace(&client, &ns).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let pre = names("pre", 0..20);
    for n in &pre {
        cms.create(&PostParams::default(), &cm(n, "v0"))
            .await
            .unwrap();
    }
    let errors = Arc::new(Mutex::new(Vec::new()));
    let f = factory(&client, &ns, &errors);
    let informer = f.informer::<ConfigMap>();
    let (seen, reg) = record(&informer);
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(informer.indexer().len(), pre.len());
    let before = only_metrics(&f);

    // Right before the crash, without waiting: the watch may or may not deliver these.
    let mut deleted = BTreeSet::new();
    for n in &pre[0..5] {
        cms.delete(n, &DeleteParams::default()).await.unwrap();
        deleted.insert(n.clone());
    }
    for n in names("burst", 0..5) {
        cms.create(&PostParams::default(), &cm(&n, "v0"))
            .await
            .unwrap();
    }
    let stopped = Instant::now();
    apiserver.stop(StopMode::Kill).await.unwrap();
    let stop_took = stopped.elapsed();

    // While the server is down, the second path: straight into etcd. Deletes, a create, and an
    // update of an object the informer holds.
    for n in &pre[5..8] {
        let key = registry_key("configmaps", &ns, n);
        assert_eq!(etcd_delete(&key).await.unwrap(), 1, "{key} not in etcd");
        deleted.insert(n.clone());
    }
    for n in names("etcd", 0..2) {
        let key = registry_key("configmaps", &ns, &n);
        etcd_put(&key, &storage_json(cm(&n, "etcd"), &ns))
            .await
            .unwrap();
    }
    let mut updated = (*informer.indexer().get(&format!("{ns}/{}", pre[8])).unwrap()).clone();
    updated.data = Some([("k".to_string(), "etcd-update".to_string())].into());
    updated.metadata.resource_version = None;
    etcd_put(
        &registry_key("configmaps", &ns, &pre[8]),
        &serde_json::to_vec(&updated).unwrap(),
    )
    .await
    .unwrap();

    let start_took = apiserver.start().await.unwrap();
    let downtime = stopped.elapsed();
    let back = Instant::now();

    // After the restart, through the new server (a new client: no pooled connection to the old one).
    let client = real_client(false).await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    cms.delete(&pre[9], &DeleteParams::default()).await.unwrap();
    deleted.insert(pre[9].clone());
    for n in names("after", 0..3) {
        cms.create(&PostParams::default(), &cm(&n, "v0"))
            .await
            .unwrap();
    }
    let patch = json!({"data": {"k": "after-update"}});
    cms.patch(&pre[10], &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();

    wait_for("cache equals a fresh LIST", CATCH_UP, || async {
        cache_equals_list(&informer, &cms)
            .await
            .map_err(|e| diagnose(e, &f, &errors))
    })
    .await;
    let caught_up = back.elapsed();
    wait_for("every delete delivered", CATCH_UP, || async {
        deletes_delivered(&seen, &reg, &deleted)
    })
    .await;

    let seen = seen.lock().unwrap().clone();
    assert_deletes(&seen, &deleted);
    let cached: BTreeSet<String> = informer
        .indexer()
        .list()
        .iter()
        .map(|o| o.name_any())
        .collect();
    assert!(
        cached.is_subset(&seen.added),
        "objects cached but never reported added: {:?}",
        cached.difference(&seen.added).collect::<Vec<_>>()
    );
    for (name, value) in [(&pre[8], "etcd-update"), (&pre[10], "after-update")] {
        let o = informer.indexer().get(&format!("{ns}/{name}")).unwrap();
        assert_eq!(o.data.as_ref().unwrap()["k"], value, "{name}");
    }
    for n in ["burst-04", "etcd-00", "etcd-01", "after-02"] {
        assert!(cached.contains(n), "{n} created but not cached");
    }
    let after = only_metrics(&f);
    assert!(
        after.watch_restarts > before.watch_restarts,
        "the informer never watched again: before {before:?}, after {after:?}"
    );
    let tombstones = seen.deleted.values().flatten().filter(|t| **t).count();
    eprintln!(
        "restart: stop {stop_took:.1?}, start {start_took:.1?}, downtime {downtime:.1?}; cache \
         equal to LIST {caught_up:.1?} after the restart; {} deletes ({tombstones} tombstones); \
         reflector: {} relists, {} re-watches, {} errors; test {:.1?}",
        seen.deleted.len(),
        after.relists,
        after.watch_restarts,
        after.errors,
        t0.elapsed()
    );
    eprintln!("errors: {:?}", errors.lock().unwrap());
    f.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn resume_from_a_compacted_resource_version_relists_without_losing_deletes() {
    let _serial = SERIAL.lock().await;
    let t0 = Instant::now();
    let mut apiserver = Apiserver::from_env().unwrap();
    apiserver.ensure_running().await.unwrap();
    let client = real_client(false).await.unwrap();
    let ns = unique("too-old");
    ensure_namespace(&client, &ns).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let pre = names("s", 0..10);
    for n in &pre {
        secrets
            .create(&PostParams::default(), &secret(n, "v0"))
            .await
            .unwrap();
    }
    let errors = Arc::new(Mutex::new(Vec::new()));
    let f = factory(&client, &ns, &errors);
    let informer = f.informer::<Secret>();
    let (seen, reg) = record(&informer);
    f.start().unwrap();
    f.wait_for_cache_sync(SYNC).await.unwrap();
    assert_eq!(informer.indexer().len(), pre.len());
    // One event through the watch: when the stop ends it, the reflector resumes it from its last
    // resourceVersion (a watch ending without any event soon after it opened would relist
    // instead, as client-go does). The graceful stop closes the listener before it cuts the
    // watch, so the resume attempts find the port closed (connection refused: back off and
    // resume again, no relist) until the server is back.
    secrets
        .create(&PostParams::default(), &secret("warm", "v0"))
        .await
        .unwrap();
    wait_for("the watch delivers an event", SYNC, || async {
        match informer.indexer().get(&format!("{ns}/warm")) {
            Some(_) => Ok(()),
            None => Err("warm not cached".into()),
        }
    })
    .await;
    let before = only_metrics(&f);

    // Right before the stop, without waiting.
    let mut deleted = BTreeSet::new();
    for n in &pre[0..2] {
        secrets.delete(n, &DeleteParams::default()).await.unwrap();
        deleted.insert(n.clone());
    }
    for n in names("n", 0..2) {
        secrets
            .create(&PostParams::default(), &secret(&n, "v0"))
            .await
            .unwrap();
    }
    let stopped = Instant::now();
    apiserver.stop(StopMode::Graceful).await.unwrap();

    // While the server is down: deletes and a create straight in etcd, then a compaction past all
    // of it, so the informer's resourceVersion is gone from storage.
    let mut etcd_deleted = BTreeSet::new();
    for n in &pre[2..5] {
        let key = registry_key("secrets", &ns, n);
        assert_eq!(etcd_delete(&key).await.unwrap(), 1, "{key} not in etcd");
        etcd_deleted.insert(n.clone());
    }
    deleted.extend(etcd_deleted.iter().cloned());
    etcd_put(
        &registry_key("secrets", &ns, "e-00"),
        &storage_json(secret("e-00", "etcd"), &ns),
    )
    .await
    .unwrap();
    let last_rv: u64 = only_metrics(&f).last_resource_version.parse().unwrap();
    let compacted = compact_etcd().await.unwrap();
    // etcd keeps revision `compacted`; a watch from `last_rv` starts at `last_rv + 1`.
    assert!(
        last_rv + 1 < compacted,
        "compaction at {compacted} does not remove the informer's resourceVersion {last_rv}"
    );

    let start_took = apiserver.start().await.unwrap();
    let downtime = stopped.elapsed();
    let back = Instant::now();

    // After the restart.
    let client = real_client(false).await.unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    secrets
        .delete(&pre[5], &DeleteParams::default())
        .await
        .unwrap();
    deleted.insert(pre[5].clone());
    secrets
        .create(&PostParams::default(), &secret("a-00", "v0"))
        .await
        .unwrap();

    wait_for("cache equals a fresh LIST", CATCH_UP, || async {
        cache_equals_list(&informer, &secrets)
            .await
            .map_err(|e| diagnose(e, &f, &errors))
    })
    .await;
    let caught_up = back.elapsed();
    wait_for("every delete delivered", CATCH_UP, || async {
        deletes_delivered(&seen, &reg, &deleted)
    })
    .await;

    let after = only_metrics(&f);
    let errors = errors.lock().unwrap().clone();
    assert!(
        errors.iter().any(|(_, expired)| *expired),
        "no 410 reported; errors: {errors:?}"
    );
    assert!(
        after.relists > before.relists,
        "no relist: before {before:?}, after {after:?}; errors: {errors:?}"
    );
    let seen = seen.lock().unwrap().clone();
    assert_deletes(&seen, &deleted);
    // Deleted while the server was down, their events compacted away: only the relist can find
    // them, as tombstones.
    for n in &etcd_deleted {
        assert_eq!(seen.deleted[n], [true], "{n} not a tombstone");
    }
    for n in ["e-00", "a-00", "n-00", "n-01"] {
        assert!(seen.added.contains(n), "{n} never reported added");
    }
    eprintln!(
        "too old: stop to ready {downtime:.1?} (start {start_took:.1?}); compacted at \
         {compacted}, informer at {last_rv}; cache equal to LIST {caught_up:.1?} after the \
         restart; reflector: {} relists, {} re-watches; test {:.1?}",
        after.relists,
        after.watch_restarts,
        t0.elapsed()
    );
    eprintln!("errors: {errors:?}");
    f.shutdown().await;
}

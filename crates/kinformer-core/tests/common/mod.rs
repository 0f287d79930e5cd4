//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::{
    DeletedObject, Delta, DeltaFifo, DeltaType, Indexer, ObjectKey, Popped, SharedIndexInformer,
};
use kube_core::{ObjectMeta, Resource};

pub mod store;

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

/// A ConfigMap whose `zone` data value is `zone`.
pub fn cm_zone(name: &str, rv: u64, zone: &str) -> ConfigMap {
    let mut o = cm(name, rv);
    o.data = Some([("zone".to_string(), zone.to_string())].into());
    o
}

/// Threads a digest function ran on.
pub type Threads = Arc<std::sync::Mutex<Vec<std::thread::ThreadId>>>;

/// An index of ConfigMaps by their `zone` data value that counts how often
/// its values are computed; with `digested_on`, it declares the data as its
/// inputs and records the threads its digest runs on.
pub fn zone_index(
    computed: &Arc<AtomicUsize>,
    digested_on: Option<&Threads>,
) -> kinformer_core::IndexFn<ConfigMap> {
    use std::hash::Hash;
    let computed = Arc::clone(computed);
    let f = kinformer_core::IndexFn::new(move |o: &ConfigMap| {
        computed.fetch_add(1, Ordering::Relaxed);
        o.data
            .iter()
            .flatten()
            .filter(|(k, _)| *k == "zone")
            .map(|(_, v)| v.clone())
            .collect()
    });
    let Some(digested_on) = digested_on.cloned() else {
        return f;
    };
    f.with_digest(move |o: &ConfigMap, mut h| {
        digested_on
            .lock()
            .unwrap()
            .push(std::thread::current().id());
        o.data.hash(&mut h)
    })
}

pub fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some("ns"), name)
}

pub fn rv(o: &ConfigMap) -> u64 {
    rv_of(o)
}

/// The resource version of any object, as a number (0 if absent).
pub fn rv_of<K: Resource>(o: &K) -> u64 {
    o.meta()
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

/// A ConfigMap `namespace/name` at resource version `rv` with labels.
pub fn cm_in(namespace: &str, name: &str, rv: u64, labels: &[(&str, &str)]) -> ConfigMap {
    let mut o = cm_labels(name, rv, labels);
    o.metadata.namespace = Some(namespace.into());
    o
}

/// One call a [`History`] handler received, reduced to keys and resource versions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Seen {
    /// `on_add(obj, is_in_initial_list)`.
    Add { key: String, rv: u64, initial: bool },
    /// `on_update(old, new)`.
    Update { key: String, old: u64, new: u64 },
    /// `on_delete(obj)`: `rv` of the final state or of the tombstone's last known state.
    Delete {
        key: String,
        rv: u64,
        tombstone: bool,
    },
}

impl Seen {
    pub fn key(&self) -> &str {
        match self {
            Seen::Add { key, .. } | Seen::Update { key, .. } | Seen::Delete { key, .. } => key,
        }
    }
}

/// The calls a handler received, in delivery order (shared with the handler).
#[derive(Clone, Default)]
pub struct History(Arc<parking_lot::Mutex<Vec<Seen>>>);

impl History {
    /// A handler that appends every call to this history.
    pub fn handler(&self) -> kinformer_core::EventHandlerFns<ConfigMap> {
        let (a, u, d) = (self.0.clone(), self.0.clone(), self.0.clone());
        let key = |o: &ConfigMap| ObjectKey::of(o).unwrap().to_string();
        kinformer_core::EventHandlerFns::new()
            .on_add(move |o, initial| {
                a.lock().push(Seen::Add {
                    key: key(o),
                    rv: rv(o),
                    initial,
                })
            })
            .on_update(move |old, new| {
                u.lock().push(Seen::Update {
                    key: key(new),
                    old: rv(old),
                    new: rv(new),
                })
            })
            .on_delete(move |del| {
                let k = match del {
                    DeletedObject::Final(o) => key(o),
                    DeletedObject::Unknown(t) => t.key.to_string(),
                };
                d.lock().push(Seen::Delete {
                    key: k,
                    rv: rv(del.object()),
                    tombstone: del.is_tombstone(),
                })
            })
    }

    /// A copy of the calls so far.
    pub fn events(&self) -> Vec<Seen> {
        self.0.lock().clone()
    }

    fn saw(&self, want: &Seen) -> bool {
        self.0.lock().iter().any(|s| s == want)
    }
}

/// Namespace of the fence object [`drain`] pushes through the informer.
pub const FENCE_NAMESPACE: &str = "zz-fence";

fn wait_quiet<K: Resource + Send + Sync + 'static>(
    inf: &SharedIndexInformer<K>,
    timeout: Duration,
) {
    let start = Instant::now();
    loop {
        let m = inf.metrics();
        if m.queue_depth == 0
            && inf.queue().tracked_keys() == 0
            && m.handlers.iter().all(|h| h.backlog == 0)
        {
            return;
        }
        assert!(
            start.elapsed() < timeout,
            "informer did not drain: queue depth {}, tracked keys {}, backlogs {:?}",
            m.queue_depth,
            inf.queue().tracked_keys(),
            m.handlers.iter().map(|h| h.backlog).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Waits until the informer has applied everything queued and every handler
/// in `histories` has received every notification.
///
/// The queue being empty with no key tracked means every batch was applied
/// and its notifications pushed; a handler backlog of 0 still allows one
/// entry taken but not yet delivered, so a fence object (namespace
/// [`FENCE_NAMESPACE`], resource versions `fence_rv` and `fence_rv + 1`) is
/// then added and deleted: a registration delivers keys in the order they
/// entered its backlog, so once a handler saw the fence's delete it has seen
/// everything before. The fence leaves nothing in the cache; callers filter
/// its events out with [`is_fence`].
pub fn drain(inf: &SharedIndexInformer<ConfigMap>, histories: &[&History], fence_rv: u64) {
    drain_store::<store::Plain>(inf, histories, fence_rv);
}

/// [`drain`] for the informer of a [`store::Store`].
pub fn drain_store<S: store::Store>(
    inf: &SharedIndexInformer<S::Stored>,
    histories: &[&History],
    fence_rv: u64,
) {
    const T: Duration = Duration::from_secs(20);
    wait_quiet(inf, T);
    let fence_key = format!("{FENCE_NAMESPACE}/fence");
    inf.queue()
        .add(S::wrap(cm_in(FENCE_NAMESPACE, "fence", fence_rv, &[])))
        .unwrap();
    let added = Seen::Add {
        key: fence_key.clone(),
        rv: fence_rv,
        initial: false,
    };
    wait_until(T, "every handler saw the fence", || {
        histories.iter().all(|h| h.saw(&added))
    });
    inf.queue()
        .delete(S::wrap(cm_in(FENCE_NAMESPACE, "fence", fence_rv + 1, &[])))
        .unwrap();
    let deleted = Seen::Delete {
        key: fence_key,
        rv: fence_rv + 1,
        tombstone: false,
    };
    wait_until(T, "every handler saw the fence's delete", || {
        histories.iter().all(|h| h.saw(&deleted))
    });
    wait_quiet(inf, T);
}

/// Whether an event is about the fence object of [`drain`].
pub fn is_fence(s: &Seen) -> bool {
    s.key().starts_with(FENCE_NAMESPACE)
}

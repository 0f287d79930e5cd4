//! Property test: random add/update/delete/replace/resync sequences (plus
//! handlers registered late) applied to a real `SharedIndexInformer` and to a
//! plain model of the API server's truth. After the informer drains, the
//! cache, the indexes and every handler's history must agree with the model.
//! Run against both stores (`common::store`): the plain one and the compact
//! one.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use common::store::{Packed, Plain, Store};
use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::{
    HandlerRegistration, LABEL_INDEX, NAMESPACE_INDEX, OWNER_UID_INDEX, SharedIndexInformer,
    Snapshot, builtin_indexers, label_value,
};
use kube_core::{Expression, Resource, Selector};
use proptest::prelude::*;

const NAMESPACES: [&str; 2] = ["ns-a", "ns-b"];
const NAMES: [&str; 3] = ["x", "y", "z"];
const KEYS: usize = NAMESPACES.len() * NAMES.len();
const MAX_LATE_HANDLERS: usize = 2;
const TIERS: [&str; 3] = ["web", "db", "cache"];

/// One step of the producer.
#[derive(Debug, Clone)]
enum Op {
    /// A watch `ADDED` (an upsert for the informer even if the key exists).
    Add(usize),
    /// A watch `MODIFIED`.
    Update(usize),
    /// A watch `DELETED` (skipped when the key does not exist: the API
    /// server never sends one).
    Delete(usize),
    /// A relist returning these keys; `true` gives the object a new
    /// resource version (it changed while the watch was down).
    Replace(Vec<(usize, bool)>),
    /// A periodic resync of the queue.
    Resync,
    /// Registers a handler now; with `drain_first` only once the informer
    /// is idle, so its start-up replay is exactly the model.
    LateHandler { drain_first: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..KEYS).prop_map(Op::Add),
        4 => (0..KEYS).prop_map(Op::Update),
        3 => (0..KEYS).prop_map(Op::Delete),
        2 => proptest::collection::vec((0..KEYS, any::<bool>()), 0..=KEYS).prop_map(Op::Replace),
        1 => Just(Op::Resync),
        1 => any::<bool>().prop_map(|drain_first| Op::LateHandler { drain_first }),
    ]
}

/// The key string of key index `i`.
fn key_str(i: usize) -> String {
    format!(
        "{}/{}",
        NAMESPACES[i % NAMESPACES.len()],
        NAMES[i / NAMESPACES.len()]
    )
}

/// The object of key `i` at `rv`. Its labels are a function of `rv`, so two
/// objects with one resource version are equal (as on a real API server).
fn object(i: usize, rv: u64) -> ConfigMap {
    let tier = TIERS[(rv % 3) as usize];
    let labels: Vec<(&str, &str)> = match rv % 4 {
        0 => Vec::new(),
        1 => vec![("tier", tier)],
        _ => vec![("tier", tier), ("app", "k")],
    };
    cm_in(
        NAMESPACES[i % NAMESPACES.len()],
        NAMES[i / NAMESPACES.len()],
        rv,
        &labels,
    )
}

/// The API server's truth and what the test needs to judge histories.
#[derive(Default)]
struct Model {
    /// key → resource version.
    truth: BTreeMap<String, u64>,
    last_rv: u64,
    /// key → resource version at which its current incarnation appeared.
    born: BTreeMap<String, u64>,
    /// Each removal from the truth.
    removals: Vec<Removal>,
    /// Whether any object reached the queue (add/update/delete/replace).
    populated: bool,
    /// Keys of the first replace, when it came before any other change.
    first_list: Option<BTreeSet<String>>,
}

/// An object's removal from the truth.
struct Removal {
    key: String,
    /// Index of the op that removed it.
    at: usize,
    /// The resource versions of the removed incarnation: from its creation
    /// to its last state.
    rvs: std::ops::RangeInclusive<u64>,
}

impl Model {
    fn next_rv(&mut self) -> u64 {
        self.last_rv += 1;
        self.last_rv
    }

    /// Sets `key` to `rv` in the truth, noting a new incarnation.
    fn set(&mut self, key: String, rv: u64) {
        if self.truth.insert(key.clone(), rv).is_none() {
            self.born.insert(key, rv);
        }
    }

    /// Removes `key` from the truth (op `at`), noting the removal.
    fn remove(&mut self, key: &str, at: usize) -> bool {
        let Some(last) = self.truth.remove(key) else {
            return false;
        };
        let born = self.born.remove(key).unwrap_or(last);
        self.removals.push(Removal {
            key: key.to_string(),
            at,
            rvs: born..=last,
        });
        true
    }
}

struct Watcher<K> {
    history: History,
    reg: HandlerRegistration<K>,
    /// Index of the first op applied after the registration.
    registered_at: usize,
    late: bool,
    /// For a handler registered on an idle informer: the cache it must replay.
    replay: Option<BTreeMap<String, u64>>,
}

fn register<S: Store>(
    store: &S,
    registered_at: usize,
    late: bool,
    replay: Option<BTreeMap<String, u64>>,
) -> Watcher<S::Stored> {
    let history = History::default();
    let reg = store.add_handler(history.handler()).unwrap();
    Watcher {
        history,
        reg,
        registered_at,
        late,
        replay,
    }
}

/// The cache as key → resource version, each object decoded as a reader
/// would see it.
fn cache_of<S: Store>(snap: &Snapshot<S::Stored>) -> BTreeMap<String, u64> {
    snap.iter()
        .map(|(k, o)| {
            let whole = S::view(o);
            assert_eq!(rv(&whole), rv_of(&**o), "decoded object of {k}");
            (k.to_string(), rv(&whole))
        })
        .collect()
}

fn run<S: Store>(threads: usize, ops: &[Op]) {
    let store = S::build(
        SharedIndexInformer::<S::Stored>::builder()
            .name("model")
            .threads(threads)
            .batch_size(4)
            .indexers(builtin_indexers()),
    );
    let inf = store.informer();
    let mut model = Model::default();
    let mut watchers = vec![
        register(&store, 0, false, None),
        register(&store, 0, false, None),
    ];
    inf.start().unwrap();
    let q = inf.queue();

    for (i, op) in ops.iter().enumerate() {
        match op {
            Op::Add(k) | Op::Update(k) => {
                let rv = model.next_rv();
                let obj = S::wrap(object(*k, rv));
                if matches!(op, Op::Add(_)) {
                    q.add(obj).unwrap();
                } else {
                    q.update(obj).unwrap();
                }
                model.set(key_str(*k), rv);
                model.populated = true;
            }
            Op::Delete(k) => {
                if model.remove(&key_str(*k), i) {
                    // The final state of a deleted object has a new resource version.
                    let rv = model.next_rv();
                    q.delete(S::wrap(object(*k, rv))).unwrap();
                    model.populated = true;
                }
            }
            Op::Replace(list) => {
                let mut objects = Vec::new();
                let mut listed = BTreeMap::new();
                for &(k, changed) in list {
                    let rv = match model.truth.get(&key_str(k)) {
                        Some(&rv) if !changed => rv,
                        _ => model.next_rv(),
                    };
                    objects.push(S::wrap(object(k, rv)));
                    // A key listed twice: the last one wins.
                    listed.insert(key_str(k), rv);
                }
                let list_rv = model.next_rv();
                q.replace(objects, &list_rv.to_string()).unwrap();
                let gone: Vec<String> = model
                    .truth
                    .keys()
                    .filter(|key| !listed.contains_key(*key))
                    .cloned()
                    .collect();
                for key in gone {
                    model.remove(&key, i);
                }
                if !model.populated {
                    model.first_list = Some(listed.keys().cloned().collect());
                }
                for (key, rv) in listed {
                    model.set(key, rv);
                }
                model.populated = true;
            }
            Op::Resync => {
                q.resync();
            }
            Op::LateHandler { drain_first } => {
                if watchers.iter().filter(|w| w.late).count() >= MAX_LATE_HANDLERS {
                    continue;
                }
                let replay = if *drain_first {
                    let histories: Vec<&History> = watchers.iter().map(|w| &w.history).collect();
                    let fence_rv = model.next_rv();
                    model.next_rv();
                    drain_store::<S>(inf, &histories, fence_rv);
                    // The fence went through the queue.
                    model.populated = true;
                    assert_eq!(
                        cache_of::<S>(&inf.indexer().snapshot()),
                        model.truth,
                        "cache before a late registration"
                    );
                    Some(model.truth.clone())
                } else {
                    None
                };
                watchers.push(register(&store, i + 1, true, replay));
            }
        }
    }

    let histories: Vec<&History> = watchers.iter().map(|w| &w.history).collect();
    let fence_rv = model.next_rv();
    // The fence (see `drain`) populates the queue: judge has_synced before it.
    common::wait_until(std::time::Duration::from_secs(20), "queue empty", || {
        q.tracked_keys() == 0
    });
    assert_eq!(
        inf.has_synced(),
        model.populated,
        "has_synced once everything queued was applied"
    );
    drain_store::<S>(inf, &histories, fence_rv);

    // (a) The cache equals the model.
    let snap = inf.indexer().snapshot();
    let cache = cache_of::<S>(&snap);
    assert_eq!(cache, model.truth, "cache vs model after {ops:?}");

    // (b) Every handler's history is consistent with the model.
    for (h, w) in watchers.iter().enumerate() {
        check_history(h, w, &model, &cache);
        assert!(w.reg.has_synced(), "handler {h} synced after draining");
    }

    // (c) Indexes agree with a scan of the cache.
    check_indexes(&snap);

    let m = inf.metrics();
    assert_eq!(m.handler_panics, 0);
    assert_eq!(m.fifo.key_errors, 0);
    assert!(m.handlers.iter().all(|h| h.backlog == 0));
    inf.shutdown();
}

fn check_history<K>(h: usize, w: &Watcher<K>, model: &Model, cache: &BTreeMap<String, u64>) {
    let events: Vec<Seen> = w
        .history
        .events()
        .into_iter()
        .filter(|e| !is_fence(e))
        .collect();
    let ctx = |what: &str| format!("handler {h} (late: {}): {what}; history {events:?}", w.late);

    let mut rest = &events[..];
    if let Some(replay) = &w.replay {
        // Registered on an idle informer: the replay comes first and is the cache.
        assert!(rest.len() >= replay.len(), "{}", ctx("replay too short"));
        let (head, tail) = rest.split_at(replay.len());
        let got: BTreeSet<Seen> = head.iter().cloned().collect();
        let want: BTreeSet<Seen> = replay
            .iter()
            .map(|(k, &rv)| Seen::Add {
                key: k.clone(),
                rv,
                initial: true,
            })
            .collect();
        assert_eq!(got, want, "{}", ctx("start-up replay"));
        rest = tail;
    }

    // Replay the notifications onto an empty map.
    let mut view: BTreeMap<String, u64> = w.replay.clone().unwrap_or_default();
    let mut last_rv: HashMap<String, u64> = view.clone().into_iter().collect();
    let mut in_replay = w.late && w.replay.is_none();
    for e in rest {
        let rv_now = match e {
            Seen::Add { key, rv, initial } => {
                assert!(
                    !view.contains_key(key),
                    "{}",
                    ctx(&format!("add of {key} which the handler already holds"))
                );
                if *initial {
                    // Only the first list and a late handler's replay are initial.
                    let in_first = model.first_list.as_ref().is_some_and(|l| l.contains(key));
                    assert!(
                        in_first || in_replay,
                        "{}",
                        ctx(&format!("add of {key} marked initial"))
                    );
                } else {
                    in_replay = false;
                }
                view.insert(key.clone(), *rv);
                *rv
            }
            Seen::Update { key, old, new } => {
                in_replay = false;
                assert_eq!(
                    view.get(key),
                    Some(old),
                    "{}",
                    ctx(&format!(
                        "update of {key}: old disagrees with what was seen"
                    ))
                );
                view.insert(key.clone(), *new);
                *new
            }
            Seen::Delete { key, rv, .. } => {
                in_replay = false;
                // Never a delete of an object the handler was not shown (an
                // add coalesced away takes its delete with it).
                let held = view.remove(key);
                assert!(
                    held.is_some(),
                    "{}",
                    ctx(&format!("delete of {key}, which the handler does not hold"))
                );
                assert!(
                    held.is_some_and(|held| *rv >= held),
                    "{}",
                    ctx(&format!("delete of {key} older than the state held"))
                );
                *rv
            }
        };
        let last = last_rv.entry(e.key().to_string()).or_insert(0);
        assert!(
            rv_now >= *last,
            "{}",
            ctx(&format!("resource versions of {} went backwards", e.key()))
        );
        *last = rv_now;
    }
    assert_eq!(&view, cache, "{}", ctx("replayed history vs cache"));

    // Every removal after the registration of an object the handler was
    // shown reached it (one never shown may leave no trace: its add and
    // delete coalesce away together).
    for Removal { key, at, rvs } in &model.removals {
        if *at < w.registered_at {
            continue;
        }
        let shown = events.iter().position(|e| match e {
            Seen::Add { key: k, rv, .. }
            | Seen::Update {
                key: k, new: rv, ..
            } => k == key && rvs.contains(rv),
            Seen::Delete { .. } => false,
        });
        if let Some(shown) = shown {
            assert!(
                events[shown..]
                    .iter()
                    .any(|e| matches!(e, Seen::Delete { key: k, .. } if k == key)),
                "{}",
                ctx(&format!(
                    "{key} (resource versions {rvs:?}) shown, removed by op {at}, never deleted"
                ))
            );
        }
    }
}

fn check_indexes<K: Resource>(snap: &Snapshot<K>) {
    let mut by_ns: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut by_label: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (k, o) in snap.iter() {
        let ns = o.meta().namespace.clone().unwrap();
        by_ns.entry(ns).or_default().insert(k.to_string());
        for (lk, lv) in o.meta().labels.iter().flatten() {
            by_label
                .entry(label_value(lk, lv))
                .or_default()
                .insert(k.to_string());
        }
    }
    for (name, expected) in [(NAMESPACE_INDEX, &by_ns), (LABEL_INDEX, &by_label)] {
        let values: BTreeSet<String> = snap.index_values(name).unwrap().into_iter().collect();
        // Values whose set became empty are gone.
        assert_eq!(
            values,
            expected.keys().cloned().collect(),
            "values of index {name}"
        );
        for (value, keys) in expected {
            let got: BTreeSet<String> = snap
                .index_keys(name, value)
                .unwrap()
                .iter()
                .map(|k| k.to_string())
                .collect();
            assert_eq!(&got, keys, "index {name} value {value}");
            let objs: BTreeSet<String> = snap
                .by_index(name, value)
                .unwrap()
                .iter()
                .map(|o| kinformer_core::ObjectKey::of(&**o).unwrap().to_string())
                .collect();
            assert_eq!(&objs, keys, "by_index {name} value {value}");
        }
    }
    assert!(snap.index_values(OWNER_UID_INDEX).unwrap().is_empty());
    // Selector reads through the label index agree with the scan too.
    for tier in TIERS {
        let sel: Selector = Expression::Equal("tier".into(), tier.into()).into();
        let got: BTreeSet<String> = snap
            .list_by_labels(&sel)
            .iter()
            .map(|o| kinformer_core::ObjectKey::of(&**o).unwrap().to_string())
            .collect();
        let want = by_label
            .get(&label_value("tier", tier))
            .cloned()
            .unwrap_or_default();
        assert_eq!(got, want, "selector tier={tier}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        ..ProptestConfig::default()
    })]

    #[test]
    fn informer_matches_model_one_thread(ops in proptest::collection::vec(op(), 0..40)) {
        run::<Plain>(1, &ops);
    }

    #[test]
    fn informer_matches_model_two_threads(ops in proptest::collection::vec(op(), 0..40)) {
        run::<Plain>(2, &ops);
    }

    #[test]
    fn compact_informer_matches_model_one_thread(ops in proptest::collection::vec(op(), 0..40)) {
        run::<Packed>(1, &ops);
    }

    #[test]
    fn compact_informer_matches_model_two_threads(ops in proptest::collection::vec(op(), 0..40)) {
        run::<Packed>(2, &ops);
    }
}

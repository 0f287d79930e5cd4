//! Indexer behaviours: reads, indexes, snapshots.
#![allow(clippy::unwrap_used)]

mod common;

use std::hash::Hash;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::{
    IndexFn, Indexer, InformerError, LABEL_INDEX, NAMESPACE_INDEX, builtin_indexers,
};
use kube_core::{Expression, Selector};

fn sorted_names(objs: Vec<Arc<ConfigMap>>) -> Vec<String> {
    let mut v: Vec<String> = objs
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn get_list_and_namespace_index() {
    let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
    seed_cache(&indexer, &[cm("a", 1), cm("b", 2)]);
    assert_eq!(indexer.len(), 2);
    assert_eq!(rv(&indexer.get("ns/a").unwrap()), 1);
    assert_eq!(rv(&indexer.get_by_name(Some("ns"), "b").unwrap()), 2);
    assert_eq!(
        sorted_names(indexer.by_index(NAMESPACE_INDEX, "ns").unwrap()),
        ["a", "b"]
    );
    assert_eq!(sorted_names(indexer.namespaced("ns").list()), ["a", "b"]);
    assert!(indexer.namespaced("other").list().is_empty());
    assert_eq!(
        indexer.by_index("nope", "x"),
        Err(InformerError::NoSuchIndex("nope".into()))
    );
}

#[test]
fn multi_valued_index_functions() {
    let indexer: Indexer<ConfigMap> = Indexer::new(vec![(
        "letters".into(),
        IndexFn::new(|o: &ConfigMap| {
            o.metadata
                .name
                .as_deref()
                .unwrap_or("")
                .chars()
                .map(String::from)
                .collect()
        }),
    )]);
    seed_cache(&indexer, &[cm("ab", 1), cm("bc", 2), cm("aa", 3)]);
    assert_eq!(
        sorted_names(indexer.by_index("letters", "a").unwrap()),
        ["aa", "ab"]
    );
    assert_eq!(
        sorted_names(indexer.by_index("letters", "b").unwrap()),
        ["ab", "bc"]
    );
    let mut values = indexer.index_values("letters").unwrap();
    values.sort();
    assert_eq!(values, ["a", "b", "c"]);
}

#[test]
fn empty_index_sets_are_removed() {
    let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
    seed_cache(&indexer, &[cm_labels("a", 1, &[("app", "web")])]);
    assert_eq!(indexer.index_values(LABEL_INDEX).unwrap(), ["app=web"]);
    // Relabel: the old value's set becomes empty and disappears.
    seed_cache(&indexer, &[cm_labels("a", 2, &[("app", "db")])]);
    assert_eq!(indexer.index_values(LABEL_INDEX).unwrap(), ["app=db"]);
    indexer.write(|w| w.remove(&key("a")));
    assert!(indexer.index_values(LABEL_INDEX).unwrap().is_empty());
    assert!(indexer.index_values(NAMESPACE_INDEX).unwrap().is_empty());
}

#[test]
fn an_id_given_back_by_a_removed_object_serves_a_new_one_without_mixing_snapshots() {
    let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
    seed_cache(
        &indexer,
        &[
            cm_labels("a", 1, &[("app", "web")]),
            cm_labels("b", 2, &[("app", "db")]),
        ],
    );
    let before = indexer.snapshot();
    // `a`'s id is given back and taken by `c` in the same batch.
    indexer.write(|w| {
        w.remove(&key("a"));
        w.upsert(key("c"), Arc::new(cm_labels("c", 3, &[("app", "db")])));
    });
    let names = |snap: &kinformer_core::Snapshot<ConfigMap>, value: &str| {
        sorted_names(snap.by_index(LABEL_INDEX, value).unwrap())
    };
    assert_eq!(names(&before, "app=web"), ["a"]);
    assert_eq!(names(&before, "app=db"), ["b"]);
    let after = indexer.snapshot();
    assert!(names(&after, "app=web").is_empty());
    assert_eq!(names(&after, "app=db"), ["b", "c"]);
    let mut keys = after.index_keys(NAMESPACE_INDEX, "ns").unwrap();
    keys.sort();
    assert_eq!(keys, [key("b"), key("c")]);
}

#[test]
fn add_indexers_after_objects_exist() {
    let indexer: Indexer<ConfigMap> = Indexer::new(Vec::new());
    seed_cache(&indexer, &[cm_labels("a", 1, &[("tier", "x")]), cm("b", 2)]);
    indexer.add_indexers(builtin_indexers()).unwrap();
    assert_eq!(
        sorted_names(indexer.by_index(LABEL_INDEX, "tier=x").unwrap()),
        ["a"]
    );
    assert_eq!(indexer.by_index(NAMESPACE_INDEX, "ns").unwrap().len(), 2);
    // Objects written after the indexes came keep being indexed.
    indexer.write(|w| {
        w.remove(&key("b"));
        w.upsert(key("c"), Arc::new(cm_labels("c", 3, &[("tier", "x")])));
    });
    assert_eq!(
        sorted_names(indexer.by_index(LABEL_INDEX, "tier=x").unwrap()),
        ["a", "c"]
    );
    assert_eq!(
        indexer.add_indexers(vec![(LABEL_INDEX.into(), IndexFn::labels())]),
        Err(InformerError::IndexExists(LABEL_INDEX.into()))
    );
}

/// An update whose index inputs hash to the stored digest leaves the object
/// filed where it was without computing either object's values; an index
/// without a digest computes both; changed inputs move the object; an
/// index added later (which changes every digest) still files updates.
#[test]
fn an_update_with_the_stored_digest_of_its_index_inputs_keeps_its_index_values() {
    for digest in [true, false] {
        let (computed, threads) = (Arc::new(AtomicUsize::new(0)), Threads::default());
        let indexer: Indexer<ConfigMap> = Indexer::new(vec![(
            "zone".into(),
            zone_index(&computed, digest.then_some(&threads)),
        )]);
        seed_cache(&indexer, &[cm_zone("a", 1, "z1")]);
        assert_eq!(
            computed.load(Ordering::Relaxed),
            1,
            "the new object's values"
        );
        seed_cache(&indexer, &[cm_zone("a", 2, "z1")]);
        let want = if digest { 1 } else { 3 };
        assert_eq!(computed.load(Ordering::Relaxed), want, "digest {digest}");
        assert_eq!(sorted_names(indexer.by_index("zone", "z1").unwrap()), ["a"]);
        seed_cache(&indexer, &[cm_zone("a", 3, "z2")]);
        assert_eq!(computed.load(Ordering::Relaxed), want + 2, "inputs changed");
        assert!(indexer.by_index("zone", "z1").unwrap().is_empty());
        assert_eq!(sorted_names(indexer.by_index("zone", "z2").unwrap()), ["a"]);

        let later = Arc::new(AtomicUsize::new(0));
        indexer
            .add_indexers(vec![(
                "zone-later".into(),
                zone_index(&later, Some(&threads)),
            )])
            .unwrap();
        seed_cache(&indexer, &[cm_zone("a", 4, "z3")]);
        seed_cache(&indexer, &[cm_zone("a", 5, "z3")]);
        for index in ["zone", "zone-later"] {
            assert!(indexer.by_index(index, "z2").unwrap().is_empty(), "{index}");
            assert_eq!(sorted_names(indexer.by_index(index, "z3").unwrap()), ["a"]);
        }
    }
}

/// Writing the cached object again (a resync) keeps its digest without
/// running the digest function: its inputs are not read.
#[test]
fn rewriting_the_cached_object_keeps_its_digest_unread() {
    let (computed, threads) = (Arc::new(AtomicUsize::new(0)), Threads::default());
    let indexer: Indexer<ConfigMap> =
        Indexer::new(vec![("zone".into(), zone_index(&computed, Some(&threads)))]);
    let a = Arc::new(cm_zone("a", 1, "z1"));
    for _ in 0..3 {
        indexer.write(|w| w.upsert(key("a"), Arc::clone(&a)));
    }
    assert_eq!(threads.lock().unwrap().len(), 1, "digested once");
    assert_eq!(computed.load(Ordering::Relaxed), 1);
    indexer.write(|w| w.upsert(key("a"), Arc::new(cm_zone("a", 2, "z1"))));
    assert_eq!(threads.lock().unwrap().len(), 2);
    assert_eq!(computed.load(Ordering::Relaxed), 1, "same inputs");
    assert_eq!(sorted_names(indexer.by_index("zone", "z1").unwrap()), ["a"]);
}

/// A digest function that panics is not fatal: the Indexer compares the
/// objects' values instead, and the index follows every change.
#[test]
fn a_panicking_digest_function_falls_back_to_computing_values() {
    let computed = Arc::new(AtomicUsize::new(0));
    let panics = zone_index(&computed, None).with_digest(|o: &ConfigMap, mut h| {
        assert_ne!(o.metadata.name.as_deref(), Some("bad"), "boom");
        o.data.hash(&mut h)
    });
    let indexer: Indexer<ConfigMap> = Indexer::new(vec![("zone".into(), panics)]);
    for (rv, zone) in [(1, "z1"), (2, "z1"), (3, "z2")] {
        seed_cache(
            &indexer,
            &[cm_zone("bad", rv, zone), cm_zone("good", rv, zone)],
        );
    }
    assert_eq!(
        sorted_names(indexer.by_index("zone", "z2").unwrap()),
        ["bad", "good"]
    );
    assert!(indexer.by_index("zone", "z1").unwrap().is_empty());
    // "good" skipped the unchanged update (1 + 0 + 2), "bad" did not (1 + 2 + 2).
    assert_eq!(computed.load(Ordering::Relaxed), 3 + 5);
}

#[test]
fn failing_and_panicking_index_functions_are_counted_not_fatal() {
    let indexer: Indexer<ConfigMap> = Indexer::new(vec![
        (
            "fails".into(),
            IndexFn::fallible(|o: &ConfigMap| match o.metadata.name.as_deref() {
                Some("bad") => Err(InformerError::IndexFn("no value".into())),
                _ => Ok(vec!["v".into()]),
            }),
        ),
        (
            "panics".into(),
            IndexFn::new(|o: &ConfigMap| {
                assert_ne!(o.metadata.name.as_deref(), Some("bad"), "boom");
                vec!["v".into()]
            }),
        ),
    ]);
    seed_cache(&indexer, &[cm("bad", 1), cm("good", 2)]);
    assert_eq!(
        indexer.len(),
        2,
        "the object is cached even if an index fails"
    );
    assert_eq!(
        sorted_names(indexer.by_index("fails", "v").unwrap()),
        ["good"]
    );
    assert_eq!(
        sorted_names(indexer.by_index("panics", "v").unwrap()),
        ["good"]
    );
    assert_eq!(indexer.stats().index_fn_failures, 2);
    // The writer lock is not poisoned: writes keep working.
    seed_cache(&indexer, &[cm("good2", 3)]);
    assert_eq!(indexer.len(), 3);
}

#[test]
fn an_object_whose_index_function_fails_on_removal_does_not_lend_its_id_to_the_next_one() {
    static FAIL: AtomicBool = AtomicBool::new(false);
    let indexer: Indexer<ConfigMap> = Indexer::new(vec![(
        "name".into(),
        IndexFn::fallible(|o: &ConfigMap| {
            if FAIL.load(Ordering::SeqCst) {
                return Err(InformerError::IndexFn("flaky".into()));
            }
            Ok(vec![o.metadata.name.clone().unwrap_or_default()])
        }),
    )]);
    seed_cache(&indexer, &[cm("a", 1)]);
    FAIL.store(true, Ordering::SeqCst);
    indexer.write(|w| w.remove(&key("a")));
    FAIL.store(false, Ordering::SeqCst);
    seed_cache(&indexer, &[cm("b", 2)]);
    assert!(
        indexer.by_index("name", "a").unwrap().is_empty(),
        "the id left under `a` must not read as `b`"
    );
    assert_eq!(sorted_names(indexer.by_index("name", "b").unwrap()), ["b"]);
    assert_eq!(indexer.stats().index_fn_failures, 1);
}

#[test]
fn label_selector_through_the_index() {
    let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
    seed_cache(
        &indexer,
        &[
            cm_labels("a", 1, &[("app", "web"), ("env", "prod")]),
            cm_labels("b", 2, &[("app", "web"), ("env", "dev")]),
            cm_labels("c", 3, &[("app", "db")]),
        ],
    );
    let sel: Selector = [
        Expression::Equal("app".into(), "web".into()),
        Expression::NotEqual("env".into(), "dev".into()),
    ]
    .into_iter()
    .collect();
    assert_eq!(sorted_names(indexer.list_by_labels(&sel)), ["a"]);
    let exists: Selector = Expression::DoesNotExist("env".into()).into();
    assert_eq!(sorted_names(indexer.list_by_labels(&exists)), ["c"]);
    assert_eq!(
        sorted_names(indexer.namespaced("ns").list_by_labels(&exists)),
        ["c"]
    );
}

#[test]
fn a_snapshot_does_not_change_under_writes() {
    let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
    seed_cache(&indexer, &[cm("a", 1)]);
    let snap = indexer.snapshot();
    seed_cache(&indexer, &[cm("a", 2), cm("b", 3)]);
    indexer.write(|w| w.remove(&key("a")));
    assert_eq!(snap.len(), 1);
    assert_eq!(rv(snap.get("ns/a").unwrap()), 1);
    assert_eq!(snap.by_index(NAMESPACE_INDEX, "ns").unwrap().len(), 1);
    assert_eq!(indexer.len(), 1);
    assert!(indexer.snapshot().seq() > snap.seq());
}

#[test]
fn snapshots_outlive_the_indexer_and_every_object_is_released_once() {
    // Objects shared with the test: at the end each must be held by the test
    // alone, whatever order snapshots, writes and the indexer went away in.
    let objs: Vec<Arc<ConfigMap>> = (0..300u64)
        .map(|i| {
            Arc::new(cm_labels(
                &format!("o{i}"),
                i,
                &[("tier", ["web", "db"][(i % 2) as usize])],
            ))
        })
        .collect();
    let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
    let key = |o: &ConfigMap| kinformer_core::ObjectKey::of(o).unwrap();
    let mut held = Vec::new();
    for (round, chunk) in objs.chunks(50).enumerate() {
        indexer.write(|w| {
            for o in chunk {
                w.upsert(key(o), Arc::clone(o));
            }
            // Replace and remove some of what earlier rounds wrote.
            for o in objs.iter().take(round * 50).step_by(7) {
                w.upsert(key(o), Arc::clone(o));
            }
            for o in objs.iter().take(round * 50).skip(3).step_by(11) {
                w.remove(&key(o));
            }
        });
        held.push((indexer.snapshot(), indexer.list_keys().len()));
    }
    let last = indexer.snapshot();
    drop(indexer);
    // Every snapshot still reads what it saw, after the writer is gone.
    for (snap, len) in &held {
        assert_eq!(snap.len(), *len);
        assert_eq!(snap.iter().count(), *len);
        let by_tier = snap.by_index(LABEL_INDEX, "tier=web").unwrap().len()
            + snap.by_index(LABEL_INDEX, "tier=db").unwrap().len();
        assert_eq!(by_tier, *len);
    }
    // Drop the newest first: the older ones keep it alive through the chain.
    drop(last);
    while let Some((snap, _)) = held.pop() {
        drop(snap);
        if let Some((oldest, len)) = held.first() {
            assert_eq!(oldest.list().len(), *len);
        }
    }
    for o in &objs {
        assert_eq!(
            Arc::strong_count(o),
            1,
            "{:?} leaked or freed twice",
            o.metadata.name
        );
    }
}

#[test]
fn garbage_of_a_snapshot_a_reader_released_is_freed_by_the_writer() {
    let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
    let key = |o: &ConfigMap| kinformer_core::ObjectKey::of(o).unwrap();
    let v1 = Arc::new(cm_labels("a", 1, &[]));
    let other = Arc::new(cm_labels("b", 1, &[]));
    indexer.write(|w| drop(w.upsert(key(&v1), Arc::clone(&v1))));
    let reader = indexer.snapshot();
    // Replacing `a` retires v1 with the snapshot the reader holds.
    indexer.write(|w| drop(w.upsert(key(&v1), Arc::new(cm_labels("a", 2, &[])))));
    assert_eq!(Arc::strong_count(&v1), 2);
    // The reader lets go: the writer still holds that snapshot, so the
    // reader's thread frees nothing...
    drop(reader);
    assert_eq!(Arc::strong_count(&v1), 2, "freed by the reader");
    // ...and the writer frees it at its next publish.
    indexer.write(|w| drop(w.upsert(key(&other), Arc::clone(&other))));
    assert_eq!(Arc::strong_count(&v1), 1, "not freed by the writer");

    // A snapshot held across many publishes is let go by the writer, and
    // freed by whoever drops it last.
    let v3 = Arc::new(cm_labels("a", 3, &[]));
    indexer.write(|w| drop(w.upsert(key(&v3), Arc::clone(&v3))));
    let reader = indexer.snapshot();
    indexer.write(|w| drop(w.upsert(key(&v3), Arc::new(cm_labels("a", 4, &[])))));
    for _ in 0..10 {
        indexer.write(|w| drop(w.upsert(key(&other), Arc::clone(&other))));
    }
    assert_eq!(Arc::strong_count(&v3), 2);
    drop(reader);
    assert_eq!(Arc::strong_count(&v3), 1, "a long-held snapshot leaked");
}

/// A snapshot's content as (key, resourceVersion) pairs, sorted.
fn fingerprint(snap: &kinformer_core::Snapshot<ConfigMap>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = snap.iter().map(|(k, o)| (k.to_string(), rv(o))).collect();
    v.sort();
    v
}

#[test]
fn readers_holding_snapshots_across_a_churning_writer_see_them_unchanged() {
    // Real threads: two readers take snapshots, keep up to 8 each for a
    // while, re-check them later and drop them in shifting orders, while a
    // writer publishes small batches of upserts and removes. Every held
    // snapshot must keep its content and agree with its own indexes; at the
    // end every object must be released exactly once.
    let variants: Vec<Vec<Arc<ConfigMap>>> = (0..64u64)
        .map(|k| {
            (0..6u64)
                .map(|v| {
                    let tier = ["web", "db"][(v % 2) as usize];
                    Arc::new(cm_labels(&format!("k{k}"), v + 1, &[("tier", tier)]))
                })
                .collect()
        })
        .collect();
    let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    std::thread::scope(|scope| {
        for seed in [1u64, 2] {
            let (indexer, stop) = (indexer.clone(), Arc::clone(&stop));
            scope.spawn(move || {
                let mut rng = seed;
                let mut next = || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut held = std::collections::VecDeque::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let snap = indexer.snapshot();
                    let tiers = snap.by_index(LABEL_INDEX, "tier=web").unwrap().len()
                        + snap.by_index(LABEL_INDEX, "tier=db").unwrap().len();
                    assert_eq!(tiers, snap.len(), "indexes agree with objects");
                    let print = fingerprint(&snap);
                    held.push_back((snap, print));
                    if held.len() > 8 {
                        let (snap, print) = if next() % 2 == 0 {
                            held.pop_front().unwrap()
                        } else {
                            held.pop_back().unwrap()
                        };
                        assert_eq!(fingerprint(&snap), print, "a held snapshot changed");
                    }
                }
                for (snap, print) in held {
                    assert_eq!(fingerprint(&snap), print, "a held snapshot changed");
                }
            });
        }
        let mut rng = 7u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..1500 {
            indexer.write(|w| {
                for _ in 0..(next() % 6) {
                    let k = (next() % 64) as usize;
                    let obj = &variants[k][(next() % 6) as usize];
                    if next() % 5 == 0 {
                        w.remove(&kinformer_core::ObjectKey::of(&**obj).unwrap());
                    } else {
                        w.upsert(
                            kinformer_core::ObjectKey::of(&**obj).unwrap(),
                            Arc::clone(obj),
                        );
                    }
                }
            });
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    drop(indexer);
    for obj in variants.iter().flatten() {
        assert_eq!(
            Arc::strong_count(obj),
            1,
            "{:?} leaked or freed twice",
            obj.metadata.name
        );
    }
}

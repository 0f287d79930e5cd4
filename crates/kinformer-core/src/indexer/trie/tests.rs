//! The trie against a plain model, with every published version kept and
//! checked, garbage released oldest first, and every value accounted for at
//! the end (no leak, no double drop). Weak hash functions force full-hash
//! collisions and deep paths. Also run under Miri (`docs/testing.md`).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use proptest::prelude::*;

use super::{Garbage, Trie};

type Set = Trie<u16, ()>;

/// Keys range over `0..KEYS` (fewer under Miri, which is ~10⁴× slower).
const KEYS: u16 = if cfg!(miri) { 40 } else { 200 };

#[derive(Debug, Clone)]
enum Op {
    Insert(u16, u32),
    Remove(u16),
    AddToSet(u8, u16),
    RemoveFromSet(u8, u16),
    Publish,
    ReleaseOldest,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u16..KEYS, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (0u16..KEYS).prop_map(Op::Remove),
        2 => (0u8..6, 0u16..60).prop_map(|(s, k)| Op::AddToSet(s, k)),
        1 => (0u8..6, 0u16..60).prop_map(|(s, k)| Op::RemoveFromSet(s, k)),
        1 => Just(Op::Publish),
        1 => Just(Op::ReleaseOldest),
    ]
}

/// Hash functions from good to adversarial.
fn hash(kind: u8, k: u16) -> u64 {
    let k = u64::from(k);
    match kind {
        0 => k.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        // Many keys share a whole hash: collision nodes.
        1 => k % 7,
        // Equal low bits: long single-child paths before keys part.
        _ => k << 52,
    }
}

#[derive(Default)]
struct Retired {
    objects: Garbage<u16, Arc<u32>>,
    sets: Garbage<u8, Set>,
    keys: Garbage<u16, ()>,
}

type Model = (BTreeMap<u16, u32>, BTreeMap<u8, BTreeSet<u16>>);

struct Version {
    objects: Trie<u16, Arc<u32>>,
    sets: Trie<u8, Set>,
    model: Model,
    /// What the next version retired (set once it is published).
    retired: Option<Retired>,
}

fn check(kind: u8, objects: &Trie<u16, Arc<u32>>, sets: &Trie<u8, Set>, model: &Model) {
    let got: BTreeMap<u16, u32> = objects.iter().map(|e| (e.key, *e.value)).collect();
    assert_eq!(got, model.0);
    assert_eq!(objects.len(), model.0.len());
    for k in 0..KEYS {
        let got = objects.get(hash(kind, k), &k).map(|e| *e.value);
        assert_eq!(got, model.0.get(&k).copied(), "key {k}");
    }
    let got: BTreeMap<u8, BTreeSet<u16>> = sets
        .iter()
        .map(|e| (e.key, e.value.iter().map(|k| k.key).collect()))
        .collect();
    assert_eq!(got, model.1);
    for (s, keys) in &model.1 {
        let set = &sets.get(hash(kind, u16::from(*s)), s).unwrap().value;
        assert_eq!(set.len(), keys.len());
        for k in keys {
            assert!(set.get(hash(kind, *k), k).is_some());
        }
    }
}

fn run(kind: u8, ops: &[Op]) {
    let mut all_values: Vec<Arc<u32>> = Vec::new();
    let mut objects: Trie<u16, Arc<u32>> = Trie::new();
    let mut sets: Trie<u8, Set> = Trie::new();
    let mut model: Model = Default::default();
    let mut generation = 1;
    let mut retired = Retired::default();
    let mut versions: VecDeque<Version> = VecDeque::new();
    for op in ops {
        match op {
            Op::Insert(k, v) => {
                let value = Arc::new(*v);
                all_values.push(Arc::clone(&value));
                let old =
                    objects.insert(generation, &mut retired.objects, hash(kind, *k), *k, value);
                assert_eq!(old.map(|o| *o), model.0.insert(*k, *v));
            }
            Op::Remove(k) => {
                let old = objects.remove(generation, &mut retired.objects, hash(kind, *k), k);
                assert_eq!(old.map(|o| *o), model.0.remove(k));
            }
            Op::AddToSet(s, k) => {
                let set = sets.get_or_insert_mut(
                    generation,
                    &mut retired.sets,
                    hash(kind, u16::from(*s)),
                    s,
                    || (*s, Set::new()),
                );
                set.insert(generation, &mut retired.keys, hash(kind, *k), *k, ());
                model.1.entry(*s).or_default().insert(*k);
            }
            Op::RemoveFromSet(s, k) => {
                let sh = hash(kind, u16::from(*s));
                if let Some(set) = sets.get_mut(generation, &mut retired.sets, sh, s) {
                    set.remove(generation, &mut retired.keys, hash(kind, *k), k);
                    if set.is_empty() {
                        sets.remove(generation, &mut retired.sets, sh, s);
                    }
                }
                if let Some(keys) = model.1.get_mut(s) {
                    keys.remove(k);
                    if keys.is_empty() {
                        model.1.remove(s);
                    }
                }
            }
            Op::Publish => {
                if let Some(last) = versions.back_mut() {
                    last.retired = Some(std::mem::take(&mut retired));
                } else {
                    // Nothing older can reach what this batch retired.
                    drop(std::mem::take(&mut retired));
                }
                versions.push_back(Version {
                    objects,
                    sets,
                    model: model.clone(),
                    retired: None,
                });
                generation += 1;
            }
            Op::ReleaseOldest => {
                // Only a version whose successor is published can go (its
                // garbage is complete), as with snapshots.
                if versions.front().is_some_and(|v| v.retired.is_some()) {
                    let oldest = versions.pop_front().unwrap();
                    drop(oldest.retired);
                }
            }
        }
        check(kind, &objects, &sets, &model);
    }
    for v in &versions {
        check(kind, &v.objects, &v.sets, &v.model);
    }
    // Release in order, then the writer's final tree.
    for v in versions {
        drop(v.retired);
    }
    drop(retired);
    // SAFETY: (a test) nothing else reaches these tries any more.
    unsafe {
        objects.free_all(&mut drop);
        sets.free_all(&mut |e| e.value.free_all(&mut drop));
    }
    for v in &all_values {
        assert_eq!(Arc::strong_count(v), 1, "value {v} leaked or dropped twice");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256)
    ))]
    #[test]
    fn trie_matches_model_in_every_version(kind in 0u8..3, ops in proptest::collection::vec(op(), 1..usize::from(KEYS + 100))) {
        run(kind, &ops);
    }
}

#[test]
fn many_keys_every_hash_kind() {
    for kind in 0..3 {
        let mut ops: Vec<Op> = (0..KEYS).map(|k| Op::Insert(k, u32::from(k))).collect();
        ops.push(Op::Publish);
        ops.extend((0..KEYS).step_by(3).map(Op::Remove));
        ops.push(Op::Publish);
        ops.extend((0..60).map(|k| Op::AddToSet((k % 6) as u8, k)));
        ops.push(Op::Publish);
        ops.extend((0..60).map(|k| Op::RemoveFromSet((k % 6) as u8, k)));
        ops.push(Op::ReleaseOldest);
        run(kind, &ops);
    }
}

/// The cache's slots: an object's entry (hash, thin key, object, id, and
/// the 16-byte digest of its index inputs) is 48 bytes, a slot with its tag
/// too (its tag fits in a niche); an id table entry is 32 bytes, its slot
/// 40.
#[test]
fn cache_slots_are_48_and_40_bytes() {
    use crate::ObjectKey;
    use crate::indexer::snapshot::Stored;
    assert_eq!(size_of::<super::Slot<ObjectKey, Stored<u32>>>(), 48);
    assert_eq!(size_of::<super::Slot<u32, (u64, ObjectKey)>>(), 40);
}

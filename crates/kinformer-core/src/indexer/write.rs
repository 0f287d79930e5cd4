//! The write side of the cache: a master copy owned by whoever holds the
//! writer lock, published to readers as a new [`Snapshot`] after each batch.

use std::collections::VecDeque;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::index::IndexFn;
use crate::indexer::digest::{Digest, DigestPlan, EarlyDigest};
use crate::indexer::idset::{IdAllocator, IdSet, id_hash};
use crate::indexer::reclaim::{FinalTries, Retired, Successor};
use crate::indexer::snapshot::{Hasher, IndexTrie, Snapshot, Stored, Tries};
use crate::key::ObjectKey;
use crate::reclaimer::ReclaimerSlot;

/// How many replaced snapshots the writer keeps while a reader may still
/// hold them (see [`WriterState::linger`]).
const LINGER: usize = 4;

/// The named index functions, in registration order.
pub(crate) type IndexFns<K> = Vec<(Arc<str>, IndexFn<K>)>;

/// The writer's state: the master tries, what this batch retired, the
/// latest published snapshot and the index functions.
pub(crate) struct WriterState<K> {
    pub(crate) master: Tries<K>,
    /// Nodes of this generation are not published yet and change in place.
    pub(crate) generation: u64,
    pub(crate) retired: Retired<K>,
    pub(crate) published: Arc<Snapshot<K>>,
    pub(crate) hasher: Hasher,
    pub(crate) index_fns: IndexFns<K>,
    /// How the stored digests of index inputs are computed (shared with
    /// [`DeltaFifo::prepare`](crate::DeltaFifo::prepare) through the
    /// Indexer; replaced when indexes are added).
    pub(crate) plan: Arc<DigestPlan<K>>,
    /// Ids of indexed objects (none are handed out while there is no index).
    ids: IdAllocator,
    /// Whether the master changed since the last publish.
    pub(crate) dirty: bool,
    /// Recently replaced snapshots, oldest first (see [`Self::linger`]).
    lingering: VecDeque<Arc<Snapshot<K>>>,
    /// Where retired objects go once no snapshot reaches them.
    reclaimer: ReclaimerSlot<K>,
}

impl<K> WriterState<K> {
    pub(crate) fn new(index_fns: IndexFns<K>, reclaimer: ReclaimerSlot<K>) -> Self {
        let hasher = Hasher::default();
        let master = Tries {
            objects: Default::default(),
            ids: Default::default(),
            indices: index_fns
                .iter()
                .map(|(n, _)| (Arc::clone(n), IndexTrie::new()))
                .collect(),
        };
        let published = Arc::new(Snapshot::new(master.clone(), hasher.clone(), 0));
        Self {
            master,
            generation: 1,
            retired: Retired::default(),
            published,
            hasher,
            plan: Arc::new(DigestPlan::new(
                index_fns.iter().map(|(_, f)| f.clone()).collect(),
            )),
            index_fns,
            ids: IdAllocator::default(),
            dirty: false,
            lingering: VecDeque::with_capacity(LINGER + 1),
            reclaimer,
        }
    }

    pub(crate) fn hash(&self, s: &str) -> u64 {
        self.hasher.hash_one(s)
    }

    /// Publishes the master as a new snapshot and hands what this batch
    /// retired to the snapshot it replaces. Returns the new snapshot and the
    /// replaced one (for the caller to drop after unlocking).
    pub(crate) fn publish(&mut self) -> (Arc<Snapshot<K>>, Arc<Snapshot<K>>) {
        let seq = self.published.seq + 1;
        let next = Arc::new(Snapshot::new(self.master.clone(), self.hasher.clone(), seq));
        // Every node built so far is now reachable by readers: freeze it.
        self.generation += 1;
        self.dirty = false;
        let previous = std::mem::replace(&mut self.published, Arc::clone(&next));
        let mut retired = std::mem::take(&mut self.retired);
        retired.reclaimer = self.reclaimer.get().cloned();
        hand_over(
            &previous,
            Successor {
                next: Some(Arc::clone(&next)),
                retired,
                last: None,
            },
        );
        (next, previous)
    }

    /// Takes a snapshot just replaced in the `ArcSwap`, and returns the
    /// replaced snapshots that nobody else holds any more, for the caller to
    /// drop (freeing their garbage) outside the writer lock.
    ///
    /// A reader that loaded a snapshot just before it was replaced holds it
    /// for the rest of its lookup. If the writer dropped its own reference
    /// at once, that reader would often be the last holder and free the
    /// batch's garbage on its own thread, in the middle of its read. So the
    /// writer keeps the last few replaced snapshots and releases each once
    /// it is the only holder; past [`LINGER`] it lets the oldest go anyway
    /// (a snapshot held for long, e.g. through [`Indexer::snapshot`], is
    /// freed by whoever drops it last, as before).
    ///
    /// [`Indexer::snapshot`]: super::Indexer::snapshot
    pub(crate) fn linger(&mut self, previous: Arc<Snapshot<K>>) -> Vec<Arc<Snapshot<K>>> {
        self.lingering.push_back(previous);
        self.unheld()
    }

    /// Takes out the lingering snapshots nobody else holds any more (and
    /// the oldest past [`LINGER`]), for the caller to drop unlocked.
    pub(crate) fn unheld(&mut self) -> Vec<Arc<Snapshot<K>>> {
        let mut release = Vec::new();
        let mut i = 0;
        while i < self.lingering.len() {
            if Arc::strong_count(&self.lingering[i]) == 1 || self.lingering.len() > LINGER {
                release.extend(self.lingering.remove(i));
            } else {
                i += 1;
            }
        }
        release
    }

    /// Files `key` (whose hash is `hash`) in the id table under `id`.
    fn file_id(&mut self, id: u32, hash: u64, key: &ObjectKey) {
        self.master.ids.insert_with(
            self.generation,
            &mut self.retired.ids,
            id_hash(id),
            id,
            |_| (hash, key.clone()),
        );
    }

    /// Gives every cached object an id: called when the first index is
    /// added to a cache that had none.
    pub(crate) fn assign_ids(&mut self) {
        let entries: Vec<(u64, ObjectKey, Arc<K>)> = self
            .master
            .objects
            .iter()
            .map(|e| (e.hash, e.key.clone(), Arc::clone(&e.value.object)))
            .collect();
        for (hash, key, object) in entries {
            let id = self.ids.take();
            self.file_id(id, hash, &key);
            self.master.objects.insert_with(
                self.generation,
                &mut self.retired.objects,
                hash,
                key,
                |_| Stored {
                    object,
                    id: Some(id),
                    // Computed at the object's next update.
                    digest: Digest::NONE,
                },
            );
        }
        self.dirty = true;
    }

    /// The index tries with what changing them needs, borrowed apart from
    /// the index functions.
    pub(crate) fn index_edit(&mut self) -> (IndexEdit<'_, K>, &IndexFns<K>) {
        let edit = IndexEdit {
            indices: &mut self.master.indices,
            retired: &mut self.retired,
            generation: self.generation,
            hasher: &self.hasher,
        };
        (edit, &self.index_fns)
    }
}

/// Changes to the index tries of the master (value → set of ids).
pub(crate) struct IndexEdit<'a, K> {
    indices: &'a mut [(Arc<str>, IndexTrie)],
    retired: &'a mut Retired<K>,
    generation: u64,
    hasher: &'a Hasher,
}

impl<K> IndexEdit<'_, K> {
    /// Adds object `id` under `value` in index number `index`.
    pub(crate) fn add(&mut self, index: usize, value: &str, id: u32) {
        let vh = self.hasher.hash_one(value);
        let Some((_, trie)) = self.indices.get_mut(index) else {
            return;
        };
        let set =
            trie.get_or_insert_mut(self.generation, &mut self.retired.values, vh, value, || {
                (Arc::from(value), IdSet::default())
            });
        set.insert(self.generation, &mut self.retired.chunks, id);
    }

    /// Removes object `id` from `value` in index number `index`, and the
    /// value once it has no object left.
    fn remove(&mut self, index: usize, value: &str, id: u32) {
        let vh = self.hasher.hash_one(value);
        let generation = self.generation;
        let Some((_, trie)) = self.indices.get_mut(index) else {
            return;
        };
        let Some(set) = trie.get_mut(generation, &mut self.retired.values, vh, value) else {
            return;
        };
        set.remove(generation, &mut self.retired.chunks, id);
        if set.is_empty() {
            trie.remove_quiet(generation, &mut self.retired.values, vh, value);
        }
    }
}

/// Sets `snapshot`'s successor (once: only the latest snapshot gets one).
fn hand_over<K>(snapshot: &Snapshot<K>, successor: Successor<K>) {
    let set = snapshot.successor.set(successor);
    debug_assert!(set.is_ok(), "a snapshot's successor is set once");
}

impl<K> Drop for WriterState<K> {
    fn drop(&mut self) {
        // The latest snapshot may outlive the writer: it takes the live
        // tries, freed when it (and every older snapshot) is gone.
        hand_over(
            &self.published,
            Successor {
                next: None,
                retired: std::mem::take(&mut self.retired),
                last: Some(FinalTries(std::mem::take(&mut self.master))),
            },
        );
    }
}

/// Counters kept by the write side.
#[derive(Default)]
pub(crate) struct WriteCounters {
    pub(crate) publishes: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) index_fn_failures: AtomicU64,
}

/// A batch of writes, applied to the master copy and published to readers
/// as one snapshot when the batch ends. Obtained from
/// [`Indexer::write`](crate::Indexer::write).
pub struct WriteBatch<'a, K> {
    pub(crate) state: &'a mut WriterState<K>,
    pub(crate) counters: &'a WriteCounters,
}

impl<K> WriteBatch<'_, K> {
    /// The object currently stored under `key`, including this batch's writes.
    pub fn get(&self, key: &str) -> Option<&Arc<K>> {
        let hash = self.state.hash(key);
        self.state
            .master
            .objects
            .get(hash, key)
            .map(|e| &e.value.object)
    }

    /// Number of objects, including this batch's writes.
    pub fn len(&self) -> usize {
        self.state.master.objects.len()
    }

    /// Whether the cache is empty, including this batch's writes.
    pub fn is_empty(&self) -> bool {
        self.state.master.objects.is_empty()
    }

    /// Stores `obj` under `key`, updating every index whose values changed.
    /// Returns the previous object.
    pub fn upsert(&mut self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        self.upsert_digested(key, obj, None)
    }

    /// [`upsert`](Self::upsert) with the digest of `obj`'s index inputs
    /// computed earlier (taken when computed in the current epoch).
    pub(crate) fn upsert_digested(
        &mut self,
        key: ObjectKey,
        obj: Arc<K>,
        early: Option<EarlyDigest>,
    ) -> Option<Arc<K>> {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        let state = &mut *self.state;
        let hash = state.hash(key.as_str());
        state.dirty = true;
        let indexed = !state.index_fns.is_empty();
        let (ids, plan, mut new_id, mut id) = (&mut state.ids, &state.plan, None, None);
        let mut same_inputs = false;
        // One walk: a replaced object's id carries over to the new one.
        let replaced = state.master.objects.insert_with(
            state.generation,
            &mut state.retired.objects,
            hash,
            key.clone(),
            |old| {
                // The cached object again (a resync) keeps its digest
                // without its inputs being read.
                let digest = match old {
                    Some(old) if Arc::ptr_eq(&old.object, &obj) => old.digest,
                    _ => plan.resolve(early, &obj),
                };
                id = match old {
                    Some(old) => {
                        same_inputs = digest.same_inputs(old.digest);
                        old.id
                    }
                    None if indexed => Some(*new_id.insert(ids.take())),
                    None => None,
                };
                Stored {
                    object: Arc::clone(&obj),
                    id,
                    digest,
                }
            },
        );
        let old = match state.retired.objects.last_value() {
            Some(old) if replaced => Some(Arc::clone(&old.object)),
            _ => None,
        };
        if let Some(id) = new_id {
            state.file_id(id, hash, &key);
        }
        if let Some(id) = id {
            self.reindex(&key, id, old.as_deref(), Some(&obj), same_inputs);
        }
        old
    }

    /// Removes `key`, dropping it from every index. Returns the removed object.
    pub fn remove(&mut self, key: &ObjectKey) -> Option<Arc<K>> {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        let state = &mut *self.state;
        let hash = state.hash(key.as_str());
        let Stored { object, id, .. } = state.master.objects.remove(
            state.generation,
            &mut state.retired.objects,
            hash,
            key.as_str(),
        )?;
        state.dirty = true;
        let Some(id) = id else {
            return Some(object);
        };
        let failures = self.counters.index_fn_failures.load(Ordering::Relaxed);
        self.reindex(key, id, Some(&object), None, false);
        let state = &mut *self.state;
        state
            .master
            .ids
            .remove_quiet(state.generation, &mut state.retired.ids, id_hash(id), &id);
        // An index function that failed now may have filed the object
        // when it was stored: its id may linger in a set, so it is not
        // handed out again (a lingering id without a key reads as
        // nothing; a reused one would read as another object).
        if self.counters.index_fn_failures.load(Ordering::Relaxed) == failures {
            state.ids.give_back(id);
        }
        Some(object)
    }

    /// Moves object `id` (stored under `key`) between index values as its
    /// values change from `old`'s to `new`'s. With `same_inputs` (the
    /// update's digest matched the stored one) the indexes that declare
    /// their inputs are left as they are without reading `old`.
    fn reindex(
        &mut self,
        key: &ObjectKey,
        id: u32,
        old: Option<&K>,
        new: Option<&K>,
        same_inputs: bool,
    ) {
        let (mut edit, index_fns) = self.state.index_edit();
        for (i, (name, f)) in index_fns.iter().enumerate() {
            if let (Some(old), Some(new)) = (old, new)
                && ((same_inputs && f.has_digest())
                    || std::ptr::eq(old, new)
                    || f.known_unchanged(old, new))
            {
                continue;
            }
            let new_values = new
                .map(|o| values_or_log(f, o, name, key, self.counters))
                .unwrap_or_default();
            let old_values = old
                .map(|o| values_or_log(f, o, name, key, self.counters))
                .unwrap_or_default();
            if new_values == old_values {
                continue;
            }
            for v in old_values.iter().filter(|v| !new_values.contains(v)) {
                edit.remove(i, v, id);
            }
            for v in new_values.iter().filter(|v| !old_values.contains(v)) {
                edit.add(i, v, id);
            }
        }
    }
}

/// The values of `obj` in one index; a failure is logged, counted and
/// treated as "no values" (the object is left out of that index).
pub(crate) fn values_or_log<K>(
    f: &IndexFn<K>,
    obj: &K,
    index: &str,
    key: &ObjectKey,
    counters: &WriteCounters,
) -> Vec<String> {
    match f.values(obj) {
        Ok(v) => v,
        Err(e) => {
            counters.index_fn_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(index, key = %key, error = %e, "index function failed; object left out of the index");
            Vec::new()
        }
    }
}

//! The cache: an arc-swapped, copy-on-write Indexer.
//!
//! Readers load the current [`Snapshot`] through `arc-swap`: no lock, no
//! waiting for writers, one consistent state per read. Writers serialize on
//! one mutex, apply a batch to a master copy built from persistent hash
//! tries (an update copies one root-to-leaf path, never the whole map, and
//! copies share entries and children without reference counts: see the
//! private modules `trie` and `reclaim`), and publish it with a single atomic
//! pointer swap. Indexes map each value to a set of dense object ids (the
//! private module `idset`); each object's entry carries a digest of its
//! index inputs, so an update that keeps them need not read the replaced
//! object (the private module `digest`).

mod digest;
mod idset;
mod namespaced;
mod reclaim;
mod snapshot;
mod trie;
mod write;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use arc_swap::ArcSwap;
use kube_core::{Resource, Selector};
use parking_lot::Mutex;

use crate::error::InformerError;
use crate::index::{IndexFn, Indexers};
use crate::key::{ObjectKey, with_key_buf};
use crate::provenance::Provenance;
use crate::reclaimer::ReclaimerSlot;

use digest::DigestPlan;
pub(crate) use digest::EarlyDigest;
pub use namespaced::NamespacedIndexer;
use snapshot::IndexTrie;
pub use snapshot::Snapshot;
pub use write::WriteBatch;
use write::{WriteCounters, WriterState, values_or_log};

struct Shared<K> {
    current: ArcSwap<Snapshot<K>>,
    /// The writer's digest plan, for digests computed before the write.
    plan: ArcSwap<DigestPlan<K>>,
    reclaimer: ReclaimerSlot<K>,
    writer: Mutex<WriterState<K>>,
    counters: WriteCounters,
    provenance: Provenance,
}

/// The thread-safe cache of one resource type with secondary indexes.
///
/// Cloning gives another handle to the same cache.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{Indexer, ObjectKey, builtin_indexers};
/// use k8s_openapi::api::core::v1::Pod;
/// use kube_core::ObjectMeta;
///
/// let indexer: Indexer<Pod> = Indexer::new(builtin_indexers());
/// let pod = Pod {
///     metadata: ObjectMeta { name: Some("web-0".into()), namespace: Some("prod".into()), ..Default::default() },
///     ..Default::default()
/// };
/// indexer.write(|batch| batch.upsert(ObjectKey::of(&pod).unwrap(), Arc::new(pod)));
/// assert!(indexer.get("prod/web-0").is_some());
/// assert_eq!(indexer.by_index("namespace", "prod").unwrap().len(), 1);
/// ```
pub struct Indexer<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Counters of an [`Indexer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexerStats {
    /// Snapshots published (write batches).
    pub publishes: u64,
    /// Single-object writes (upserts and removes).
    pub writes: u64,
    /// Index function calls that failed or panicked.
    pub index_fn_failures: u64,
}

impl<K> Indexer<K> {
    /// An empty cache with the given indexes.
    pub fn new(indexers: Indexers<K>) -> Self {
        let index_fns: Vec<(Arc<str>, IndexFn<K>)> = indexers
            .into_iter()
            .map(|(n, f)| (Arc::<str>::from(n), f))
            .collect();
        let reclaimer = ReclaimerSlot::default();
        let writer = WriterState::new(index_fns, Arc::clone(&reclaimer));
        Self {
            shared: Arc::new(Shared {
                current: ArcSwap::new(Arc::clone(&writer.published)),
                plan: ArcSwap::new(Arc::clone(&writer.plan)),
                reclaimer,
                writer: Mutex::new(writer),
                counters: WriteCounters::default(),
                provenance: Provenance::default(),
            }),
        }
    }

    /// Where replaced and removed objects go once no snapshot reaches them
    /// (shared with the informer's handler registrations).
    pub(crate) fn reclaimer_slot(&self) -> ReclaimerSlot<K> {
        Arc::clone(&self.shared.reclaimer)
    }

    /// The digest of `obj`'s index inputs, computed ahead of its write
    /// (lock-free; see [`IndexFn::with_digest`]).
    pub(crate) fn early_digest(&self, obj: &K) -> EarlyDigest {
        self.shared.plan.load().early(obj)
    }

    /// The current snapshot: O(1), lock-free. Hold it to make several reads
    /// against one consistent state.
    pub fn snapshot(&self) -> Arc<Snapshot<K>> {
        self.shared.current.load_full()
    }

    /// The object stored under `key` (`namespace/name` or `name`).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.shared.current.load().get_cloned(key)
    }

    /// The object `namespace/name` (or `name` when `namespace` is `None`),
    /// without allocating a key.
    pub fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        match namespace {
            Some(ns) => with_key_buf(ns, name, |key| self.get(key)),
            None => self.get(name),
        }
    }

    /// Every cached object (unordered), from one snapshot.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.shared.current.load().list()
    }

    /// Every cached key (unordered), from one snapshot.
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.shared.current.load().keys().cloned().collect()
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.shared.current.load().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Objects filed under `value` in index `name`.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, InformerError> {
        self.shared.current.load().by_index(name, value)
    }

    /// Keys filed under `value` in index `name`.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, InformerError> {
        self.shared.current.load().index_keys(name, value)
    }

    /// Every value of index `name` that has at least one object.
    pub fn index_values(&self, name: &str) -> Result<Vec<String>, InformerError> {
        self.shared.current.load().index_values(name)
    }

    /// A view of one namespace.
    pub fn namespaced(&self, namespace: &str) -> NamespacedIndexer<K> {
        NamespacedIndexer::new(self.clone(), namespace)
    }

    /// Counters of this cache.
    pub fn stats(&self) -> IndexerStats {
        let c = &self.shared.counters;
        IndexerStats {
            publishes: c.publishes.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            index_fn_failures: c.index_fn_failures.load(Ordering::Relaxed),
        }
    }

    /// Applies a batch of writes and publishes the result as one snapshot.
    /// Writers serialize with each other; readers are never blocked. Returns
    /// the closure's result and the sequence number of the published snapshot.
    ///
    /// Objects written here did not come from a decoder: the cache's
    /// [`Provenance`] becomes mixed.
    pub fn write<R>(&self, f: impl FnOnce(&mut WriteBatch<'_, K>) -> R) -> (R, u64) {
        self.shared.provenance.mark_mixed("Indexer::write");
        self.apply_batch(f)
    }

    /// Where this cache's objects came from (shared with its queue).
    pub fn provenance(&self) -> Provenance {
        self.shared.provenance.clone()
    }

    /// [`write`](Self::write) for the informer's pool, whose objects come
    /// from the queue (which keeps the provenance itself).
    pub(crate) fn apply_batch<R>(&self, f: impl FnOnce(&mut WriteBatch<'_, K>) -> R) -> (R, u64) {
        let mut state = self.shared.writer.lock();
        let result = f(&mut WriteBatch {
            state: &mut state,
            counters: &self.shared.counters,
        });
        let (seq, released) = self.publish(&mut state);
        drop(state);
        // Freeing the nodes only replaced snapshots held happens outside
        // the writer lock, so another writer can proceed meanwhile.
        drop(released);
        (result, seq)
    }

    /// Publishes the master copy as the new snapshot; returns its sequence
    /// number and the replaced snapshots nobody else holds (for the caller
    /// to drop unlocked).
    fn publish(&self, state: &mut WriterState<K>) -> (u64, Vec<Arc<Snapshot<K>>>) {
        let (next, previous) = state.publish();
        let seq = next.seq;
        let swapped_out = self.shared.current.swap(next);
        debug_assert!(Arc::ptr_eq(&swapped_out, &previous));
        drop(swapped_out);
        self.shared
            .counters
            .publishes
            .fetch_add(1, Ordering::Relaxed);
        (seq, state.linger(previous))
    }

    /// Frees the garbage of replaced snapshots that readers held at publish
    /// time and have let go since. The processor calls it when the queue
    /// runs dry, so that garbage does not wait for the next write.
    pub(crate) fn release_unheld(&self) {
        let released = self.shared.writer.lock().unheld();
        drop(released);
    }

    /// Runs `f` with the writer lock held and the current master snapshot:
    /// no write can happen meanwhile. Used to register a handler at an exact
    /// point of the write sequence.
    pub(crate) fn with_writes_paused<R>(&self, f: impl FnOnce(&Arc<Snapshot<K>>) -> R) -> R {
        let mut state = self.shared.writer.lock();
        if state.dirty {
            // A write batch panicked half-way: publish what it applied so
            // that the snapshot below is the writer's state.
            let (_, released) = self.publish(&mut state);
            drop(released);
        }
        f(&state.published)
    }

    /// Adds indexes, computing them at once for every cached object.
    /// Fails, adding none, if a name is already registered.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        let mut state = self.shared.writer.lock();
        for (name, _) in &indexers {
            if state.master.index(name).is_some()
                || indexers.iter().filter(|(n, _)| n == name).count() > 1
            {
                return Err(InformerError::IndexExists(name.clone()));
            }
        }
        if state.index_fns.is_empty() && !indexers.is_empty() {
            state.assign_ids();
        }
        for (name, f) in indexers {
            let name: Arc<str> = Arc::from(name);
            let slot = state.master.indices.len();
            state
                .master
                .indices
                .push((Arc::clone(&name), IndexTrie::new()));
            let objects = state.master.objects;
            let (mut edit, _) = state.index_edit();
            for entry in objects.iter() {
                let Some(id) = entry.value.id else {
                    continue;
                };
                let object = &entry.value.object;
                for v in values_or_log(&f, object, &name, &entry.key, &self.shared.counters) {
                    edit.add(slot, &v, id);
                }
            }
            state.dirty = true;
            state.index_fns.push((name, f));
        }
        let fns = state.index_fns.iter().map(|(_, f)| f.clone()).collect();
        state.plan = Arc::new(state.plan.next(fns));
        self.shared.plan.store(Arc::clone(&state.plan));
        let (_, released) = self.publish(&mut state);
        drop(state);
        drop(released);
        Ok(())
    }
}

impl<K: Resource> Indexer<K> {
    /// Objects whose labels match `selector` (narrowed through the label
    /// index when registered).
    pub fn list_by_labels(&self, selector: &Selector) -> Vec<Arc<K>> {
        self.shared.current.load().list_by_labels(selector)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_core::ObjectMeta;

    fn cm(rv: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    #[test]
    fn garbage_a_reader_let_go_of_is_freed_without_another_write() {
        let indexer: Indexer<ConfigMap> = Indexer::new(Vec::new());
        let key = ObjectKey::parse("ns/a");
        let v1 = cm("1");
        indexer.write(|w| drop(w.upsert(key.clone(), Arc::clone(&v1))));
        let reader = indexer.snapshot();
        indexer.write(|w| drop(w.upsert(key.clone(), cm("2"))));
        drop(reader);
        assert_eq!(Arc::strong_count(&v1), 2, "lingering with the writer");
        indexer.release_unheld();
        assert_eq!(Arc::strong_count(&v1), 1);
    }
}

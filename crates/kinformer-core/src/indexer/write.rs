//! The write side of the cache: a master copy owned by whoever holds the
//! writer lock, published to readers as a new [`Snapshot`] after each batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::index::IndexFn;
use crate::indexer::snapshot::{IndexMap, KeySet, Snapshot};
use crate::key::ObjectKey;

/// The writer's state: the master snapshot and the index functions.
pub(crate) struct WriterState<K> {
    pub(crate) master: Snapshot<K>,
    pub(crate) index_fns: Vec<(Arc<str>, IndexFn<K>)>,
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
        self.state.master.objects.get(key)
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
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        let old = self
            .state
            .master
            .objects
            .insert(key.clone(), Arc::clone(&obj));
        self.reindex(&key, old.as_deref(), Some(&obj));
        old
    }

    /// Removes `key`, dropping it from every index. Returns the removed object.
    pub fn remove(&mut self, key: &ObjectKey) -> Option<Arc<K>> {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        let old = self.state.master.objects.remove(key.as_str());
        if let Some(old) = &old {
            self.reindex(key, Some(old), None);
        }
        old
    }

    fn reindex(&mut self, key: &ObjectKey, old: Option<&K>, new: Option<&K>) {
        let WriterState { master, index_fns } = &mut *self.state;
        for (name, f) in index_fns.iter() {
            if let (Some(old), Some(new)) = (old, new)
                && (std::ptr::eq(old, new) || f.known_unchanged(old, new))
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
            let Some(index) = master.indices.get_mut(&**name) else {
                continue;
            };
            for v in old_values.iter().filter(|v| !new_values.contains(v)) {
                remove_from_index(index, v, key);
            }
            for v in new_values.iter().filter(|v| !old_values.contains(v)) {
                add_to_index(index, v, key);
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

pub(crate) fn add_to_index(index: &mut IndexMap, value: &str, key: &ObjectKey) {
    if let Some(set) = index.get_mut(value) {
        set.insert(key.clone());
    } else {
        let mut set = KeySet::with_hasher(Default::default());
        set.insert(key.clone());
        index.insert(Arc::from(value), set);
    }
}

fn remove_from_index(index: &mut IndexMap, value: &str, key: &ObjectKey) {
    if let Some(set) = index.get_mut(value) {
        set.remove(key.as_str());
        if set.is_empty() {
            index.remove(value);
        }
    }
}

//! One immutable, consistent state of the cache: objects plus indexes.

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use kube_core::{Expression, Resource, Selector, SelectorExt};

use crate::error::InformerError;
use crate::index::{LABEL_INDEX, NAMESPACE_INDEX, label_value};
use crate::indexer::digest::Digest;
use crate::indexer::idset::{IdSet, id_hash};
use crate::indexer::reclaim::{Successor, release_chain};
use crate::indexer::trie::{Trie, prefetch_for_write};
use crate::key::ObjectKey;

/// The hasher of every cache trie: fast, and seeded per process so that
/// object names chosen by cluster users cannot force collisions.
pub(crate) type Hasher = foldhash::fast::RandomState;
/// Objects by key, each with its id.
pub(crate) type ObjectTrie<K> = Trie<ObjectKey, Stored<K>>;
/// Keys (with their hashes) by object id, hashed by [`id_hash`]. The key
/// is the objects trie's own (shared), so a lookup through it compares
/// pointers, not strings.
pub(crate) type IdTable = Trie<u32, (u64, ObjectKey)>;
/// One index: value → ids of the objects filed under it.
pub(crate) type IndexTrie = Trie<Arc<str>, IdSet>;

/// A cached object, its id in the index sets and the digest of its index
/// inputs. With a thin key, the entry (hash, key, object, id, digest) fits
/// 48 bytes, so carrying the id costs no separate key → id map, and an
/// update reads the digest from the entry it copies anyway.
pub(crate) struct Stored<K> {
    pub(crate) object: Arc<K>,
    /// Set while the cache has an index; `None` before the first one.
    pub(crate) id: Option<u32>,
    pub(crate) digest: Digest,
}

impl<K> Clone for Stored<K> {
    fn clone(&self) -> Self {
        Self {
            object: Arc::clone(&self.object),
            id: self.id,
            digest: self.digest,
        }
    }
}

/// The tries of one version of the cache (handles: copying one aliases).
pub(crate) struct Tries<K> {
    pub(crate) objects: ObjectTrie<K>,
    /// Empty while no index is registered.
    pub(crate) ids: IdTable,
    /// Indexes by name, in registration order.
    pub(crate) indices: Vec<(Arc<str>, IndexTrie)>,
}

impl<K> Default for Tries<K> {
    fn default() -> Self {
        Self {
            objects: Trie::new(),
            ids: Trie::new(),
            indices: Vec::new(),
        }
    }
}

impl<K> Clone for Tries<K> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects,
            ids: self.ids,
            indices: self.indices.clone(),
        }
    }
}

impl<K> Tries<K> {
    /// The index registered as `name`.
    pub(crate) fn index(&self, name: &str) -> Option<&IndexTrie> {
        self.indices
            .iter()
            .find_map(|(n, index)| (**n == *name).then_some(index))
    }
}

/// An immutable state of the cache. Every read against one snapshot sees the
/// same objects and indexes, whatever writers do meanwhile; taking one is O(1).
pub struct Snapshot<K> {
    pub(crate) tries: Tries<K>,
    pub(crate) hasher: Hasher,
    pub(crate) seq: u64,
    /// Set by the writer once this is no longer the latest snapshot (see
    /// [`reclaim`](super::reclaim)).
    pub(crate) successor: OnceLock<Successor<K>>,
}

impl<K> Drop for Snapshot<K> {
    fn drop(&mut self) {
        release_chain(self.successor.take());
    }
}

impl<K> Snapshot<K> {
    pub(crate) fn new(tries: Tries<K>, hasher: Hasher, seq: u64) -> Self {
        Self {
            tries,
            hasher,
            seq,
            successor: OnceLock::new(),
        }
    }

    fn hash(&self, s: &str) -> u64 {
        self.hasher.hash_one(s)
    }

    /// The object stored under `key` (`namespace/name` or `name`).
    pub fn get(&self, key: &str) -> Option<&Arc<K>> {
        self.tries
            .objects
            .get(self.hash(key), key)
            .map(|e| &e.value.object)
    }

    /// A new reference to the object stored under `key`. The object's
    /// reference count is fetched while the key is compared, so the two
    /// cache misses of a cold lookup overlap.
    #[inline]
    pub(crate) fn get_cloned(&self, key: &str) -> Option<Arc<K>> {
        self.tries
            .objects
            .get_hinted(self.hash(key), key, |value| {
                // The count sits in front of the value in the same
                // allocation: prefetch the line holding the count.
                prefetch_for_write(Arc::as_ptr(&value.object).cast::<u8>().wrapping_sub(16));
            })
            .map(|e| Arc::clone(&e.value.object))
    }

    /// Whether `key` is cached.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.tries.objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.tries.objects.is_empty()
    }

    /// Iterates over every cached key and object (unordered).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&ObjectKey, &Arc<K>)> {
        self.tries.objects.iter().map(|e| (&e.key, &e.value.object))
    }

    /// Every cached object (unordered).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.tries
            .objects
            .iter()
            .map(|e| Arc::clone(&e.value.object))
            .collect()
    }

    /// Every cached key (unordered).
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &ObjectKey> {
        self.tries.objects.iter().map(|e| &e.key)
    }

    /// The commit sequence number of this snapshot (0 before the first write).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Names of the registered indexes.
    pub fn index_names(&self) -> Vec<String> {
        self.tries
            .indices
            .iter()
            .map(|(k, _)| k.to_string())
            .collect()
    }

    fn index(&self, name: &str) -> Result<&IndexTrie, InformerError> {
        self.tries
            .index(name)
            .ok_or_else(|| InformerError::NoSuchIndex(name.to_string()))
    }

    /// The ids filed under `value` in `index`.
    fn id_set<'i>(&self, index: &'i IndexTrie, value: &str) -> Option<&'i IdSet> {
        index.get(self.hash(value), value).map(|e| &e.value)
    }

    /// The keys (and their hashes) of a set of ids.
    fn keys_of<'s>(&'s self, ids: &'s IdSet) -> impl Iterator<Item = &'s (u64, ObjectKey)> {
        ids.iter()
            .filter_map(|id| self.tries.ids.get(id_hash(id), &id).map(|e| &e.value))
    }

    /// The objects of a set of ids.
    fn objects_of<'s>(&'s self, ids: &'s IdSet) -> impl Iterator<Item = &'s Arc<K>> {
        self.keys_of(ids)
            .filter_map(|(hash, key)| self.tries.objects.get(*hash, key).map(|e| &e.value.object))
    }

    /// Keys filed under `value` in index `name`.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, InformerError> {
        let index = self.index(name)?;
        Ok(self
            .id_set(index, value)
            .map(|set| self.keys_of(set).map(|(_, key)| key.clone()).collect())
            .unwrap_or_default())
    }

    /// Objects filed under `value` in index `name`.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, InformerError> {
        let index = self.index(name)?;
        Ok(self
            .id_set(index, value)
            .map(|set| self.objects_of(set).cloned().collect())
            .unwrap_or_default())
    }

    /// Every value that has at least one object in index `name`.
    pub fn index_values(&self, name: &str) -> Result<Vec<String>, InformerError> {
        Ok(self
            .index(name)?
            .iter()
            .map(|e| e.key.to_string())
            .collect())
    }

    /// Objects of one namespace: through the namespace index when it is
    /// registered, else by a scan.
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        match self.by_index(NAMESPACE_INDEX, namespace) {
            Ok(objs) => objs,
            Err(_) => self
                .iter()
                .filter(|(k, _)| k.namespace() == Some(namespace))
                .map(|(_, o)| Arc::clone(o))
                .collect(),
        }
    }
}

impl<K: Resource> Snapshot<K> {
    /// Objects whose labels match `selector`. With the label index
    /// registered, an equality (or `in`) requirement narrows the candidates
    /// through the index; the full selector is then checked on each.
    pub fn list_by_labels(&self, selector: &Selector) -> Vec<Arc<K>> {
        static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
        let matches = |o: &Arc<K>| selector.matches(o.meta().labels.as_ref().unwrap_or(&NO_LABELS));
        if let Ok(index) = self.index(LABEL_INDEX) {
            let narrowing = selector.clone().into_iter().find_map(|e| match e {
                Expression::Equal(k, v) => Some(vec![label_value(&k, &v)]),
                Expression::In(k, vs) => Some(vs.iter().map(|v| label_value(&k, v)).collect()),
                _ => None,
            });
            if let Some(values) = narrowing {
                let mut out = Vec::new();
                for v in values {
                    if let Some(ids) = self.id_set(index, &v) {
                        out.extend(self.objects_of(ids).filter(|o| matches(o)).cloned());
                    }
                }
                return out;
            }
        }
        self.iter()
            .map(|(_, o)| o)
            .filter(|o| matches(o))
            .cloned()
            .collect()
    }
}

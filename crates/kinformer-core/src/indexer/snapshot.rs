//! One immutable, consistent state of the cache: objects plus indexes.

use std::collections::BTreeMap;
use std::sync::Arc;

use imbl::shared_ptr::DefaultSharedPtr;
use imbl::{GenericHashMap, GenericHashSet};
use kube_core::{Expression, Resource, Selector, SelectorExt};

use crate::error::IndexerError;
use crate::index::{LABEL_INDEX, NAMESPACE_INDEX, label_value};
use crate::key::ObjectKey;

/// The hasher of every cache map: fast, and seeded per process so that object
/// names chosen by cluster users cannot force collisions.
pub(crate) type Hasher = foldhash::fast::RandomState;
/// Objects by key (a persistent hash trie: a clone is O(1), an update copies
/// one path).
pub(crate) type ObjectMap<K> = GenericHashMap<ObjectKey, Arc<K>, Hasher, DefaultSharedPtr>;
/// The keys filed under one index value.
pub(crate) type KeySet = GenericHashSet<ObjectKey, Hasher, DefaultSharedPtr>;
/// One index: value → keys.
pub(crate) type IndexMap = GenericHashMap<Arc<str>, KeySet, Hasher, DefaultSharedPtr>;
/// All indexes by name.
pub(crate) type IndexMaps = GenericHashMap<Arc<str>, IndexMap, Hasher, DefaultSharedPtr>;

/// An immutable state of the cache. Every read against one snapshot sees the
/// same objects and indexes, whatever writers do meanwhile; taking one is O(1).
pub struct Snapshot<K> {
    pub(crate) objects: ObjectMap<K>,
    pub(crate) indices: IndexMaps,
    pub(crate) seq: u64,
}

impl<K> Clone for Snapshot<K> {
    fn clone(&self) -> Self {
        Self {
            objects: self.objects.clone(),
            indices: self.indices.clone(),
            seq: self.seq,
        }
    }
}

impl<K> Snapshot<K> {
    pub(crate) fn empty() -> Self {
        Self {
            objects: ObjectMap::with_hasher(Hasher::default()),
            indices: IndexMaps::with_hasher(Hasher::default()),
            seq: 0,
        }
    }

    /// The object stored under `key` (`namespace/name` or `name`).
    pub fn get(&self, key: &str) -> Option<&Arc<K>> {
        self.objects.get(key)
    }

    /// Whether `key` is cached.
    pub fn contains_key(&self, key: &str) -> bool {
        self.objects.contains_key(key)
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Iterates over every cached key and object (unordered).
    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<K>)> {
        self.objects.iter()
    }

    /// Every cached object (unordered).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.objects.values().cloned().collect()
    }

    /// Every cached key (unordered).
    pub fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.objects.keys()
    }

    /// The commit sequence number of this snapshot (0 before the first write).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Names of the registered indexes.
    pub fn index_names(&self) -> Vec<String> {
        self.indices.keys().map(|k| k.to_string()).collect()
    }

    fn index(&self, name: &str) -> Result<&IndexMap, IndexerError> {
        self.indices
            .get(name)
            .ok_or_else(|| IndexerError::NoSuchIndex(name.to_string()))
    }

    /// Keys filed under `value` in index `name`.
    pub fn index_keys(&self, name: &str, value: &str) -> Result<Vec<ObjectKey>, IndexerError> {
        Ok(self
            .index(name)?
            .get(value)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default())
    }

    /// Objects filed under `value` in index `name`.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexerError> {
        Ok(self
            .index(name)?
            .get(value)
            .map(|set| {
                set.iter()
                    .filter_map(|k| self.objects.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Every value that has at least one object in index `name`.
    pub fn index_values(&self, name: &str) -> Result<Vec<String>, IndexerError> {
        Ok(self.index(name)?.keys().map(|v| v.to_string()).collect())
    }

    /// Objects of one namespace: through the namespace index when it is
    /// registered, else by a scan.
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        match self.by_index(NAMESPACE_INDEX, namespace) {
            Ok(objs) => objs,
            Err(_) => self
                .objects
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
                    if let Some(keys) = index.get(v.as_str()) {
                        out.extend(
                            keys.iter()
                                .filter_map(|k| self.objects.get(k))
                                .filter(|o| matches(o))
                                .cloned(),
                        );
                    }
                }
                return out;
            }
        }
        self.objects
            .values()
            .filter(|o| matches(o))
            .cloned()
            .collect()
    }
}

//! [`CompactLister`]: reads of a compact cache, decoding on demand.

use std::sync::Arc;

use kinformer_core::{Indexer, InformerError, ObjectKey};
use kube_core::{Resource, Selector};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::compact::Compact;
use crate::hot::HotSet;

/// Typed reads of a compact cache. `get` decodes one object (or finds it in
/// the [`HotSet`]); `list`, `by_index` and `list_by_labels` pick their
/// objects by the decoded metadata and return a [`Decoded`] iterator that
/// decodes each as it is reached, so a list of a million objects holds a
/// million pointers, not a million objects.
///
/// Every read is of one snapshot of the cache, lock-free as with the plain
/// [`Indexer`].
pub struct CompactLister<K> {
    indexer: Indexer<Compact<K>>,
    hot: Arc<HotSet<K>>,
}

impl<K> Clone for CompactLister<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
            hot: Arc::clone(&self.hot),
        }
    }
}

impl<K> CompactLister<K> {
    /// A lister over `indexer`, decoding through `hot`.
    pub fn new(indexer: Indexer<Compact<K>>, hot: Arc<HotSet<K>>) -> Self {
        Self { indexer, hot }
    }

    /// The cache of packed objects (for reads that need no decoding, such as
    /// keys, metadata and index values).
    pub fn indexer(&self) -> &Indexer<Compact<K>> {
        &self.indexer
    }

    /// The set of recently decoded objects.
    pub fn hot(&self) -> &Arc<HotSet<K>> {
        &self.hot
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.indexer.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.indexer.is_empty()
    }

    /// Whether `key` (`namespace/name` or `name`) is cached.
    pub fn contains_key(&self, key: &str) -> bool {
        self.indexer.snapshot().contains_key(key)
    }

    /// Every cached key (unordered).
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.indexer.list_keys()
    }

    fn decoded(&self, items: Vec<Arc<Compact<K>>>) -> Decoded<K> {
        Decoded {
            items: items.into_iter(),
            hot: Arc::clone(&self.hot),
        }
    }
}

impl<K: Resource + Clone + Serialize + DeserializeOwned> CompactLister<K> {
    /// The object stored under `key` (`namespace/name` or `name`), decoded.
    /// `None` if absent, or if its bytes do not decode (logged and counted
    /// in [`HotStats::decode_failures`](crate::HotStats)).
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        let compact = self.indexer.get(key)?;
        self.hot.get(&compact)
    }

    /// The object `namespace/name` (or `name` when `namespace` is `None`).
    pub fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let compact = self.indexer.get_by_name(namespace, name)?;
        self.hot.get(&compact)
    }

    /// Every cached object (unordered), decoded lazily.
    pub fn list(&self) -> Decoded<K> {
        self.decoded(self.indexer.list())
    }

    /// Objects filed under `value` in index `name`, decoded lazily.
    pub fn by_index(&self, name: &str, value: &str) -> Result<Decoded<K>, InformerError> {
        Ok(self.decoded(self.indexer.by_index(name, value)?))
    }

    /// Objects whose labels match `selector` (matched on the decoded
    /// metadata), decoded lazily.
    pub fn list_by_labels(&self, selector: &Selector) -> Decoded<K> {
        self.decoded(self.indexer.list_by_labels(selector))
    }

    /// Objects of one namespace (through the namespace index when it is
    /// registered), decoded lazily.
    pub fn list_namespace(&self, namespace: &str) -> Decoded<K> {
        self.decoded(self.indexer.snapshot().list_namespace(namespace))
    }
}

/// Objects of a compact cache, each decoded when the iterator reaches it.
/// An object whose bytes do not decode is skipped (logged and counted in
/// [`HotStats::decode_failures`](crate::HotStats)).
pub struct Decoded<K> {
    items: std::vec::IntoIter<Arc<Compact<K>>>,
    hot: Arc<HotSet<K>>,
}

impl<K> Decoded<K> {
    /// The packed objects not reached yet, undecoded.
    pub fn into_compact(self) -> Vec<Arc<Compact<K>>> {
        self.items.collect()
    }
}

impl<K: Resource + Clone + Serialize + DeserializeOwned> Iterator for Decoded<K> {
    type Item = Arc<K>;

    fn next(&mut self) -> Option<Arc<K>> {
        for compact in self.items.by_ref() {
            if let Some(obj) = self.hot.get(&compact) {
                return Some(obj);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.items.len()))
    }
}

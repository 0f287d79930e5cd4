//! Typed, lock-free reads of an informer's cache.

use std::sync::Arc;

use kinformer_core::{Indexer, InformerError, NamespacedIndexer};
use kube_core::{Resource, Selector};

/// Reads objects of one type from an informer's cache. Every call reads one
/// consistent snapshot without taking a lock. Cheap to clone.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kinformer::{Indexer, Lister, ObjectKey, builtin_indexers};
/// use kube_core::{ObjectMeta, Selector};
///
/// let indexer: Indexer<ConfigMap> = Indexer::new(builtin_indexers());
/// let cm = ConfigMap { metadata: ObjectMeta { name: Some("a".into()), namespace: Some("ns".into()), ..Default::default() }, ..Default::default() };
/// indexer.write(|b| b.upsert(ObjectKey::of(&cm).unwrap(), Arc::new(cm)));
/// let lister = Lister::new(indexer);
/// assert!(lister.get("ns", "a").is_some());
/// assert_eq!(lister.list(&Selector::default()).len(), 1);
/// assert_eq!(lister.namespaced("ns").list_all().len(), 1);
/// assert!(lister.namespaced("other").get("a").is_none());
/// ```
pub struct Lister<K> {
    indexer: Indexer<K>,
}

impl<K> Clone for Lister<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
        }
    }
}

impl<K: Resource> Lister<K> {
    /// A lister over `indexer` (e.g. `informer.indexer()`).
    pub fn new(indexer: Indexer<K>) -> Self {
        Self { indexer }
    }

    /// The object `namespace/name`; pass `""` as namespace for a
    /// cluster-scoped object.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        let ns = Some(namespace).filter(|n| !n.is_empty());
        self.indexer.get_by_name(ns, name)
    }

    /// Objects whose labels match `selector` (all of them for an empty
    /// selector), narrowed through the label index when registered.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        if selector.selects_all() {
            self.indexer.list()
        } else {
            self.indexer.list_by_labels(selector)
        }
    }

    /// Every cached object.
    pub fn list_all(&self) -> Vec<Arc<K>> {
        self.indexer.list()
    }

    /// A view of one namespace, backed by the namespace index.
    pub fn namespaced(&self, namespace: &str) -> NamespaceLister<K> {
        NamespaceLister {
            inner: self.indexer.namespaced(namespace),
        }
    }

    /// Objects filed under `value` in the index `index`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, InformerError> {
        self.indexer.by_index(index, value)
    }

    /// The underlying cache (indexes, snapshots).
    pub fn indexer(&self) -> &Indexer<K> {
        &self.indexer
    }
}

/// The objects of one namespace (see [`Lister::namespaced`]).
pub struct NamespaceLister<K> {
    inner: NamespacedIndexer<K>,
}

impl<K> Clone for NamespaceLister<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K: Resource> NamespaceLister<K> {
    /// The namespace of this view.
    pub fn namespace(&self) -> &str {
        self.inner.namespace()
    }

    /// The object `name` in this namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.inner.get(name)
    }

    /// Objects of this namespace whose labels match `selector`.
    pub fn list(&self, selector: &Selector) -> Vec<Arc<K>> {
        if selector.selects_all() {
            self.inner.list()
        } else {
            self.inner.list_by_labels(selector)
        }
    }

    /// Every object of this namespace.
    pub fn list_all(&self) -> Vec<Arc<K>> {
        self.inner.list()
    }
}

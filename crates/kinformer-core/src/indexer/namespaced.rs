//! A view of the cache restricted to one namespace.

use std::sync::Arc;

use kube_core::{Resource, Selector};

use crate::indexer::Indexer;

/// The objects of one namespace of an [`Indexer`].
pub struct NamespacedIndexer<K> {
    indexer: Indexer<K>,
    namespace: Arc<str>,
}

impl<K> Clone for NamespacedIndexer<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
            namespace: Arc::clone(&self.namespace),
        }
    }
}

impl<K> NamespacedIndexer<K> {
    pub(crate) fn new(indexer: Indexer<K>, namespace: &str) -> Self {
        Self {
            indexer,
            namespace: Arc::from(namespace),
        }
    }

    /// The namespace of this view.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The object `name` in this namespace.
    pub fn get(&self, name: &str) -> Option<Arc<K>> {
        self.indexer.get_by_name(Some(&self.namespace), name)
    }

    /// Every object in this namespace (through the namespace index when
    /// registered).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.indexer.snapshot().list_namespace(&self.namespace)
    }
}

impl<K: Resource> NamespacedIndexer<K> {
    /// Objects in this namespace whose labels match `selector`.
    pub fn list_by_labels(&self, selector: &Selector) -> Vec<Arc<K>> {
        let ns = Some(&*self.namespace);
        self.indexer
            .list_by_labels(selector)
            .into_iter()
            .filter(|o| o.meta().namespace.as_deref() == ns)
            .collect()
    }
}

//! Index functions: how the [`Indexer`](crate::Indexer) files an object
//! under secondary values (namespace, labels, owner, anything a closure
//! computes).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::panic::caught_panic_message;
use std::sync::Arc;

use kube_core::Resource;

use crate::error::InformerError;

/// Name of the built-in namespace index (values: the object's namespace).
pub const NAMESPACE_INDEX: &str = "namespace";
/// Name of the built-in label index (values: `key=value` for every label).
pub const LABEL_INDEX: &str = "labels";
/// Name of the built-in owner index (values: the UID of every owner reference).
pub const OWNER_UID_INDEX: &str = "owner-uid";
/// Name of the index of objects by their own UID (see [`IndexFn::uid`]); not
/// among the built-in indexes, added where a lookup by UID is needed (a
/// controller's owner mapping adds it to its primary informer).
pub const UID_INDEX: &str = "uid";

type IndexClosure<K> = dyn Fn(&K) -> Result<Vec<String>, InformerError> + Send + Sync;

/// A function computing the index values of an object. An object may have
/// zero, one or many values; duplicates are ignored.
///
/// ```
/// use kinformer_core::IndexFn;
/// use k8s_openapi::api::core::v1::Pod;
/// let by_node = IndexFn::new(|pod: &Pod| {
///     pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
/// });
/// # let _ = by_node;
/// ```
pub struct IndexFn<K> {
    values: Arc<IndexClosure<K>>,
    unchanged: Option<Arc<SameValues<K>>>,
    inputs: Option<Arc<HashInputs<K>>>,
}

type SameValues<K> = dyn Fn(&K, &K) -> bool + Send + Sync;
type HashInputs<K> = dyn Fn(&K, &mut dyn Hasher) + Send + Sync;

impl<K> Clone for IndexFn<K> {
    fn clone(&self) -> Self {
        Self {
            values: Arc::clone(&self.values),
            unchanged: self.unchanged.clone(),
            inputs: self.inputs.clone(),
        }
    }
}

impl<K> fmt::Debug for IndexFn<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IndexFn")
    }
}

impl<K> IndexFn<K> {
    /// An infallible index function.
    pub fn new(f: impl Fn(&K) -> Vec<String> + Send + Sync + 'static) -> Self {
        Self {
            values: Arc::new(move |k| Ok(f(k))),
            unchanged: None,
            inputs: None,
        }
    }

    /// An index function that may fail for some objects. A failing object is
    /// cached but left out of this index; the failure is logged and counted.
    pub fn fallible(
        f: impl Fn(&K) -> Result<Vec<String>, InformerError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            values: Arc::new(f),
            unchanged: None,
            inputs: None,
        }
    }

    /// Adds a cheap test that an update from `old` to `new` (same key)
    /// cannot change this index's values, so the Indexer skips computing
    /// them (e.g. "the labels are equal" for a label index). It must never
    /// answer true when the values could differ.
    pub fn with_unchanged(mut self, f: impl Fn(&K, &K) -> bool + Send + Sync + 'static) -> Self {
        self.unchanged = Some(Arc::new(f));
        self
    }

    /// Whether the values of `old` and `new` are known to be equal without
    /// computing them (see [`IndexFn::with_unchanged`]).
    pub fn known_unchanged(&self, old: &K, new: &K) -> bool {
        self.unchanged.as_ref().is_some_and(|f| f(old, new))
    }

    /// Declares what this index's values are computed from: `f` feeds those
    /// inputs of an object into a hasher (e.g. the labels, for a label
    /// index), in an encoding where different inputs give different bytes
    /// (as the standard `Hash` impls do: `labels.hash(h)`). The inputs must
    /// determine the values: two objects that feed the same bytes must have
    /// the same values.
    ///
    /// The Indexer keeps a keyed 128-bit digest (SipHash-1-3, a random key
    /// per Indexer) of these inputs with each stored object. When an
    /// update's digest equals the stored one, the object stays filed where
    /// it is in this index without the old object being read: the
    /// replaced object is usually cold in a large cache, and comparing it
    /// costs cache misses that the digest, kept beside the object's entry,
    /// does not. Without a digest the Indexer falls back to
    /// [`with_unchanged`](Self::with_unchanged), then to computing both
    /// objects' values.
    ///
    /// ```
    /// use std::hash::Hash;
    /// use kinformer_core::IndexFn;
    /// use k8s_openapi::api::core::v1::Pod;
    /// let by_node = IndexFn::new(|pod: &Pod| {
    ///     pod.spec.as_ref().and_then(|s| s.node_name.clone()).into_iter().collect()
    /// })
    /// .with_digest(|pod: &Pod, mut h| {
    ///     pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).hash(&mut h)
    /// });
    /// # let _ = by_node;
    /// ```
    pub fn with_digest(mut self, f: impl Fn(&K, &mut dyn Hasher) + Send + Sync + 'static) -> Self {
        self.inputs = Some(Arc::new(f));
        self
    }

    /// Whether this index declares its inputs (see
    /// [`with_digest`](Self::with_digest)).
    pub fn has_digest(&self) -> bool {
        self.inputs.is_some()
    }

    /// Feeds `obj`'s inputs into `h` (see [`with_digest`](Self::with_digest));
    /// false when this index declares none, or its function panicked.
    pub(crate) fn hash_inputs(&self, obj: &K, h: &mut dyn Hasher) -> bool {
        let Some(f) = &self.inputs else {
            return false;
        };
        let declared = catch_unwind(AssertUnwindSafe(|| f(obj, h))).is_ok();
        if !declared {
            tracing::warn!("an index's digest function panicked; comparing the objects instead");
        }
        declared
    }

    /// Computes the sorted, deduplicated values of `obj`. A panic inside the
    /// function is caught and reported as an error.
    pub fn values(&self, obj: &K) -> Result<Vec<String>, InformerError> {
        match catch_unwind(AssertUnwindSafe(|| (self.values)(obj))) {
            Ok(Ok(mut values)) => {
                if values.len() > 1 {
                    values.sort_unstable();
                    values.dedup();
                }
                Ok(values)
            }
            Ok(Err(e)) => Err(e),
            Err(panic) => Err(InformerError::IndexFn(format!(
                "panicked: {}",
                caught_panic_message(panic)
            ))),
        }
    }
}

impl<K: Resource> IndexFn<K> {
    /// Files objects under their namespace (cluster-scoped objects: no value).
    pub fn namespace() -> Self {
        // The namespace is part of the key: an update never changes it.
        Self::new(|obj: &K| obj.meta().namespace.iter().cloned().collect())
            .with_unchanged(|_, _| true)
    }

    /// Files objects under `key=value` for each of their labels.
    pub fn labels() -> Self {
        Self::new(|obj: &K| {
            obj.meta()
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| label_value(k, v))
                .collect()
        })
        .with_unchanged(|old: &K, new: &K| old.meta().labels == new.meta().labels)
        .with_digest(|obj: &K, mut h| obj.meta().labels.hash(&mut h))
    }

    /// Files objects under their own `metadata.uid` (none: no value).
    pub fn uid() -> Self {
        // A UID is fixed at creation: an update never changes it.
        Self::new(|obj: &K| obj.meta().uid.iter().cloned().collect()).with_unchanged(|_, _| true)
    }

    /// Files objects under the UID of each of their owner references.
    pub fn owner_uid() -> Self {
        Self::new(|obj: &K| {
            obj.meta()
                .owner_references
                .iter()
                .flatten()
                .map(|o| o.uid.clone())
                .collect()
        })
        .with_unchanged(|old: &K, new: &K| {
            let (a, b) = (&old.meta().owner_references, &new.meta().owner_references);
            let (a, b) = (
                a.as_deref().unwrap_or_default(),
                b.as_deref().unwrap_or_default(),
            );
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.uid == y.uid)
        })
        .with_digest(|obj: &K, h| {
            let owners = obj.meta().owner_references.as_deref().unwrap_or_default();
            h.write_usize(owners.len());
            for o in owners {
                h.write(o.uid.as_bytes());
                h.write_u8(0xff);
            }
        })
    }
}

/// The value the [`LABEL_INDEX`] uses for one label.
pub fn label_value(key: &str, value: &str) -> String {
    let mut s = String::with_capacity(key.len() + 1 + value.len());
    s.push_str(key);
    s.push('=');
    s.push_str(value);
    s
}

/// A set of named index functions.
pub type Indexers<K> = Vec<(String, IndexFn<K>)>;

/// The three built-in indexes ([`NAMESPACE_INDEX`], [`LABEL_INDEX`],
/// [`OWNER_UID_INDEX`]).
pub fn builtin_indexers<K: Resource>() -> Indexers<K> {
    vec![
        (NAMESPACE_INDEX.to_string(), IndexFn::namespace()),
        (LABEL_INDEX.to_string(), IndexFn::labels()),
        (OWNER_UID_INDEX.to_string(), IndexFn::owner_uid()),
    ]
}

//! Object keys: `namespace/name`, or `name` for cluster-scoped objects.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::fmt;

use arcstr::ArcStr;
use kube_core::Resource;

use crate::error::InformerError;

thread_local! {
    static KEY_BUF: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Builds `namespace/name` in a reused per-thread buffer and passes it to `f`.
pub(crate) fn with_key_buf<R>(namespace: &str, name: &str, f: impl FnOnce(&str) -> R) -> R {
    KEY_BUF.with(|buf| match buf.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            buf.push_str(namespace);
            buf.push('/');
            buf.push_str(name);
            f(&buf)
        }
        // Re-entered from inside `f`: fall back to a fresh string.
        Err(_) => f(&format!("{namespace}/{name}")),
    })
}

/// The cache key of an object: `namespace/name`, or `name` when the object
/// is cluster-scoped.
///
/// A thin pointer (8 bytes: the length lives with the characters), so the
/// cache's trie slots stay small. Cloning is a reference-count increment;
/// hashing and equality use the string form, so maps keyed by `ObjectKey`
/// can be queried with a `&str` without allocating.
///
/// ```
/// use kinformer_core::ObjectKey;
/// let key = ObjectKey::new(Some("default"), "web-0");
/// assert_eq!(key.as_str(), "default/web-0");
/// assert_eq!(key.namespace(), Some("default"));
/// assert_eq!(key.name(), "web-0");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(ArcStr);

// The trie's slot sizes count on a thin key.
const _: () = assert!(std::mem::size_of::<ObjectKey>() == 8);

impl ObjectKey {
    /// Builds a key from an optional namespace and a name.
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace {
            // One allocation: the string is joined in a reused buffer and
            // copied once into the shared one.
            Some(ns) if !ns.is_empty() => with_key_buf(ns, name, |key| Self(ArcStr::from(key))),
            _ => Self(ArcStr::from(name)),
        }
    }

    /// Parses the string form (`namespace/name` or `name`).
    pub fn parse(key: &str) -> Self {
        Self(ArcStr::from(key))
    }

    /// The key of a Kubernetes object.
    ///
    /// Fails with [`InformerError::MissingName`] when `metadata.name` is absent or
    /// empty (objects with only `generateName` have not been created yet).
    pub fn of<K: Resource>(obj: &K) -> Result<Self, InformerError> {
        let meta = obj.meta();
        match meta.name.as_deref() {
            Some(name) if !name.is_empty() => Ok(Self::new(meta.namespace.as_deref(), name)),
            _ => Err(InformerError::MissingName {
                namespace: meta.namespace.clone(),
            }),
        }
    }

    /// The string form of the key.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace part, or `None` for a cluster-scoped key.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name part.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, n)| n)
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for ObjectKey {
    fn from(s: &str) -> Self {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Namespace, Pod};
    use kube_core::ObjectMeta;

    #[test]
    fn namespaced_and_cluster_scoped_keys() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(ObjectKey::of(&pod).unwrap().as_str(), "ns/p");
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some("kube-system".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let key = ObjectKey::of(&ns).unwrap();
        assert_eq!(key.as_str(), "kube-system");
        assert_eq!(key.namespace(), None);
        assert_eq!(key.name(), "kube-system");
    }

    #[test]
    fn object_without_name_is_a_typed_error() {
        let pod = Pod::default();
        assert!(matches!(
            ObjectKey::of(&pod),
            Err(InformerError::MissingName { .. })
        ));
    }

    #[test]
    fn lookup_by_str_without_allocation() {
        let mut m = std::collections::HashMap::new();
        m.insert(ObjectKey::new(Some("a"), "b"), 1);
        assert_eq!(m.get("a/b"), Some(&1));
    }
}

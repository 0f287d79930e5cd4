//! Which objects an informer watches ([`InformerOptions`]) and the
//! factory-wide metadata transform.

use std::sync::Arc;

use kinformer_reflector::ShardSelector;
use kube_core::ObjectMeta;

/// A transform of every object's metadata before it is cached, applied by
/// informers of every type (e.g. [`strip_managed_fields`]). Must be idempotent.
pub type MetaTransform = Arc<dyn Fn(&mut ObjectMeta) + Send + Sync>;

/// Drops `metadata.managedFields`, for a transform of your own. A factory
/// drops them more cheaply with
/// [`FactoryBuilder::drop_managed_fields`](crate::FactoryBuilder::drop_managed_fields),
/// which skips them while decoding.
///
/// ```
/// use kube_core::ObjectMeta;
/// let mut meta = ObjectMeta { managed_fields: Some(vec![Default::default()]), ..Default::default() };
/// kinformer::strip_managed_fields(&mut meta);
/// assert!(meta.managed_fields.is_none());
/// ```
pub fn strip_managed_fields(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
}

/// The scope of one informer: namespace and selectors. Informers of one
/// type with equal options are shared.
///
/// ```
/// use kinformer::InformerOptions;
/// let o = InformerOptions::default().namespace("prod").labels("app=web");
/// assert_eq!(o.namespace.as_deref(), Some("prod"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct InformerOptions {
    /// Only this namespace (`None`: all namespaces). Ignored for
    /// cluster-scoped types.
    pub namespace: Option<String>,
    /// Label selector, e.g. `app=web,tier!=db`.
    pub label_selector: Option<String>,
    /// Field selector, e.g. `spec.nodeName=node-1`.
    pub field_selector: Option<String>,
    /// Only this shard of the collection (KEP-5866's server-side sharding;
    /// a server that does not apply it is filtered on this side).
    pub shard: Option<ShardSelector>,
}

impl InformerOptions {
    /// Sets the namespace.
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = Some(ns.into());
        self
    }

    /// Watches all namespaces.
    pub fn all_namespaces(mut self) -> Self {
        self.namespace = None;
        self
    }

    /// Sets the label selector.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into()).filter(|s| !s.is_empty());
        self
    }

    /// Sets the field selector.
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into()).filter(|s| !s.is_empty());
        self
    }

    /// Caches only `shard`, e.g. `ShardSelector::uid_shard(index, count)`
    /// for replica `index` of `count`: LIST and WATCH send it as
    /// `shardSelector`, and the objects a server sends outside it anyway
    /// (one without the `ShardedListAndWatch` gate) are left out and
    /// counted (`ReflectorMetrics::shard_filtered`).
    pub fn shard(mut self, shard: ShardSelector) -> Self {
        self.shard = Some(shard);
        self
    }
}

//! The caches the informer suites run against: the plain store, and the
//! compact store of `kinformer-compact` (objects packed, decoded on demand).
//! A suite written against [`Store`] runs once per store, unchanged.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_compact::{Compact, CompactInformer, HotSet};
use kinformer_core::{
    EventHandlerFns, HandlerRegistration, InformerBuilder, InformerError, SharedIndexInformer,
};
use kube_core::Resource;

/// One way of caching ConfigMaps.
pub trait Store: Sized + 'static {
    /// What the informer's cache holds.
    type Stored: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static;

    /// Builds the informer (adding the store's transform, if any).
    fn build(builder: InformerBuilder<Self::Stored>) -> Self;
    /// The informer.
    fn informer(&self) -> &SharedIndexInformer<Self::Stored>;
    /// What a producer queues for `obj`.
    fn wrap(obj: ConfigMap) -> Self::Stored;
    /// The whole object of a cached entry.
    fn view(stored: &Self::Stored) -> ConfigMap;
    /// Registers a handler of whole ConfigMaps.
    fn add_handler(
        &self,
        handler: EventHandlerFns<ConfigMap>,
    ) -> Result<HandlerRegistration<Self::Stored>, InformerError> {
        self.add_handler_with_resync(handler, None)
    }
    /// Registers a handler of whole ConfigMaps with a resync period.
    fn add_handler_with_resync(
        &self,
        handler: EventHandlerFns<ConfigMap>,
        resync: Option<Duration>,
    ) -> Result<HandlerRegistration<Self::Stored>, InformerError>;
}

/// The plain store: the cache holds the objects.
pub struct Plain(pub SharedIndexInformer<ConfigMap>);

impl Store for Plain {
    type Stored = ConfigMap;

    fn build(builder: InformerBuilder<ConfigMap>) -> Self {
        Self(builder.build())
    }
    fn informer(&self) -> &SharedIndexInformer<ConfigMap> {
        &self.0
    }
    fn wrap(obj: ConfigMap) -> ConfigMap {
        obj
    }
    fn view(stored: &ConfigMap) -> ConfigMap {
        stored.clone()
    }
    fn add_handler_with_resync(
        &self,
        handler: EventHandlerFns<ConfigMap>,
        resync: Option<Duration>,
    ) -> Result<HandlerRegistration<ConfigMap>, InformerError> {
        self.0.add_event_handler_with_resync(handler, resync)
    }
}

/// The compact store, with a hot set of two objects so that most reads
/// and notifications decode.
pub struct Packed(pub CompactInformer<ConfigMap>);

impl Store for Packed {
    type Stored = Compact<ConfigMap>;

    fn build(builder: InformerBuilder<Compact<ConfigMap>>) -> Self {
        let hot = Arc::new(HotSet::new(2));
        let packer = CompactInformer::packer(Arc::clone(&hot), None);
        Self(CompactInformer::new(builder.transform(packer).build(), hot))
    }
    fn informer(&self) -> &SharedIndexInformer<Compact<ConfigMap>> {
        self.0.informer()
    }
    fn wrap(obj: ConfigMap) -> Compact<ConfigMap> {
        Compact::fresh(obj)
    }
    fn view(stored: &Compact<ConfigMap>) -> ConfigMap {
        assert!(stored.is_packed(), "the compact cache holds a fresh object");
        stored.decode().unwrap()
    }
    fn add_handler_with_resync(
        &self,
        handler: EventHandlerFns<ConfigMap>,
        resync: Option<Duration>,
    ) -> Result<HandlerRegistration<Compact<ConfigMap>>, InformerError> {
        self.0.add_event_handler_with_resync(handler, resync)
    }
}

//! [`CompactInformer`]: a shared informer whose cache holds packed objects.

use std::sync::Arc;
use std::time::Duration;

use kinformer_core::{
    HandlerRegistration, InformerError, ResourceEventHandler, SharedIndexInformer, Transform,
};
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::compact::Compact;
use crate::handler::DecodingHandler;
use crate::hot::HotSet;
use crate::lister::CompactLister;

/// A shared informer of `K` whose cache holds each object packed
/// ([`Compact`]): handlers receive whole objects ([`DecodingHandler`]),
/// listers decode on demand ([`CompactLister`]), indexes and selectors work
/// on the decoded metadata.
///
/// Index functions of the underlying informer take `Compact<K>`: the
/// built-in ones (namespace, labels, owner UID) read the metadata; one that
/// needs more of the object calls [`Compact::decode`] (it runs once per
/// write, not per read).
pub struct CompactInformer<K: Resource + Send + Sync + 'static> {
    informer: SharedIndexInformer<Compact<K>>,
    hot: Arc<HotSet<K>>,
}

impl<K: Resource + Send + Sync + 'static> Clone for CompactInformer<K> {
    fn clone(&self) -> Self {
        Self {
            informer: self.informer.clone(),
            hot: Arc::clone(&self.hot),
        }
    }
}

impl<K> CompactInformer<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    /// A compact informer over `informer`, whose transform must be
    /// [`packer`](Self::packer)`(hot, …)` (the factory's
    /// `compact_informer` builds it so).
    pub fn new(informer: SharedIndexInformer<Compact<K>>, hot: Arc<HotSet<K>>) -> Self {
        Self { informer, hot }
    }

    /// The informer's transform: runs `transform` on the whole object, packs
    /// the result and keeps it decoded in `hot` (its handlers and readers
    /// are about to ask for it). An object that cannot be packed stays
    /// whole (logged, counted in `failures`); one already packed is left
    /// as it is (transforms must be idempotent). Failures are counted in
    /// [`HotStats::pack_failures`](crate::HotStats).
    pub fn packer(
        hot: Arc<HotSet<K>>,
        transform: Option<Transform<K>>,
    ) -> impl Fn(Compact<K>) -> Compact<K> + Send + Sync + 'static {
        move |compact: Compact<K>| {
            let obj = match compact.take_fresh() {
                Ok(obj) => obj,
                Err(packed) => return packed,
            };
            let mut obj = match &transform {
                Some(t) => t(obj),
                None => obj,
            };
            match Compact::pack_from(&mut obj) {
                Ok(packed) => {
                    if let Some(id) = packed.id() {
                        hot.insert(id, Arc::new(obj));
                    }
                    packed
                }
                Err(error) => {
                    tracing::error!(%error, "compact informer: an object could not be packed; cached whole");
                    hot.count_pack_failure();
                    Compact::fresh(obj)
                }
            }
        }
    }

    /// The underlying informer, whose cache holds the packed objects.
    pub fn informer(&self) -> &SharedIndexInformer<Compact<K>> {
        &self.informer
    }

    /// The set of recently decoded objects.
    pub fn hot(&self) -> &Arc<HotSet<K>> {
        &self.hot
    }

    /// Reads of the cache, decoding on demand.
    pub fn lister(&self) -> CompactLister<K> {
        CompactLister::new(self.informer.indexer(), Arc::clone(&self.hot))
    }

    /// Registers a handler of whole objects (see
    /// [`SharedIndexInformer::add_event_handler`]).
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<HandlerRegistration<Compact<K>>, InformerError> {
        self.informer
            .add_event_handler(DecodingHandler::new(Arc::clone(&self.hot), handler))
    }

    /// Registers a handler of whole objects with its own resync period (see
    /// [`SharedIndexInformer::add_event_handler_with_resync`]).
    pub fn add_event_handler_with_resync(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync: Option<Duration>,
    ) -> Result<HandlerRegistration<Compact<K>>, InformerError> {
        self.informer.add_event_handler_with_resync(
            DecodingHandler::new(Arc::clone(&self.hot), handler),
            resync,
        )
    }

    /// Whether the cache has synced (see [`SharedIndexInformer::has_synced`]).
    pub fn has_synced(&self) -> bool {
        self.informer.has_synced()
    }

    /// Waits until the cache has synced.
    pub async fn synced(&self) {
        self.informer.synced().await;
    }
}

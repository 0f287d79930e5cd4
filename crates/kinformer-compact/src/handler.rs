//! [`DecodingHandler`]: a handler of whole objects on a compact informer.

use std::sync::Arc;

use kinformer_core::{DeletedFinalStateUnknown, DeletedObject, ResourceEventHandler};
use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::compact::Compact;
use crate::hot::HotSet;

/// Gives a [`ResourceEventHandler`] of `K` the whole objects of a compact
/// informer: each notification's objects are taken from the [`HotSet`]
/// (the informer put the new ones there when it packed them) or decoded.
/// A notification whose object does not decode is not delivered; the
/// failure is logged and counted in
/// [`HotStats::decode_failures`](crate::HotStats).
pub struct DecodingHandler<K, H> {
    hot: Arc<HotSet<K>>,
    handler: H,
}

impl<K, H> DecodingHandler<K, H> {
    /// `handler`, fed through `hot`.
    pub fn new(hot: Arc<HotSet<K>>, handler: H) -> Self {
        Self { hot, handler }
    }
}

impl<K, H> ResourceEventHandler<Compact<K>> for DecodingHandler<K, H>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    H: ResourceEventHandler<K>,
{
    fn on_add(&mut self, obj: &Arc<Compact<K>>, is_in_initial_list: bool) {
        if let Some(obj) = self.hot.get(obj) {
            self.handler.on_add(&obj, is_in_initial_list);
        }
    }

    fn on_update(&mut self, old: &Arc<Compact<K>>, new: &Arc<Compact<K>>) {
        // The new state first: it is the one most likely to be hot.
        let Some(new) = self.hot.get(new) else {
            return;
        };
        if let Some(old) = self.hot.get(old) {
            self.handler.on_update(&old, &new);
        }
    }

    fn on_delete(&mut self, obj: &DeletedObject<Compact<K>>) {
        let deleted = match obj {
            DeletedObject::Final(obj) => self.hot.get(obj).map(DeletedObject::Final),
            DeletedObject::Unknown(t) => self.hot.get(&t.last_known).map(|last_known| {
                DeletedObject::Unknown(DeletedFinalStateUnknown {
                    key: t.key.clone(),
                    last_known,
                })
            }),
        };
        if let Some(deleted) = deleted {
            self.handler.on_delete(&deleted);
        }
    }
}

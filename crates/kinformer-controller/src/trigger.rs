//! Triggers: the event handlers that turn informer events into keys of the
//! controller's work queue.
//!
//! Each trigger is one handler on one informer (so it runs on that
//! handler's thread, never on the cache's). Events of the initial list and
//! resyncs go in at [`Priority::Low`], live changes at [`Priority::Normal`].
//! A mapper that panics is caught and counted; the event is dropped.

use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::FutureExt;
use futures::future::BoxFuture;
use kinformer_core::panic::caught_panic_message;
use kinformer_core::{
    DeletedObject, HandlerRegistration, Indexer, ObjectKey, ResourceEventHandler,
    SharedIndexInformer, UID_INDEX,
};
use kube_core::Resource;

use crate::error::ControllerError;
use crate::priority::Priority;
use crate::queue::WorkQueue;
use crate::stats::Counters;

/// A mapping from an object to the keys it enqueues; it calls the sink once
/// per key.
pub(crate) type Map<C> = dyn Fn(&C, &mut dyn FnMut(ObjectKey)) + Send + Sync;

/// A handler registered by [`Trigger::install`]; removing it is the
/// uninstall.
pub(crate) struct Installed {
    remove: Box<dyn FnOnce() + Send>,
}

impl Installed {
    pub(crate) fn remove(self) {
        (self.remove)();
    }
}

/// Registers a trigger's handler with its informer.
type Install = dyn FnOnce(&WorkQueue, &Arc<Counters>) -> Result<Installed, ControllerError> + Send;

/// A trigger not yet installed: it is installed when the controller runs.
pub(crate) struct Trigger {
    install: Box<Install>,
    /// Resolves once the informer has synced.
    synced: BoxFuture<'static, ()>,
}

impl Trigger {
    /// Enqueues keys computed by `map` from the objects of `informer`.
    /// `map_old`: whether an update also maps the old state (a secondary
    /// object can move from one owner to another).
    pub(crate) fn new<C: Resource + Send + Sync + 'static>(
        informer: &SharedIndexInformer<C>,
        map: Arc<Map<C>>,
        map_old: bool,
    ) -> Self {
        let for_install = informer.clone();
        let for_synced = informer.clone();
        Self {
            install: Box::new(move |queue, counters| {
                let handler = Enqueue {
                    queue: queue.clone(),
                    map,
                    map_old,
                    counters: Arc::clone(counters),
                    _object: PhantomData,
                };
                let registration = for_install.add_event_handler(handler)?;
                Ok(uninstall(for_install, registration))
            }),
            synced: async move { for_synced.synced().await }.boxed(),
        }
    }

    pub(crate) fn install(
        self,
        queue: &WorkQueue,
        counters: &Arc<Counters>,
    ) -> Result<(Installed, BoxFuture<'static, ()>), ControllerError> {
        let installed = (self.install)(queue, counters)?;
        Ok((installed, self.synced))
    }
}

fn uninstall<C: Resource + Send + Sync + 'static>(
    informer: SharedIndexInformer<C>,
    registration: HandlerRegistration<C>,
) -> Installed {
    Installed {
        remove: Box::new(move || {
            informer.remove_event_handler(&registration);
        }),
    }
}

/// The primary informer's own keys.
pub(crate) fn own_keys<K: Resource>() -> Arc<Map<K>> {
    Arc::new(|obj: &K, sink: &mut dyn FnMut(ObjectKey)| {
        if let Ok(key) = ObjectKey::of(obj) {
            sink(key);
        }
    })
}

/// An owned object's owners, found by UID in the primary's [`UID_INDEX`]:
/// exact whatever the owners' scope, and a recreated owner of the same name
/// is not mistaken for the old one. An owner not in the primary's cache yet
/// is not enqueued: its own add event will be.
pub(crate) fn owners<K, C>(primary: Indexer<K>) -> Arc<Map<C>>
where
    K: Resource + Send + Sync + 'static,
    C: Resource + Send + Sync + 'static,
{
    Arc::new(move |obj: &C, sink: &mut dyn FnMut(ObjectKey)| {
        for owner in obj.meta().owner_references.iter().flatten() {
            if let Ok(keys) = primary.index_keys(UID_INDEX, &owner.uid) {
                keys.into_iter().for_each(&mut *sink);
            }
        }
    })
}

struct Enqueue<C> {
    queue: WorkQueue,
    map: Arc<Map<C>>,
    map_old: bool,
    counters: Arc<Counters>,
    _object: PhantomData<fn(C)>,
}

impl<C: Resource> Enqueue<C> {
    fn enqueue(&self, obj: &C, priority: Priority) {
        let mapped = catch_unwind(AssertUnwindSafe(|| {
            (self.map)(obj, &mut |key| self.queue.add_with_priority(key, priority));
        }));
        if let Err(panic) = mapped {
            self.counters.mapper_panics.fetch_add(1, Ordering::Relaxed);
            tracing::error!(
                name = ?obj.meta().name,
                namespace = ?obj.meta().namespace,
                panic = %caught_panic_message(panic),
                "a controller's key mapper panicked; the event is dropped"
            );
        }
    }
}

impl<C: Resource + 'static> ResourceEventHandler<C> for Enqueue<C> {
    fn on_add(&mut self, obj: &Arc<C>, is_in_initial_list: bool) {
        let priority = if is_in_initial_list {
            Priority::Low
        } else {
            Priority::Normal
        };
        self.enqueue(obj, priority);
    }

    fn on_update(&mut self, old: &Arc<C>, new: &Arc<C>) {
        // A resync (or a relist that found no change) re-delivers the same
        // resource version.
        let resync = old.meta().resource_version == new.meta().resource_version;
        let priority = if resync {
            Priority::Low
        } else {
            Priority::Normal
        };
        self.enqueue(new, priority);
        if self.map_old && !resync {
            self.enqueue(old, priority);
        }
    }

    fn on_delete(&mut self, obj: &DeletedObject<C>) {
        self.enqueue(obj.object(), Priority::Normal);
    }
}

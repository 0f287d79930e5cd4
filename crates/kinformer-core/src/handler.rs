//! Event handlers: what user code implements to react to cache changes.

use std::sync::Arc;

use crate::coalesce::Coalesce;
use crate::delta::DeletedObject;

/// Reacts to changes of the cache. Each registered handler runs on its own
/// thread, so a slow handler delays nobody else; the cache is always updated
/// before a handler hears of the change.
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{DeletedObject, ResourceEventHandler};
/// use k8s_openapi::api::core::v1::Pod;
///
/// struct CountPods(usize);
/// impl ResourceEventHandler<Pod> for CountPods {
///     fn on_add(&mut self, _pod: &Arc<Pod>, _is_in_initial_list: bool) { self.0 += 1; }
///     fn on_delete(&mut self, _pod: &DeletedObject<Pod>) { self.0 -= 1; }
/// }
/// ```
pub trait ResourceEventHandler<K>: Send + 'static {
    /// An object appeared in the cache. `is_in_initial_list` is true for
    /// objects of the first full list, and for the replay of the cache that a
    /// handler registered after start receives.
    fn on_add(&mut self, obj: &Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// An object changed (or a resync re-delivered it, then `old` and `new`
    /// have the same resource version).
    fn on_update(&mut self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object was deleted; a tombstone if the delete was missed. Only
    /// ever for an object this handler was shown through `on_add`.
    fn on_delete(&mut self, obj: &DeletedObject<K>) {
        let _ = obj;
    }
}

type AddFn<K> = Box<dyn FnMut(&Arc<K>, bool) + Send>;
type UpdateFn<K> = Box<dyn FnMut(&Arc<K>, &Arc<K>) + Send>;
type DeleteFn<K> = Box<dyn FnMut(&DeletedObject<K>) + Send>;

/// A handler built from closures; unset callbacks do nothing.
///
/// ```
/// use kinformer_core::EventHandlerFns;
/// use k8s_openapi::api::core::v1::Pod;
/// let handler = EventHandlerFns::<Pod>::new()
///     .on_add(|pod, _initial| println!("added {:?}", pod.metadata.name))
///     .on_delete(|pod| println!("deleted {:?}", pod.object().metadata.name));
/// # let _ = handler;
/// ```
pub struct EventHandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
}

impl<K> Default for EventHandlerFns<K> {
    fn default() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<K> EventHandlerFns<K> {
    /// A handler that does nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the add callback.
    pub fn on_add(mut self, f: impl FnMut(&Arc<K>, bool) + Send + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the update callback.
    pub fn on_update(mut self, f: impl FnMut(&Arc<K>, &Arc<K>) + Send + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Sets the delete callback.
    pub fn on_delete(mut self, f: impl FnMut(&DeletedObject<K>) + Send + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<K: 'static> ResourceEventHandler<K> for EventHandlerFns<K> {
    fn on_add(&mut self, obj: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &mut self.add {
            f(obj, is_in_initial_list);
        }
    }

    fn on_update(&mut self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &mut self.update {
            f(old, new);
        }
    }

    fn on_delete(&mut self, obj: &DeletedObject<K>) {
        if let Some(f) = &mut self.delete {
            f(obj);
        }
    }
}

/// One event for handlers, as produced by applying a delta to the cache.
#[derive(Debug)]
pub enum Notification<K> {
    /// See [`ResourceEventHandler::on_add`].
    Add {
        /// The new object.
        obj: Arc<K>,
        /// Part of the initial list.
        is_in_initial_list: bool,
    },
    /// See [`ResourceEventHandler::on_update`].
    Update {
        /// The previous cached state.
        old: Arc<K>,
        /// The new cached state.
        new: Arc<K>,
        /// Produced by a resync (or a relist that found no change): only
        /// handlers whose resync is due receive it.
        is_resync: bool,
    },
    /// See [`ResourceEventHandler::on_delete`].
    Delete(DeletedObject<K>),
}

impl<K> Clone for Notification<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Add {
                obj,
                is_in_initial_list,
            } => Self::Add {
                obj: Arc::clone(obj),
                is_in_initial_list: *is_in_initial_list,
            },
            Self::Update {
                old,
                new,
                is_resync,
            } => Self::Update {
                old: Arc::clone(old),
                new: Arc::clone(new),
                is_resync: *is_resync,
            },
            Self::Delete(d) => Self::Delete(d.clone()),
        }
    }
}

impl<K: 'static> Notification<K> {
    /// Delivers this notification to `handler`.
    pub fn deliver(&self, handler: &mut dyn ResourceEventHandler<K>) {
        match self {
            Self::Add {
                obj,
                is_in_initial_list,
            } => handler.on_add(obj, *is_in_initial_list),
            Self::Update { old, new, .. } => handler.on_update(old, new),
            Self::Delete(d) => handler.on_delete(d),
        }
    }
}

/// Pending notifications of one key coalesce like deltas: an add followed by
/// updates is delivered as one add of the newest state; updates collapse into
/// one update from the oldest to the newest state.
impl<K> Coalesce for Notification<K> {
    fn is_removal(&self) -> bool {
        matches!(self, Self::Delete(_))
    }

    fn is_first_sighting(&self) -> bool {
        matches!(self, Self::Add { .. })
    }

    fn merge(older: Self, newer: Self) -> Self {
        match (older, newer) {
            (
                Self::Add {
                    is_in_initial_list, ..
                },
                Self::Update { new, .. } | Self::Add { obj: new, .. },
            ) => Self::Add {
                obj: new,
                is_in_initial_list,
            },
            (
                Self::Update {
                    old, is_resync: r1, ..
                },
                Self::Update {
                    new, is_resync: r2, ..
                },
            ) => Self::Update {
                old,
                new,
                is_resync: r1 && r2,
            },
            (Self::Update { old, .. }, Self::Add { obj, .. }) => Self::Update {
                old,
                new: obj,
                is_resync: false,
            },
            (Self::Delete(a), Self::Delete(b)) => Self::Delete(DeletedObject::merge(a, b)),
            (_, newer) => newer,
        }
    }
}

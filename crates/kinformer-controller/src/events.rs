//! The async bridge: an informer's events as a [`futures::Stream`].

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use kinformer_core::{
    DeletedObject, HandlerRegistration, HandlerStats, Notification, ResourceEventHandler,
    SharedIndexInformer,
};
use kube_core::Resource;
use tokio::sync::mpsc;

use crate::error::ControllerError;

/// Events a stream buffers ahead of its consumer by default.
pub const DEFAULT_EVENT_BUFFER: usize = 1024;

/// [`events`](InformerEvents::events) on an informer.
pub trait InformerEvents<K: Resource + Send + Sync + 'static> {
    /// The informer's events as a [`Stream`] of [`Notification`]s: `Add`,
    /// `Update { old, new }` and `Delete` (a final state or a tombstone),
    /// each key's in the order the cache applied them, starting with an
    /// `Add` (initial) of every object already cached. See [`EventStream`].
    fn events(&self) -> Result<EventStream<K>, ControllerError>;

    /// [`events`](Self::events) with `buffer` events buffered ahead of the
    /// consumer (at least 1; [`DEFAULT_EVENT_BUFFER`]).
    fn events_with_buffer(&self, buffer: usize) -> Result<EventStream<K>, ControllerError>;
}

impl<K: Resource + Send + Sync + 'static> InformerEvents<K> for SharedIndexInformer<K> {
    fn events(&self) -> Result<EventStream<K>, ControllerError> {
        self.events_with_buffer(DEFAULT_EVENT_BUFFER)
    }

    fn events_with_buffer(&self, buffer: usize) -> Result<EventStream<K>, ControllerError> {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let registration = self.add_event_handler(Forward { tx })?;
        Ok(EventStream {
            rx,
            registration: Some(registration),
            informer: self.clone(),
        })
    }
}

/// An informer's events for async code: a handler that forwards them.
///
/// It is isolated like any handler: it runs on a handler thread of its own,
/// which waits when the stream's buffer is full, and the handler's backlog
/// then coalesces per key (each key's states in order up to the newest,
/// not every intermediate one), so a slow consumer never slows the cache or
/// other handlers and its memory stays bounded by the number of keys. The
/// backlog is observable through [`stats`](Self::stats) and
/// [`buffered_len`](Self::buffered_len). Dropping the stream removes the handler.
///
/// For kube-rs users: where `watcher(api, config)` yields
/// `Event::Apply/Delete/Init*` and `reflector(writer, stream)` keeps a
/// `Store`, here the informer is the store (its [`indexer`](SharedIndexInformer::indexer)
/// and listers) and the stream yields changes already applied to it, with
/// the previous state of updates; the `Init…InitDone` phases correspond to
/// the `Add`s with `is_in_initial_list` and
/// [`SharedIndexInformer::has_synced`].
///
/// ```no_run
/// use futures::StreamExt;
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_controller::InformerEvents;
/// use kinformer_core::{Notification, SharedIndexInformer};
///
/// # async fn run(pods: SharedIndexInformer<Pod>) -> Result<(), kinformer_controller::ControllerError> {
/// let mut events = pods.events()?;
/// while let Some(event) = events.next().await {
///     match event {
///         Notification::Add { obj, .. } => println!("added {:?}", obj.metadata.name),
///         Notification::Update { old, new, .. } => println!("{:?} -> {:?}", old.metadata.resource_version, new.metadata.resource_version),
///         Notification::Delete(d) => println!("deleted {:?}", d.object().metadata.name),
///     }
/// }
/// # Ok(()) }
/// ```
pub struct EventStream<K: Resource + Send + Sync + 'static> {
    rx: mpsc::Receiver<Notification<K>>,
    registration: Option<HandlerRegistration<K>>,
    informer: SharedIndexInformer<K>,
}

impl<K: Resource + Send + Sync + 'static> EventStream<K> {
    /// The forwarding handler's counters: its backlog, merged events,
    /// deliveries.
    pub fn stats(&self) -> HandlerStats {
        self.registration
            .as_ref()
            .map(HandlerRegistration::stats)
            .unwrap_or_default()
    }

    /// Events buffered ahead of the consumer.
    pub fn buffered_len(&self) -> usize {
        self.rx.len()
    }
}

impl<K: Resource + Send + Sync + 'static> Stream for EventStream<K> {
    type Item = Notification<K>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

impl<K: Resource + Send + Sync + 'static> Drop for EventStream<K> {
    fn drop(&mut self) {
        // Closed first, the handler's sends fail at once and its thread can
        // be joined without waiting for this consumer.
        self.rx.close();
        if let Some(registration) = self.registration.take() {
            self.informer.remove_event_handler(&registration);
        }
    }
}

impl<K: Resource + Send + Sync + 'static> fmt::Debug for EventStream<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventStream")
            .field("buffered", &self.buffered_len())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// The handler behind an [`EventStream`].
struct Forward<K> {
    tx: mpsc::Sender<Notification<K>>,
}

impl<K: Resource + Send + Sync + 'static> Forward<K> {
    fn send(&self, event: Notification<K>) {
        // A handler thread is no runtime thread, so it may block; an error
        // means the stream is gone and its handler being removed.
        let _ = self.tx.blocking_send(event);
    }
}

impl<K: Resource + Send + Sync + 'static> ResourceEventHandler<K> for Forward<K> {
    fn on_add(&mut self, obj: &Arc<K>, is_in_initial_list: bool) {
        self.send(Notification::Add {
            obj: Arc::clone(obj),
            is_in_initial_list,
        });
    }

    fn on_update(&mut self, old: &Arc<K>, new: &Arc<K>) {
        let is_resync = old.meta().resource_version == new.meta().resource_version;
        self.send(Notification::Update {
            old: Arc::clone(old),
            new: Arc::clone(new),
            is_resync,
        });
    }

    fn on_delete(&mut self, obj: &DeletedObject<K>) {
        self.send(Notification::Delete(obj.clone()));
    }
}

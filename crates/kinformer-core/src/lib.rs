//! kinformer-core: the synchronous heart of kinformer.
//!
//! ```text
//!  producer (reflector) ──► DeltaFifo ──► processor pool (OS threads) ──► Indexer (arc-swap snapshots)
//!                                                  │
//!                                                  └──► per-handler backlog ──► handler thread
//! ```
//!
//! - [`key`]: object keys (`namespace/name`).
//! - [`delta`]: deltas, tombstones, per-key coalescing.
//! - [`coalesce`]: the two-slot coalescing rule shared by the queue and handler backlogs.
//! - [`fifo`]: the DeltaFIFO and its streaming replace session.
//! - [`index`]: index functions (namespace, labels, owner UID, custom).
//! - [`indexer`]: the copy-on-write cache with secondary indexes.
//! - [`handler`]: event handler trait and notifications.
//! - [`reclaimer`]: where objects the informer lets go of are freed.
//! - [`synced`]: waiting for has-synced by notification, not polling.
//! - [`latency`]: histograms of the time from queue to cache and from cache to handler.
//! - [`registration`]: per-handler thread and backlog (batches as pushed, coalesced per key past a bound).
//! - [`informer`]: the shared index informer tying it all together.
//! - [`provenance`]: whether a cache's objects all came from a decoder.
//! - [`error`]: typed errors.
//!
//! No tokio and no HTTP here: producers call [`DeltaFifo`] methods from any
//! thread or task.

pub mod coalesce;
pub mod delta;
pub mod error;
pub mod fifo;
pub mod handler;
pub mod index;
pub mod indexer;
pub mod informer;
pub mod key;
pub mod latency;
pub mod panic;
mod processor;
pub mod provenance;
pub mod reclaimer;
pub mod registration;
pub mod synced;

pub use delta::{DeletedFinalStateUnknown, DeletedObject, Delta, DeltaType, Deltas};
pub use error::InformerError;
pub use fifo::{DeltaFifo, FifoStats, Observed, Popped, Prepared, ReplaceSession, Transform};
pub use handler::{EventHandlerFns, Notification, ResourceEventHandler};
pub use index::{
    IndexFn, Indexers, LABEL_INDEX, NAMESPACE_INDEX, OWNER_UID_INDEX, UID_INDEX, builtin_indexers,
    label_value,
};
pub use indexer::{Indexer, IndexerStats, NamespacedIndexer, Snapshot, WriteBatch};
pub use informer::{InformerBuilder, InformerMetrics, MIN_RESYNC_PERIOD, SharedIndexInformer};
pub use key::ObjectKey;
pub use latency::LatencyHistogram;
pub use provenance::Provenance;
pub use reclaimer::Reclaimer;
pub use registration::{HandlerRegistration, HandlerStats, MAX_WAITING_SEGMENTS};

//! kinformer: shared informers for Kubernetes with client-go's semantics.
//!
//! ```text
//!  SharedInformerFactory ──one per (type, namespace, selectors)──► SharedIndexInformer
//!        │ start()                                                    ▲ queue()
//!        └──► Reflector (tokio task: LIST/WATCH) ─────────────────────┘
//!                                   cache (Indexer) ◄── Lister<K> (lock-free reads)
//! ```
//!
//! Module map:
//! - [`factory`]: [`SharedInformerFactory`], its builder and lifecycle (start, sync, shutdown);
//! - [`options`]: [`InformerOptions`] (namespace, selectors) and the metadata transform;
//! - [`lister`]: [`Lister`] and [`NamespaceLister`], typed reads of the cache;
//! - [`health`]: each informer's health, readiness and liveness answers;
//! - [`metrics`]: Prometheus exposition of every informer's counters;
//! - [`tuning`]: [`Tuning`], the performance knobs and when to touch them;
//! - [`managed`]: one informer plus its reflector, as the factory keeps it;
//! - [`error`]: factory errors ([`FactoryError`]);
//! - [`compact`]: compact informers, whose cache keeps objects packed (the `kinformer-compact` crate);
//! - [`controller`]: the controller half (work queue, [`Controller`](controller::Controller),
//!   informer events as a `Stream`, read-your-writes), the `kinformer-controller` crate.
//!
//! The building blocks are re-exported: everything of [`kinformer_core`]
//! (informer, handlers, indexer, deltas) and the reflector's configuration.
//! [`alloc`] is an opt-in global allocator that lays each decoded object
//! out in one chunk (`#[global_allocator] static A:
//! kinformer::alloc::ObjectArenas<mimalloc::MiMalloc> = …`): faster under
//! heavy update streams, see its docs for the trade-offs. With it,
//! [`FactoryBuilder::release_objects_whole`] lets informers of types that
//! own their parts alone ([`alloc::OwnsPartsAlone`]) release replaced
//! objects a chunk at a time instead of dropping them part by part.
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use kinformer::{EventHandlerFns, Lister, SharedInformerFactory};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! // The cluster `kube::Config::infer` finds; LISTs through kube's client,
//! // watches on connections of their own.
//! let factory = SharedInformerFactory::try_default().await?;
//! let pods = factory.informer::<Pod>();
//! pods.add_event_handler(EventHandlerFns::new().on_add(|pod: &std::sync::Arc<Pod>, _| {
//!     println!("pod {:?}", pod.metadata.name);
//! }))?;
//! factory.start()?;
//! factory.wait_for_cache_sync(Duration::from_secs(60)).await?;
//! let lister = Lister::new(pods.indexer());
//! println!("{} pods in kube-system", lister.namespaced("kube-system").list_all().len());
//! factory.shutdown().await;
//! # Ok(()) }
//! ```

pub mod error;
pub mod factory;
pub mod health;
pub mod lister;
pub mod managed;
pub mod metrics;
pub mod options;
pub mod tuning;

pub use error::FactoryError;
pub use factory::{FactoryBuilder, SharedInformerFactory};
pub use health::{FactoryHealth, InformerHealth, Probe};
pub use lister::{Lister, NamespaceLister};
pub use options::{InformerOptions, MetaTransform, strip_managed_fields};
pub use tuning::Tuning;

/// The controller half: work queue, reconcile loop, event streams and
/// read-your-writes (the `kinformer-controller` crate).
pub use kinformer_controller as controller;

/// The compact cache: whole objects kept packed, decoded on demand (the
/// `kinformer-compact` crate; [`SharedInformerFactory::compact_informer`]).
pub use kinformer_compact as compact;

/// Object arenas: the opt-in global allocator for decoded objects.
pub mod alloc {
    pub use kinformer_alloc::{ObjectArenas, set_enabled};
    pub use kinformer_reflector::OwnsPartsAlone;
}
pub use kinformer_core::{
    DeletedFinalStateUnknown, DeletedObject, Delta, DeltaFifo, DeltaType, Deltas, EventHandlerFns,
    FifoStats, HandlerRegistration, HandlerStats, IndexFn, Indexer, IndexerStats, Indexers,
    InformerBuilder, InformerError, InformerMetrics, LABEL_INDEX, MIN_RESYNC_PERIOD,
    NAMESPACE_INDEX, NamespacedIndexer, Notification, OWNER_UID_INDEX, ObjectKey,
    ResourceEventHandler, SharedIndexInformer, Snapshot, Transform, UID_INDEX, builtin_indexers,
    label_value,
};
pub use kinformer_reflector::{
    BackoffConfig, CancellationToken, DirectWatch, ListWatchTarget, Phase, Reflector,
    ReflectorConfig, ReflectorError, ReflectorMetrics, ReflectorStatus, ShardControl,
    ShardSelector,
};

//! The core crate's one error type.

/// What can fail in the core: keying an object, producing into the
/// [`DeltaFifo`](crate::DeltaFifo), reading or adding indexes, an index
/// function, and the informer's lifecycle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InformerError {
    /// The object's `metadata.name` is absent or empty: it has no cache
    /// key and was not queued.
    #[error("object has no metadata.name (namespace {namespace:?})")]
    MissingName {
        /// The namespace the object claimed, if any.
        namespace: Option<String>,
    },
    /// The queue's transform panicked on this object; it was not queued.
    #[error("transform panicked: {0}")]
    TransformPanicked(String),
    /// The queue was closed; nothing more is accepted.
    #[error("the delta FIFO is closed")]
    Closed,
    /// No index of that name is registered.
    #[error("index {0:?} does not exist")]
    NoSuchIndex(String),
    /// An index of that name is already registered.
    #[error("index {0:?} already exists")]
    IndexExists(String),
    /// An index function could not compute the values of one object. The
    /// object is still cached; it is left out of that index, the failure
    /// is logged and counted in
    /// [`IndexerStats::index_fn_failures`](crate::IndexerStats).
    #[error("index function failed: {0}")]
    IndexFn(String),
    /// The informer has been shut down.
    #[error("the informer is shut down")]
    ShutDown,
    /// An OS thread could not be spawned.
    #[error("could not spawn thread {name}: {reason}")]
    Spawn {
        /// Thread name.
        name: String,
        /// The OS error.
        reason: String,
    },
}

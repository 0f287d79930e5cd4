//! Typed errors of the core crate.

use thiserror::Error;

/// An object could not be given a cache key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// `metadata.name` is absent or empty.
    #[error("object has no metadata.name (namespace {namespace:?})")]
    MissingName {
        /// The namespace the object claimed, if any.
        namespace: Option<String>,
    },
}

/// Errors of [`DeltaFifo`](crate::DeltaFifo) producers.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FifoError {
    /// The object has no usable key; it was not queued.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The transform panicked on this object; it was not queued.
    #[error("transform panicked: {0}")]
    TransformPanicked(String),
    /// The queue was closed; nothing more is accepted.
    #[error("the delta FIFO is closed")]
    Closed,
}

/// Errors of [`Indexer`](crate::Indexer) reads and index management.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IndexerError {
    /// No index of that name is registered.
    #[error("index {0:?} does not exist")]
    NoSuchIndex(String),
    /// An index of that name is already registered.
    #[error("index {0:?} already exists")]
    IndexExists(String),
}

/// An index function could not compute the values of one object.
///
/// The object is still cached; it is left out of that index, the failure is
/// logged and counted in [`IndexerStats::index_fn_failures`](crate::IndexerStats).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("index function failed: {0}")]
pub struct IndexFnError(pub String);

/// Errors of informer lifecycle operations.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InformerError {
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
    /// Index management failed.
    #[error(transparent)]
    Indexer(#[from] IndexerError),
}

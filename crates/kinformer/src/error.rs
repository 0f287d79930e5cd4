//! The facade's one error type.

use std::time::Duration;

use thiserror::Error;

/// A factory operation failed, or a wait for caches to sync ended unsynced.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FactoryError {
    /// The factory was shut down (before the call, or while it waited).
    #[error("the informer factory is shut down")]
    ShutDown,
    /// A wait for caches to sync timed out; these informers are still
    /// unsynced.
    #[error("caches not synced after {timeout:?}: {}", unsynced.join(", "))]
    SyncTimeout {
        /// The timeout.
        timeout: Duration,
        /// Names of the informers still unsynced.
        unsynced: Vec<String>,
    },
    /// No tokio runtime was given or current, and none could be created.
    #[error("could not create a tokio runtime: {0}")]
    Runtime(String),
    /// An informer could not start its threads.
    #[error(transparent)]
    Informer(#[from] kinformer_core::InformerError),
    /// No cluster configuration was found (in-cluster or kubeconfig).
    #[error("no cluster configuration: {0}")]
    Config(#[source] kube::config::InferConfigError),
    /// A client could not be built from the configuration.
    #[error("could not build a client: {0}")]
    Client(#[source] kube::Error),
}

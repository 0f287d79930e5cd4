//! Errors of the factory.

use thiserror::Error;

/// A factory operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FactoryError {
    /// The factory was shut down.
    #[error("the informer factory is shut down")]
    ShutDown,
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

//! Errors of the factory.

use thiserror::Error;

/// A factory operation failed.
#[derive(Debug, Error)]
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
}

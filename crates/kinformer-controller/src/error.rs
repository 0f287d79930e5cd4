//! [`ControllerError`]: the one error type of this crate.

use std::time::Duration;

use kinformer_core::{InformerError, ObjectKey};

/// What can go wrong in the controller layer (not in a reconcile: a
/// reconcile's own error goes to the error policy).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// Registering a handler or an index with an informer failed (for
    /// instance because the informer is shut down).
    #[error("informer: {0}")]
    Informer(#[from] InformerError),
    /// [`VersionWaiter::wait_for`](crate::VersionWaiter::wait_for) gave up:
    /// the cache had not reached the resource version in time.
    #[error(
        "the cache did not reach resourceVersion {resource_version} of {key} within {waited:?}"
    )]
    WaitTimeout {
        /// The awaited object.
        key: ObjectKey,
        /// The awaited resource version.
        resource_version: String,
        /// How long the caller waited.
        waited: Duration,
    },
}

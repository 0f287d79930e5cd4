//! Waiting until informers' caches have synced: the error a wait ends
//! with (the waits are [`SharedInformerFactory::wait_for_cache_sync`](crate::SharedInformerFactory::wait_for_cache_sync)
//! and, per informer and registration, `synced()`).

use std::time::Duration;

use thiserror::Error;

/// Caches did not sync in time.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SyncError {
    /// The timeout passed; these informers are still unsynced.
    #[error("caches not synced after {timeout:?}: {}", unsynced.join(", "))]
    Timeout {
        /// The timeout.
        timeout: Duration,
        /// Names of the informers still unsynced.
        unsynced: Vec<String>,
    },
    /// The factory was shut down while waiting.
    #[error("the informer factory was shut down")]
    ShutDown,
}

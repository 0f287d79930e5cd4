//! Waiting until informers' caches have synced.

use std::time::{Duration, Instant};

use thiserror::Error;

/// How often sync state is polled.
pub(crate) const POLL: Duration = Duration::from_millis(10);

/// Caches did not sync in time.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
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

/// Polls `unsynced` until it is empty or `timeout` passes (blocking).
pub(crate) fn wait_blocking(
    timeout: Duration,
    mut unsynced: impl FnMut() -> Result<Vec<String>, SyncError>,
) -> Result<(), SyncError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = unsynced()?;
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(SyncError::Timeout {
                timeout,
                unsynced: left,
            });
        }
        std::thread::sleep(POLL);
    }
}

/// Polls `unsynced` until it is empty or `timeout` passes.
pub(crate) async fn wait(
    timeout: Duration,
    mut unsynced: impl FnMut() -> Result<Vec<String>, SyncError>,
) -> Result<(), SyncError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = unsynced()?;
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(SyncError::Timeout {
                timeout,
                unsynced: left,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

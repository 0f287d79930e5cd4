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

/// One poll: `Some(result)` when done (synced, or the deadline passed),
/// `None` to poll again.
fn poll_once(
    timeout: Duration,
    deadline: Instant,
    unsynced: &mut impl FnMut() -> Result<Vec<String>, SyncError>,
) -> Option<Result<(), SyncError>> {
    match unsynced() {
        Err(e) => Some(Err(e)),
        Ok(left) if left.is_empty() => Some(Ok(())),
        Ok(left) if Instant::now() >= deadline => Some(Err(SyncError::Timeout {
            timeout,
            unsynced: left,
        })),
        Ok(_) => None,
    }
}

/// Polls `unsynced` until it is empty or `timeout` passes (blocking).
pub(crate) fn wait_blocking(
    timeout: Duration,
    mut unsynced: impl FnMut() -> Result<Vec<String>, SyncError>,
) -> Result<(), SyncError> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(done) = poll_once(timeout, deadline, &mut unsynced) {
            return done;
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
        if let Some(done) = poll_once(timeout, deadline, &mut unsynced) {
            return done;
        }
        tokio::time::sleep(POLL).await;
    }
}

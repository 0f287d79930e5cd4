//! [`Action`]: what the controller does with a key after its reconcile.

use std::time::Duration;

/// What to do with an object's key once its reconcile has finished: the
/// value of a successful reconcile and of the error policy.
///
/// ```
/// use std::time::Duration;
/// use kinformer_controller::Action;
///
/// assert_eq!(Action::requeue(Duration::from_secs(300)).requeue_after(), Some(Duration::from_secs(300)));
/// assert_eq!(Action::await_change().requeue_after(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action(pub(crate) Next);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    Requeue(Duration),
    AwaitChange,
    Backoff,
}

impl Action {
    /// Reconcile the object again after `after`, or sooner if it or one of
    /// the objects mapped to it changes.
    pub fn requeue(after: Duration) -> Self {
        Self(Next::Requeue(after))
    }

    /// Reconcile the object again only when it or an object mapped to it
    /// changes (or on a resync or `reconcile_all`).
    pub fn await_change() -> Self {
        Self(Next::AwaitChange)
    }

    /// Reconcile the object again after the work queue's rate limiter's
    /// delay for it: per key exponential backoff, within an overall budget
    /// (client-go's `AddRateLimited`). What the default error policy returns.
    pub fn backoff() -> Self {
        Self(Next::Backoff)
    }

    /// The fixed delay of [`requeue`](Self::requeue); `None` otherwise.
    pub fn requeue_after(&self) -> Option<Duration> {
        match self.0 {
            Next::Requeue(after) => Some(after),
            Next::AwaitChange | Next::Backoff => None,
        }
    }
}

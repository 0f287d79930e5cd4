//! Changing a running reflector's shard.
//!
//! A [`ShardControl`] holds the shard a reflector lists and watches (see
//! [`ListWatchTarget::shard`](crate::ListWatchTarget::shard)). Setting
//! another one ends the reflector's current list or watch at once and
//! starts a list of the new shard, with no backoff: the cache is not
//! cleared, and the relist's replace delivers the objects that left the
//! shard as deletes, those that entered it as adds, and the ones that stayed
//! as resyncs (`is_resync` updates) when they did not change. That is how a
//! replica takes over a dead peer's range, or gives one back, while it keeps
//! serving reads from the ranges it keeps.

use std::sync::Arc;

use kinformer_wire::shard::ShardSelector;
use tokio::sync::watch;

/// The shard of one running reflector; clones control the same reflector.
///
/// ```
/// use kinformer_reflector::{ShardControl, ShardSelector};
///
/// let control = ShardControl::new(Some(ShardSelector::uid_shard(0, 3)));
/// // This replica takes over shard 1 as well.
/// let both = ShardSelector::uid_shard(0, 3).union(&ShardSelector::uid_shard(1, 3)).unwrap();
/// assert!(control.set(Some(both.clone())));
/// assert_eq!(control.current(), Some(both));
/// ```
#[derive(Clone, Debug)]
pub struct ShardControl {
    tx: Arc<watch::Sender<Option<ShardSelector>>>,
}

impl ShardControl {
    /// A control starting at `shard` (`None`: the whole collection).
    pub fn new(shard: Option<ShardSelector>) -> Self {
        Self {
            tx: Arc::new(watch::Sender::new(shard)),
        }
    }

    /// Moves the reflector to `shard` (`None`: the whole collection); false
    /// when that is already its shard (nothing happens).
    pub fn set(&self, shard: Option<ShardSelector>) -> bool {
        self.tx.send_if_modified(|current| {
            if *current == shard {
                return false;
            }
            *current = shard;
            true
        })
    }

    /// The shard set last.
    pub fn current(&self) -> Option<ShardSelector> {
        self.tx.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Option<ShardSelector>> {
        self.tx.subscribe()
    }
}

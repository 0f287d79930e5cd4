//! Deltas: what happened to one object, and how the deltas of one key coalesce.

use std::sync::Arc;

use crate::coalesce::{Coalesce, Coalesced};
use crate::key::ObjectKey;

/// The kind of change a [`Delta`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeltaType {
    /// The object was created (a watch `ADDED`).
    Added,
    /// The object was modified (a watch `MODIFIED`).
    Updated,
    /// The object was deleted (a watch `DELETED`, or a relist tombstone).
    Deleted,
    /// The object was part of a full list that replaced the cache.
    Replaced,
    /// A periodic resync re-delivered the cached object.
    Sync,
}

/// A deletion whose final state was not observed: the object vanished while
/// the watch was down, and a relist found it missing. Carries the last state
/// the cache (or queue) knew.
#[derive(Debug)]
pub struct DeletedFinalStateUnknown<K> {
    /// The key of the deleted object.
    pub key: ObjectKey,
    /// The last state known before the deletion.
    pub last_known: Arc<K>,
}

impl<K> Clone for DeletedFinalStateUnknown<K> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            last_known: Arc::clone(&self.last_known),
        }
    }
}

/// The object handed to a delete handler.
#[derive(Debug)]
pub enum DeletedObject<K> {
    /// The final state, as sent by the server with the delete.
    Final(Arc<K>),
    /// A tombstone: the delete was missed and found by a relist.
    Unknown(DeletedFinalStateUnknown<K>),
}

impl<K> Clone for DeletedObject<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Final(o) => Self::Final(Arc::clone(o)),
            Self::Unknown(t) => Self::Unknown(t.clone()),
        }
    }
}

impl<K> DeletedObject<K> {
    /// The object: the final state, or the tombstone's last known state.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Final(o) => o,
            Self::Unknown(t) => &t.last_known,
        }
    }

    /// Two consecutive deletions of one key collapse into one: the older,
    /// unless only the newer carries a final state.
    pub(crate) fn merge(older: Self, newer: Self) -> Self {
        match (&older, &newer) {
            (Self::Unknown(_), Self::Final(_)) => newer,
            _ => older,
        }
    }

    /// Whether this is a tombstone ([`DeletedFinalStateUnknown`]).
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Unknown(_))
    }
}

/// One change to one object.
#[derive(Debug)]
pub enum Delta<K> {
    /// See [`DeltaType::Added`].
    Added(Arc<K>),
    /// See [`DeltaType::Updated`].
    Updated(Arc<K>),
    /// See [`DeltaType::Replaced`].
    Replaced(Arc<K>),
    /// See [`DeltaType::Sync`].
    Sync(Arc<K>),
    /// See [`DeltaType::Deleted`].
    Deleted(DeletedObject<K>),
}

impl<K> Clone for Delta<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Added(o) => Self::Added(Arc::clone(o)),
            Self::Updated(o) => Self::Updated(Arc::clone(o)),
            Self::Replaced(o) => Self::Replaced(Arc::clone(o)),
            Self::Sync(o) => Self::Sync(Arc::clone(o)),
            Self::Deleted(d) => Self::Deleted(d.clone()),
        }
    }
}

impl<K> Delta<K> {
    /// The kind of change.
    pub fn kind(&self) -> DeltaType {
        match self {
            Self::Added(_) => DeltaType::Added,
            Self::Updated(_) => DeltaType::Updated,
            Self::Replaced(_) => DeltaType::Replaced,
            Self::Sync(_) => DeltaType::Sync,
            Self::Deleted(_) => DeltaType::Deleted,
        }
    }

    /// The object carried (for a tombstone, its last known state).
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Added(o) | Self::Updated(o) | Self::Replaced(o) | Self::Sync(o) => o,
            Self::Deleted(d) => d.object(),
        }
    }
}

/// The pending deltas of one key, coalesced so that a key never holds more
/// than two (see [`Coalesced`] for the rules): consecutive changes collapse
/// into the newest (a `Sync` never overrides a real change), two consecutive
/// deletes collapse into one (a final state beats a tombstone). Memory per
/// key is therefore constant, whatever the event rate.
pub type Deltas<K> = Coalesced<Delta<K>>;

impl<K> Coalesce for Delta<K> {
    fn is_removal(&self) -> bool {
        matches!(self, Self::Deleted(_))
    }

    fn merge(older: Self, newer: Self) -> Self {
        match (older, newer) {
            (Delta::Deleted(a), Delta::Deleted(b)) => Delta::Deleted(DeletedObject::merge(a, b)),
            (older, Delta::Sync(_)) if !matches!(older, Delta::Sync(_)) => older,
            (_, newer) => newer,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_core::ObjectMeta;

    fn cm(rv: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some("a".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn shape(d: &Deltas<ConfigMap>) -> Vec<(DeltaType, String)> {
        d.iter()
            .map(|d| {
                (
                    d.kind(),
                    d.object()
                        .metadata
                        .resource_version
                        .clone()
                        .unwrap_or_default(),
                )
            })
            .collect()
    }

    #[test]
    fn updates_coalesce_to_newest() {
        let mut d = Deltas::new(Delta::Added(cm("1")));
        d.push(Delta::Updated(cm("2")));
        d.push(Delta::Updated(cm("3")));
        assert_eq!(shape(&d), vec![(DeltaType::Updated, "3".into())]);
    }

    #[test]
    fn sync_does_not_override_pending_change() {
        let mut d = Deltas::new(Delta::Updated(cm("2")));
        d.push(Delta::Sync(cm("1")));
        assert_eq!(shape(&d), vec![(DeltaType::Updated, "2".into())]);
    }

    #[test]
    fn consecutive_deletes_collapse_preferring_final_state() {
        let key = ObjectKey::parse("a");
        let mut d = Deltas::new(Delta::Deleted(DeletedObject::Unknown(
            DeletedFinalStateUnknown {
                key,
                last_known: cm("1"),
            },
        )));
        d.push(Delta::Deleted(DeletedObject::Final(cm("2"))));
        assert_eq!(d.len(), 1);
        assert!(matches!(
            d.newest(),
            Some(Delta::Deleted(DeletedObject::Final(_)))
        ));
    }

    #[test]
    fn bounded_at_two_deltas() {
        let mut d = Deltas::new(Delta::Added(cm("1")));
        for i in 2..100u64 {
            if i.is_multiple_of(2) {
                d.push(Delta::Deleted(DeletedObject::Final(cm(&i.to_string()))));
            } else {
                d.push(Delta::Added(cm(&i.to_string())));
            }
            assert!(d.len() <= 2);
        }
        // [A1] + D2 → [A1, D2]; + A3 → [D2, A3]; + D4 → [D2]; ... + A99 → [D2, A99].
        assert_eq!(
            shape(&d),
            vec![
                (DeltaType::Deleted, "2".into()),
                (DeltaType::Added, "99".into())
            ]
        );
        d.push(Delta::Added(cm("100")));
        assert_eq!(
            shape(&d),
            vec![
                (DeltaType::Deleted, "2".into()),
                (DeltaType::Added, "100".into())
            ]
        );
    }

    #[test]
    fn add_then_delete_keeps_both() {
        let mut d = Deltas::new(Delta::Added(cm("1")));
        d.push(Delta::Deleted(DeletedObject::Final(cm("2"))));
        assert_eq!(
            shape(&d),
            vec![
                (DeltaType::Added, "1".into()),
                (DeltaType::Deleted, "2".into())
            ]
        );
        d.push(Delta::Added(cm("3")));
        assert_eq!(
            shape(&d),
            vec![
                (DeltaType::Deleted, "2".into()),
                (DeltaType::Added, "3".into())
            ]
        );
    }
}

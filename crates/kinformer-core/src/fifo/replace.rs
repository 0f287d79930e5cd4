//! A `replace` fed piece by piece: the objects of a full list arrive page by
//! page (or event by event for a WatchList) and are queued as they arrive,
//! so the processor pool applies a list while it is still streaming (the
//! cache fills during the list, not after it) and a relist never holds the
//! whole collection a second time beside the cache. The tombstones for what
//! the list lacked are computed when it ends.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use kube_core::Resource;

use super::{DeltaFifo, Hasher, ObjectDigest, Prepared};
use crate::delta::{DeletedFinalStateUnknown, DeletedObject, Delta};
use crate::error::InformerError;
use crate::key::ObjectKey;

/// A full list being fed to a [`DeltaFifo`], begun by
/// [`DeltaFifo::begin_replace`].
///
/// Each pushed object becomes a `Replaced` delta, queued at once:
/// consumers apply the list while it is still arriving, which keeps a relist
/// from doubling memory and lets the first list's processing overlap its
/// transfer and decoding. `finish` then queues a `Deleted` tombstone
/// ([`DeletedFinalStateUnknown`]) for every key that is cached or queued but
/// was not listed, and records the list's resourceVersion.
///
/// A session dropped without `finish` (the list broke off) emits no
/// tombstone and leaves what it queued in place (each one a real state; the
/// next list settles the rest).
///
/// The first list counts towards [`DeltaFifo::has_synced`], which stays
/// false until it is finished and every item of it (tombstones included) is
/// processed: before that, readers may see the cache partly filled, as
/// with client-go before `HasSynced`. The session's producer should not
/// queue other changes while it is open.
pub struct ReplaceSession<'a, K> {
    fifo: &'a DeltaFifo<K>,
    first: bool,
    /// Keys queued so far.
    listed: HashSet<ObjectKey, Hasher>,
}

impl<K: Resource> DeltaFifo<K> {
    /// Begins a streaming full list (see [`ReplaceSession`]).
    pub fn begin_replace(&self) -> Result<ReplaceSession<'_, K>, InformerError> {
        if self.is_closed() {
            return Err(InformerError::Closed);
        }
        let first = !self.state.lock().populated;
        self.open_lists.fetch_add(1, Ordering::Relaxed);
        Ok(ReplaceSession {
            fifo: self,
            first,
            listed: HashSet::with_hasher(Hasher::default()),
        })
    }
}

impl<K: Resource> ReplaceSession<'_, K> {
    /// Adds listed objects, queued as `Replaced` in order under one short
    /// lock. A key pushed twice keeps its last object (logged, counted).
    pub fn push(
        &mut self,
        objects: impl IntoIterator<Item = Prepared<K>>,
    ) -> Result<(), InformerError> {
        let fifo = self.fifo;
        if fifo.is_closed() {
            return Err(InformerError::Closed);
        }
        let mut st = fifo.lock();
        for p in objects {
            if !self.listed.insert(p.key.clone()) {
                fifo.counters.duplicate_keys.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(key = %p.key, "key listed twice in one replace; the last object wins");
            }
            let digest = ObjectDigest::of(&p.object, p.digest);
            fifo.enqueue(
                &mut st,
                p.key,
                Delta::Replaced(p.object),
                self.first,
                Some(digest),
            );
        }
        Ok(())
    }

    /// An object deleted while the list streams (a WatchList may report
    /// one): the key no longer counts as listed, and the deletion is queued.
    pub fn delete(&mut self, object: Prepared<K>) -> Result<(), InformerError> {
        let fifo = self.fifo;
        if fifo.is_closed() {
            return Err(InformerError::Closed);
        }
        self.listed.remove(&object.key);
        let mut st = fifo.lock();
        let delta = Delta::Deleted(DeletedObject::Final(object.object));
        fifo.enqueue(&mut st, object.key, delta, self.first, None);
        Ok(())
    }

    /// Distinct keys listed so far.
    pub fn len(&self) -> usize {
        self.listed.len()
    }

    /// Whether nothing has been listed yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends the list at `resource_version`: tombstones every key cached or
    /// queued but not listed, carrying its last known state.
    pub fn finish(mut self, resource_version: &str) -> Result<(), InformerError> {
        let fifo = self.fifo;
        if fifo.is_closed() {
            return Err(InformerError::Closed);
        }
        let listed = std::mem::take(&mut self.listed);
        let mut st = fifo.lock();
        // Loaded under the lock: every key absent from `items` has been fully
        // applied to the cache, so the cache is its truth.
        let cached = fifo.known.snapshot();
        let mut tombstones = Vec::new();
        for (key, e) in &st.items {
            if listed.contains(key) {
                continue;
            }
            let newest = match &e.pending {
                Some(p) => match p.newest() {
                    Some(Delta::Deleted(_)) | None => None,
                    Some(d) => Some(std::sync::Arc::clone(d.object())),
                },
                None => e.in_flight_newest.clone(),
            };
            if let Some(obj) = newest {
                tombstones.push((key.clone(), obj));
            }
        }
        for (key, obj) in cached.iter() {
            if !listed.contains(key) && !st.items.contains_key(key) {
                tombstones.push((key.clone(), std::sync::Arc::clone(obj)));
            }
        }
        fifo.counters
            .tombstones
            .fetch_add(tombstones.len() as u64, Ordering::Relaxed);
        for (key, last_known) in tombstones {
            let tombstone = DeletedFinalStateUnknown {
                key: key.clone(),
                last_known,
            };
            let delta = Delta::Deleted(DeletedObject::Unknown(tombstone));
            fifo.enqueue(&mut st, key, delta, self.first, None);
        }
        st.populated = true;
        st.last_sync_resource_version = resource_version.to_string();
        if st.initial_remaining == 0 {
            // Every key of the list was applied before it ended (or it was
            // empty): synced now, with no pool thread left to say so.
            fifo.signal.notify();
        }
        Ok(())
    }
}

impl<K> Drop for ReplaceSession<'_, K> {
    fn drop(&mut self) {
        self.fifo.open_lists.fetch_sub(1, Ordering::Relaxed);
    }
}

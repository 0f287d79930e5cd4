//! A `replace` fed piece by piece: the objects of a full list arrive page by
//! page (or event by event for a WatchList), and the tombstones for what the
//! list lacked are computed when it ends.
//!
//! The first list is staged and queued in one step when it ends (nothing is
//! cached yet, so staging the final, transformed objects costs no second
//! copy). Later lists (relists) are queued as they arrive, so a relist never
//! holds the whole collection a second time beside the cache.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use kube_core::Resource;

use super::{DeltaFifo, Hasher, Prepared};
use crate::delta::{DeletedFinalStateUnknown, DeletedObject, Delta};
use crate::error::FifoError;
use crate::key::ObjectKey;

/// A full list being fed to a [`DeltaFifo`], begun by
/// [`DeltaFifo::begin_replace`].
///
/// Each pushed object becomes a `Replaced` delta. For the queue's first
/// list they are staged and queued together by [`finish`](Self::finish), so
/// consumers see the initial list in one step; for later lists they are
/// queued at once (consumers apply them while the list is still arriving),
/// which keeps a relist from doubling memory. `finish` then queues a
/// `Deleted` tombstone ([`DeletedFinalStateUnknown`]) for every key that is
/// cached or queued but was not listed, and records the list's
/// resourceVersion.
///
/// A session dropped without `finish` (the list broke off) emits no
/// tombstone; a relist leaves what it already queued in place (each one a
/// real state; the next list settles the rest), a first list queues nothing.
///
/// The first list counts towards [`DeltaFifo::has_synced`], which stays
/// false until it is finished and fully processed. The session's producer
/// should not queue other changes while it is open.
pub struct ReplaceSession<'a, K> {
    fifo: &'a DeltaFifo<K>,
    first: bool,
    /// Keys queued so far (relists).
    listed: HashSet<ObjectKey, Hasher>,
    /// The first list, staged: objects in arrival order (`None` once
    /// deleted) and each key's position.
    staged: Option<Staged<K>>,
}

struct Staged<K> {
    objects: Vec<Option<Prepared<K>>>,
    position: HashMap<ObjectKey, usize, Hasher>,
}

impl<K: Resource> DeltaFifo<K> {
    /// Begins a streaming full list (see [`ReplaceSession`]).
    pub fn begin_replace(&self) -> Result<ReplaceSession<'_, K>, FifoError> {
        if self.is_closed() {
            return Err(FifoError::Closed);
        }
        let first = !self.state.lock().populated;
        Ok(ReplaceSession {
            fifo: self,
            first,
            listed: HashSet::with_hasher(Hasher::default()),
            staged: first.then(|| Staged {
                objects: Vec::new(),
                position: HashMap::with_hasher(Hasher::default()),
            }),
        })
    }
}

impl<K: Resource> ReplaceSession<'_, K> {
    /// Adds listed objects (staged for a first list, else queued as
    /// `Replaced` in order under one short lock). A key pushed twice keeps
    /// its last object (logged, counted).
    pub fn push(
        &mut self,
        objects: impl IntoIterator<Item = Prepared<K>>,
    ) -> Result<(), FifoError> {
        let fifo = self.fifo;
        if fifo.is_closed() {
            return Err(FifoError::Closed);
        }
        if let Some(staged) = &mut self.staged {
            for p in objects {
                match staged.position.entry(p.key.clone()) {
                    Entry::Occupied(at) => {
                        fifo.counters.duplicate_keys.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(key = %p.key, "key listed twice in one replace; the last object wins");
                        staged.objects[*at.get()] = Some(p);
                    }
                    Entry::Vacant(v) => {
                        v.insert(staged.objects.len());
                        staged.objects.push(Some(p));
                    }
                }
            }
            return Ok(());
        }
        let mut st = fifo.state.lock();
        for p in objects {
            if !self.listed.insert(p.key.clone()) {
                fifo.counters.duplicate_keys.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(key = %p.key, "key listed twice in one replace; the last object wins");
            }
            fifo.enqueue(&mut st, p.key, Delta::Replaced(p.object), self.first);
        }
        Ok(())
    }

    /// An object deleted while the list streams (a WatchList may report
    /// one): the key no longer counts as listed. A staged first list just
    /// forgets it; a relist queues the deletion.
    pub fn delete(&mut self, object: Prepared<K>) -> Result<(), FifoError> {
        let fifo = self.fifo;
        if fifo.is_closed() {
            return Err(FifoError::Closed);
        }
        if let Some(staged) = &mut self.staged {
            if let Some(at) = staged.position.remove(&object.key) {
                staged.objects[at] = None;
            }
            return Ok(());
        }
        self.listed.remove(&object.key);
        let mut st = fifo.state.lock();
        let delta = Delta::Deleted(DeletedObject::Final(object.object));
        fifo.enqueue(&mut st, object.key, delta, self.first);
        Ok(())
    }

    /// Distinct keys listed so far.
    pub fn len(&self) -> usize {
        match &self.staged {
            Some(s) => s.position.len(),
            None => self.listed.len(),
        }
    }

    /// Whether nothing has been listed yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends the list at `resource_version`: tombstones every key cached or
    /// queued but not listed, carrying its last known state.
    pub fn finish(self, resource_version: &str) -> Result<(), FifoError> {
        let fifo = self.fifo;
        if fifo.is_closed() {
            return Err(FifoError::Closed);
        }
        let mut listed = self.listed;
        let mut st = fifo.state.lock();
        if let Some(staged) = self.staged {
            listed.reserve(staged.position.len());
            for p in staged.objects.into_iter().flatten() {
                listed.insert(p.key.clone());
                fifo.enqueue(&mut st, p.key, Delta::Replaced(p.object), self.first);
            }
        }
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
            fifo.enqueue(&mut st, key, delta, self.first);
        }
        st.populated = true;
        st.last_sync_resource_version = resource_version.to_string();
        Ok(())
    }
}

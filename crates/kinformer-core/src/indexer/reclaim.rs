//! When retired trie nodes and entries may be freed.
//!
//! Every published [`Snapshot`] aliases the writer's tries as they were at
//! publish time. What the writer retires while building the next version is
//! still reachable from the current snapshot and from every older one, so it
//! is handed to the current snapshot together with a reference to its
//! successor:
//!
//! ```text
//!  S1 ──next──► S2 ──next──► S3 (latest, also held by the ArcSwap)
//!  garbage 1→2  garbage 2→3
//! ```
//!
//! A snapshot therefore keeps every later snapshot alive, and its garbage is
//! dropped only when it and every older snapshot are gone: exactly when no
//! reader can reach that garbage any more. Readers never touch these links
//! (they take no lock and wait for nothing); the writer sets each link once.
//! When the writer itself goes away, its live tries become the latest
//! snapshot's final garbage.
#![allow(unsafe_code)]

use std::sync::Arc;

use crate::indexer::idset::{Chunk, IdSet};
use crate::indexer::snapshot::{Snapshot, Stored, Tries};
use crate::indexer::trie::Garbage;
use crate::key::ObjectKey;
use crate::reclaimer::{LastReferences, Reclaimer};

/// What one write batch retired, for every trie type of the cache.
pub(crate) struct Retired<K> {
    pub(crate) objects: Garbage<ObjectKey, Stored<K>>,
    pub(crate) ids: Garbage<u32, (u64, ObjectKey)>,
    pub(crate) values: Garbage<Arc<str>, IdSet>,
    pub(crate) chunks: Garbage<u32, Chunk>,
    /// Where the replaced and removed objects go when this is dropped, if
    /// the informer has a reclaimer (see [`crate::reclaimer`]).
    pub(crate) reclaimer: Option<Arc<dyn Reclaimer<K>>>,
}

impl<K> Default for Retired<K> {
    fn default() -> Self {
        Self {
            objects: Garbage::default(),
            ids: Garbage::default(),
            values: Garbage::default(),
            chunks: Garbage::default(),
            reclaimer: None,
        }
    }
}

impl<K> Drop for Retired<K> {
    fn drop(&mut self) {
        if let Some(reclaimer) = self.reclaimer.take() {
            let mut last = LastReferences::new(&*reclaimer);
            for entry in self.objects.take_entries() {
                last.entry(entry.key, entry.value.object);
            }
        }
    }
}

/// Set on a snapshot once, by the writer, when it stops being the latest.
pub(crate) struct Successor<K> {
    /// The next snapshot (none when the writer went away).
    pub(crate) next: Option<Arc<Snapshot<K>>>,
    /// What was retired between this snapshot and the next.
    pub(crate) retired: Retired<K>,
    /// The writer's live tries, once the writer is gone.
    pub(crate) last: Option<FinalTries<K>>,
}

/// The writer's tries when the writer is dropped: freed with the last
/// snapshot that can reach them.
pub(crate) struct FinalTries<K>(pub(crate) Tries<K>);

// SAFETY: `FinalTries` owns the entries its tries reach (`ObjectKey`,
// `Arc<K>`, `Arc<str>`, id chunks): sending or sharing it is sending or sharing those.
unsafe impl<K: Send + Sync> Send for FinalTries<K> {}
// SAFETY: as above; nothing is read through `&FinalTries`.
unsafe impl<K: Send + Sync> Sync for FinalTries<K> {}

impl<K> Drop for FinalTries<K> {
    fn drop(&mut self) {
        let tries = std::mem::take(&mut self.0);
        // SAFETY: the writer is gone and this runs when the last snapshot
        // that aliases these tries is dropped; what other versions reached
        // and these do not was retired and is freed as garbage.
        unsafe {
            tries.objects.free_all(&mut drop);
            tries.ids.free_all(&mut drop);
            for (_, index) in tries.indices {
                index.free_all(&mut |entry| entry.value.free_all());
            }
        }
    }
}

/// Drops `first`, then walks the successor chain iteratively, dropping each
/// snapshot this was the last holder of (a long chain must not recurse).
pub(crate) fn release_chain<K>(first: Option<Successor<K>>) {
    let mut link = first;
    while let Some(Successor {
        next,
        retired,
        last,
    }) = link
    {
        drop(retired);
        drop(last);
        link = next
            .and_then(Arc::into_inner)
            .and_then(|mut snapshot| snapshot.successor.take());
    }
}

//! Provenance: whether every object a cache has held came straight from a
//! decoder, which is what lets a replaced object be released whole.
//!
//! An object decoded into a chunk of its own (`kinformer_alloc`) can be
//! given back in one step only while nothing has moved a part of it into
//! another object. Objects inside an informer are shared and immutable, so
//! the only way such an object can be assembled is outside the informer and
//! handed to it: through [`DeltaFifo::prepare`](crate::DeltaFifo::prepare)
//! (and `add`, `update`, `delete`, `replace`, which call it) or
//! [`Indexer::write`](crate::Indexer::write). Those entry points mark the
//! cache's provenance *mixed*, for good; only the decoder's path,
//! [`DeltaFifo::prepare_decoded`](crate::DeltaFifo::prepare_decoded), keeps
//! it *decoded only*. A reclaimer releases objects whole only while the
//! provenance of their cache is decoded only.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the objects of one cache (an [`Indexer`](crate::Indexer) and its
/// [`DeltaFifo`](crate::DeltaFifo)) all came from a decoder. Cheap to clone;
/// clones share the state.
#[derive(Clone, Default)]
pub struct Provenance {
    mixed: Arc<AtomicBool>,
}

impl Provenance {
    /// Whether every object that entered the cache so far came through
    /// [`DeltaFifo::prepare_decoded`](crate::DeltaFifo::prepare_decoded)
    /// without a transform.
    pub fn decoded_only(&self) -> bool {
        // Acquire: pairs with the release of `mark_mixed`, which happens
        // before the object that caused it enters the cache.
        !self.mixed.load(Ordering::Acquire)
    }

    /// Records that an object entered by another way (`via` names it for
    /// the log, written once per cache).
    pub(crate) fn mark_mixed(&self, via: &'static str) {
        // A load first: once mixed (the common case for a cache fed by
        // `add` or `Indexer::write`), no write to the shared line.
        if !self.mixed.load(Ordering::Relaxed) && !self.mixed.swap(true, Ordering::AcqRel) {
            tracing::debug!(
                via,
                "an object entered the cache from outside a decoder: no whole release for it"
            );
        }
    }
}

impl fmt::Debug for Provenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Provenance")
            .field("decoded_only", &self.decoded_only())
            .finish()
    }
}

//! Keyed digests of an object's index inputs.
//!
//! Each stored object carries a digest of what its index values are
//! computed from (the inputs declared with [`IndexFn::with_digest`]). An
//! update whose digest equals the stored one leaves the object filed where
//! it is in those indexes, without reading the replaced object: at a
//! million objects that object is cold, and comparing its labels cost the
//! pool about a microsecond per update in the 1M burst, while the stored
//! digest sits in the trie entry the write copies anyway. The new object's
//! digest is computed by [`DeltaFifo::prepare`](crate::DeltaFifo::prepare)
//! on the thread that decoded it ([`EarlyDigest`]): by the time a pool
//! thread writes it, the new object has left that thread's caches too.
//!
//! The digest is SipHash-1-3 with 128 bits of output under a random key per
//! Indexer: cluster users cannot aim at a collision, and two different
//! inputs share a digest with probability 2^-128. A plan's digests cover
//! one set of index functions (an epoch); adding indexes starts the next
//! epoch, whose digests match none of the previous one's, and a digest
//! computed early in an older epoch is computed again by the writer.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use siphasher::sip128::{Hasher128, SipHasher13};

use crate::index::IndexFn;

/// A digest of one object's index inputs, or [`Digest::NONE`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Digest([u64; 2]);

impl Digest {
    /// No digest: no index declares its inputs, or declaring them failed.
    /// Equal to no computed digest (a computed one is never all zeros).
    pub(crate) const NONE: Digest = Digest([0, 0]);

    /// Whether `self` (an update's) shows the same inputs as `stored`.
    pub(crate) fn same_inputs(self, stored: Digest) -> bool {
        self != Self::NONE && self == stored
    }
}

/// The random key of one Indexer's digests.
#[derive(Clone, Copy)]
struct DigestKey(u64, u64);

impl Default for DigestKey {
    fn default() -> Self {
        // Hashes under the standard library's random per-process keys.
        let random = RandomState::new();
        Self(random.hash_one(0u8), random.hash_one(1u8))
    }
}

/// How one Indexer digests objects while its set of index functions stays
/// the same (an epoch: adding indexes starts the next one).
pub(crate) struct DigestPlan<K> {
    epoch: u64,
    key: DigestKey,
    index_fns: Vec<IndexFn<K>>,
}

/// A digest computed before the write (by [`DeltaFifo::prepare`], on the
/// thread that decoded the object, where the object is still in the CPU's
/// caches), with the epoch of the plan it was computed under: the writer
/// takes it only in that same epoch.
///
/// [`DeltaFifo::prepare`]: crate::DeltaFifo::prepare
#[derive(Clone, Copy, Debug)]
pub(crate) struct EarlyDigest {
    epoch: u64,
    digest: Digest,
}

impl<K> DigestPlan<K> {
    /// The first plan of an Indexer with `index_fns`.
    pub(crate) fn new(index_fns: Vec<IndexFn<K>>) -> Self {
        Self {
            epoch: 0,
            key: DigestKey::default(),
            index_fns,
        }
    }

    /// The next epoch's plan, for `index_fns` (same key).
    pub(crate) fn next(&self, index_fns: Vec<IndexFn<K>>) -> Self {
        Self {
            epoch: self.epoch + 1,
            key: self.key,
            index_fns,
        }
    }

    /// The digest of `obj`'s inputs for the indexes that declare theirs
    /// ([`IndexFn::has_digest`]; a match covers those only):
    /// [`Digest::NONE`] when none does, or one panics declaring them.
    pub(crate) fn digest(&self, obj: &K) -> Digest {
        if !self.index_fns.iter().any(IndexFn::has_digest) {
            return Digest::NONE;
        }
        let mut h = SipHasher13::new_with_keys(self.key.0, self.key.1);
        // The epoch: digests of different index sets never match.
        h.write_u64(self.epoch);
        for (i, f) in self
            .index_fns
            .iter()
            .enumerate()
            .filter(|(_, f)| f.has_digest())
        {
            h.write_usize(i);
            if !f.hash_inputs(obj, &mut h) {
                return Digest::NONE;
            }
        }
        match h.finish128().as_u128() {
            0 => Digest([0, 1]),
            d => Digest([(d >> 64) as u64, d as u64]),
        }
    }

    /// [`digest`](Self::digest), tagged with this plan's epoch.
    pub(crate) fn early(&self, obj: &K) -> EarlyDigest {
        EarlyDigest {
            epoch: self.epoch,
            digest: self.digest(obj),
        }
    }

    /// `obj`'s digest: `early` when it was computed in this epoch, else
    /// computed now.
    pub(crate) fn resolve(&self, early: Option<EarlyDigest>, obj: &K) -> Digest {
        match early {
            Some(e) if e.epoch == self.epoch => e.digest,
            _ => self.digest(obj),
        }
    }
}

//! The objects filed under one index value, as a set of dense object ids.
//!
//! Every object of an indexed cache has a small integer id, reused once the
//! object is removed (the [`IdTable`](super::snapshot::IdTable) maps ids
//! back to keys). A set stores ids in chunks of 4096: the low 12 bits in a
//! sorted array while a chunk has few members, a 512-byte bitmap once it has
//! many. A key set of the previous design cost ~40 bytes per member (a trie
//! slot holding hash and key); a chunk costs 2 bytes per member or less,
//! plus one trie slot per chunk.
//!
//! A chunk changes in place only while it is unpublished (built in the
//! writer's current generation); otherwise a change copies it first.
//!
//! A chunk's members live in an [`AliasableBox`], not a `Box`: the trie
//! copies slots bitwise, so a published node, its writable copy and the
//! garbage list all hold the same pointer, which a `Box` (a unique owner
//! to the compiler) must not be (Miri's Stacked Borrows caught it).
#![allow(unsafe_code)] // only to pass on `Trie::free_all`'s contract

use aliasable::boxed::AliasableBox;

use crate::indexer::trie::{Entry, Garbage, Nested, Trie};

/// Low bits of an id that select its place in a chunk.
const CHUNK_BITS: u32 = 12;
/// Ids per chunk.
const CHUNK_IDS: usize = 1 << CHUNK_BITS;
/// 64-bit words of a bitmap chunk.
const WORDS: usize = CHUNK_IDS / 64;
/// An array chunk that would grow past this many members becomes a bitmap
/// (of the same size: 512 bytes).
const MAX_SPARSE: usize = WORDS * 4;
/// A bitmap chunk left with fewer members than this becomes an array.
const MIN_DENSE: usize = MAX_SPARSE / 2;

/// The members of one 4096-id range of a set, stamped with the writer
/// generation that built them: a chunk of the current generation is not
/// published yet and changes in place; an older one is copied first.
#[derive(Clone)]
pub(crate) struct Chunk {
    generation: u64,
    members: Members,
}

/// The members of a chunk.
enum Members {
    /// Sorted offsets within the range.
    Sparse(AliasableBox<[u16]>),
    /// One bit per id of the range.
    Dense(AliasableBox<[u64; WORDS]>),
}

impl Clone for Members {
    fn clone(&self) -> Self {
        match self {
            Self::Sparse(offsets) => Self::Sparse(sparse(offsets.to_vec())),
            Self::Dense(words) => Self::Dense(AliasableBox::from_unique(Box::new(**words))),
        }
    }
}

/// Sorted offsets as a sparse chunk's members.
fn sparse(offsets: Vec<u16>) -> AliasableBox<[u16]> {
    AliasableBox::from_unique(offsets.into_boxed_slice())
}

/// Splits an id into its chunk number and its offset in the chunk.
fn split(id: u32) -> (u32, u16) {
    // The mask keeps 12 bits, which fit in a u16.
    (id >> CHUNK_BITS, (id & (CHUNK_IDS as u32 - 1)) as u16)
}

fn word_bit(offset: u16) -> (usize, u64) {
    (usize::from(offset / 64), 1 << (offset % 64))
}

impl Members {
    fn contains(&self, offset: u16) -> bool {
        match self {
            Self::Sparse(offsets) => offsets.binary_search(&offset).is_ok(),
            Self::Dense(words) => {
                let (w, bit) = word_bit(offset);
                words[w] & bit != 0
            }
        }
    }

    fn is_single(&self) -> bool {
        matches!(self, Self::Sparse(offsets) if offsets.len() == 1)
    }

    /// Adds `offset` (not a member yet).
    fn add(&mut self, offset: u16) {
        match self {
            Self::Sparse(offsets) if offsets.len() < MAX_SPARSE => {
                let pos = offsets.binary_search(&offset).unwrap_or_else(|pos| pos);
                let mut grown = Vec::with_capacity(offsets.len() + 1);
                grown.extend_from_slice(&offsets[..pos]);
                grown.push(offset);
                grown.extend_from_slice(&offsets[pos..]);
                *offsets = sparse(grown);
            }
            Self::Sparse(offsets) => {
                let mut words = Box::new([0u64; WORDS]);
                for &o in offsets.iter().chain([&offset]) {
                    let (w, bit) = word_bit(o);
                    words[w] |= bit;
                }
                *self = Self::Dense(AliasableBox::from_unique(words));
            }
            Self::Dense(words) => {
                let (w, bit) = word_bit(offset);
                words[w] |= bit;
            }
        }
    }

    /// Removes `offset` (a member, not the only one).
    fn remove(&mut self, offset: u16) {
        match self {
            Self::Sparse(offsets) => {
                if let Ok(pos) = offsets.binary_search(&offset) {
                    let mut shrunk = Vec::with_capacity(offsets.len() - 1);
                    shrunk.extend_from_slice(&offsets[..pos]);
                    shrunk.extend_from_slice(&offsets[pos + 1..]);
                    *offsets = sparse(shrunk);
                }
            }
            Self::Dense(words) => {
                let (w, bit) = word_bit(offset);
                words[w] &= !bit;
                let members: u32 = words.iter().map(|w| w.count_ones()).sum();
                if (members as usize) < MIN_DENSE {
                    let offsets: Vec<u16> =
                        ChunkIds::dense(0, words).map(|id| split(id).1).collect();
                    *self = Self::Sparse(sparse(offsets));
                }
            }
        }
    }

    /// The ids of this chunk, whose range starts at `base`.
    fn ids(&self, base: u32) -> ChunkIds<'_> {
        match self {
            Self::Sparse(offsets) => ChunkIds::Sparse {
                base,
                offsets: offsets.iter(),
            },
            Self::Dense(words) => ChunkIds::dense(base, words),
        }
    }
}

/// A chunk is copy-on-write by generation, like a nested trie: changing it
/// through a writable node never changes what published versions see.
impl Nested for Chunk {}

impl Chunk {
    /// Applies `change` to this chunk's members: in place when the chunk
    /// was built in `generation`, else to a copy that replaces it, the
    /// original retired under `key` (published versions still reach it).
    fn change(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<u32, Chunk>,
        key: u32,
        change: impl FnOnce(&mut Members),
    ) {
        if self.generation == generation {
            change(&mut self.members);
            return;
        }
        let mut members = self.members.clone();
        change(&mut members);
        let old = std::mem::replace(
            self,
            Chunk {
                generation,
                members,
            },
        );
        garbage.retire(Entry {
            hash: u64::from(key),
            key,
            value: old,
        });
    }
}

/// The ids of one chunk, ascending.
pub(crate) enum ChunkIds<'a> {
    Sparse {
        base: u32,
        offsets: std::slice::Iter<'a, u16>,
    },
    Dense {
        base: u32,
        words: &'a [u64; WORDS],
        /// Index of the word `bits` came from.
        word: usize,
        /// The bits of that word not yet returned.
        bits: u64,
    },
}

impl<'a> ChunkIds<'a> {
    fn dense(base: u32, words: &'a [u64; WORDS]) -> Self {
        Self::Dense {
            base,
            words,
            word: 0,
            bits: words[0],
        }
    }
}

impl Iterator for ChunkIds<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        match self {
            Self::Sparse { base, offsets } => offsets.next().map(|&o| *base + u32::from(o)),
            Self::Dense {
                base,
                words,
                word,
                bits,
            } => {
                while *bits == 0 {
                    *word += 1;
                    *bits = *words.get(*word)?;
                }
                let bit = bits.trailing_zeros();
                *bits &= *bits - 1;
                // `word` < WORDS = 64, so the product fits.
                Some(*base + (*word as u32) * 64 + bit)
            }
        }
    }
}

/// The hash of an id in the id table: the id's low 24 bits with their four
/// 6-bit digits in reverse order (higher bits as they are). The trie
/// consumes the hash 6 bits per level from the bottom, so the id's high
/// digits choose the upper nodes and its lowest digit the slot in the last
/// one: ids close together (a list's objects, a namespace's) share paths,
/// and 64 consecutive ids share one node. (Reversing all 64 bits measured
/// slower, ~140 µs against ~81 µs for 2k-key index reads at 1M: it left
/// the low 40 bits of every hash zero, a chain of single-child nodes.)
pub(crate) fn id_hash(id: u32) -> u64 {
    let id = u64::from(id);
    let digit = |d: u32| (id >> (6 * d)) & 63;
    (id >> 24 << 24) | digit(3) | digit(2) << 6 | digit(1) << 12 | digit(0) << 18
}

/// Hands out object ids: the lowest never used, or one given back, so ids
/// stay dense (at most the largest number of objects cached at once).
#[derive(Default)]
pub(crate) struct IdAllocator {
    next: u32,
    free: Vec<u32>,
}

impl IdAllocator {
    /// An id no cached object has.
    pub(crate) fn take(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            let id = self.next;
            // 2^32 objects cached at once cannot fit in memory.
            self.next = self.next.saturating_add(1);
            id
        })
    }

    /// Gives back the id of a removed object.
    pub(crate) fn give_back(&mut self, id: u32) {
        self.free.push(id);
    }
}

/// A set of object ids, copy-on-write by writer generation like the trie
/// it is made of: copying an `IdSet` aliases it.
#[derive(Clone, Copy, Default)]
pub(crate) struct IdSet {
    chunks: Trie<u32, Chunk>,
    len: usize,
}

impl Nested for IdSet {}

impl IdSet {
    /// Whether the set is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `id`; returns whether it was absent.
    pub(crate) fn insert(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<u32, Chunk>,
        id: u32,
    ) -> bool {
        let (key, offset) = split(id);
        let hash = u64::from(key);
        // One walk: callers add ids that are absent, so making the path
        // writable for an id already present is a rare waste.
        match self.chunks.get_mut(generation, garbage, hash, &key) {
            Some(chunk) if chunk.members.contains(offset) => return false,
            Some(chunk) => chunk.change(generation, garbage, key, |m| m.add(offset)),
            None => {
                let chunk = Chunk {
                    generation,
                    members: Members::Sparse(sparse(vec![offset])),
                };
                self.chunks
                    .insert_with(generation, garbage, hash, key, |_| chunk);
            }
        }
        self.len += 1;
        true
    }

    /// Removes `id`; returns whether it was present.
    pub(crate) fn remove(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<u32, Chunk>,
        id: u32,
    ) -> bool {
        let (key, offset) = split(id);
        let hash = u64::from(key);
        let last = match self.chunks.get(hash, &key) {
            Some(entry) if entry.value.members.contains(offset) => entry.value.members.is_single(),
            _ => return false,
        };
        if last {
            self.chunks.remove_quiet(generation, garbage, hash, &key);
        } else if let Some(chunk) = self.chunks.get_mut(generation, garbage, hash, &key) {
            chunk.change(generation, garbage, key, |m| m.remove(offset));
        }
        self.len -= 1;
        true
    }

    /// Every id, ascending within each chunk, chunks in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.chunks
            .iter()
            .flat_map(|entry| entry.value.members.ids(entry.key << CHUNK_BITS))
    }

    /// Frees the chunks of the writer's final version of this set.
    ///
    /// # Safety
    /// As [`Trie::free_all`].
    pub(crate) unsafe fn free_all(self) {
        // SAFETY: the caller's contract.
        unsafe { self.chunks.free_all(&mut drop) }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    /// Operations per case (fewer under Miri, which is ~10⁴× slower).
    const OPS: usize = if cfg!(miri) { 600 } else { 3000 };

    #[test]
    fn id_hashes_are_distinct_and_keep_neighbours_together() {
        // Every id below 2^16 natively; Miri is ~10⁴× slower.
        let below = if cfg!(miri) { 1u32 << 8 } else { 1 << 16 };
        let ids = (0..below).chain([1 << 24, (1 << 24) + 1, u32::MAX]);
        let hashes: BTreeSet<u64> = ids.clone().map(id_hash).collect();
        assert_eq!(hashes.len(), ids.count());
        // 64 consecutive ids differ only in the digit the last level reads.
        let last_level = 63 << 18;
        for first in [0u32, 64 * 1000, 64 * 15_000] {
            let upper = id_hash(first) & !last_level;
            assert!((first..first + 64).all(|id| id_hash(id) & !last_level == upper));
        }
        assert_eq!(id_hash(1), 1 << 18);
        assert_eq!(id_hash(1 << 18), 1);
    }

    /// Ids within three chunks, so that chunks fill past the bitmap
    /// threshold and empty again.
    fn id() -> impl Strategy<Value = u32> {
        (0u32..3, 0u32..600).prop_map(|(chunk, low)| (chunk << CHUNK_BITS) + low * 3)
    }

    proptest! {
        /// Every version of a set, kept across generations, lists exactly
        /// the ids of a model set at that point.
        #[test]
        fn sets_match_a_model_in_every_version(ops in prop::collection::vec((any::<bool>(), id()), 1..OPS)) {
            let mut garbage = Garbage::default();
            let mut set = IdSet::default();
            let mut model = BTreeSet::new();
            let mut versions = Vec::new();
            for (i, (add, id)) in ops.into_iter().enumerate() {
                let generation = 1 + i as u64 / 50;
                if add {
                    prop_assert_eq!(set.insert(generation, &mut garbage, id), model.insert(id));
                } else {
                    prop_assert_eq!(set.remove(generation, &mut garbage, id), model.remove(&id));
                }
                prop_assert_eq!(set.len, model.len());
                if i % 50 == 49 {
                    versions.push((set, model.clone()));
                }
            }
            versions.push((set, model));
            for (set, model) in &versions {
                let ids: BTreeSet<u32> = set.iter().collect();
                prop_assert_eq!(ids.len(), set.len);
                prop_assert_eq!(&ids, model);
            }
            drop(garbage);
            // SAFETY: the garbage is gone; the last version owns what is left.
            unsafe { versions.pop().unwrap().0.free_all() };
        }
    }

    #[test]
    fn a_chunk_turns_into_a_bitmap_and_back() {
        let mut garbage = Garbage::default();
        let mut set = IdSet::default();
        for id in 0..(MAX_SPARSE as u32 + 10) {
            set.insert(1, &mut garbage, id);
        }
        let first_is_dense = |set: &IdSet| {
            set.chunks
                .iter()
                .next()
                .map(|e| matches!(e.value.members, Members::Dense(_)))
        };
        assert_eq!(first_is_dense(&set), Some(true));
        for id in 0..(MAX_SPARSE as u32) {
            set.remove(1, &mut garbage, id);
        }
        assert_eq!(first_is_dense(&set), Some(false));
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            (MAX_SPARSE as u32..MAX_SPARSE as u32 + 10).collect::<Vec<_>>()
        );
        drop(garbage);
        // SAFETY: the garbage is gone; `set` is the only version left.
        unsafe { set.free_all() };
    }
}

//! Freed blocks kept in a bounded last-in-first-out stack per size, so the
//! next allocation of a size gets the block whose free just touched it.
//!
//! Through a general-purpose allocator, a block freed long ago is cold: its
//! free-list link is a cache miss, often after a search for a page with free
//! blocks. A thread that frees and allocates blocks of the same sizes in
//! turn (a decode thread's `Arc`s in [`crate::hot`], the trie nodes an
//! indexer writer copies and retires) does better handing its own recent
//! frees out again. [`BlockStacks`] is that: a stack per size in units of an
//! alignment, bounded by a depth per size and a byte budget for all sizes,
//! whose older half goes back every so many frees, so that sizes no longer
//! in use do not hold memory.
#![allow(unsafe_code)] // blocks handed back to the allocator they came from

use std::alloc::Layout;
use std::ptr::NonNull;

/// The alignment of every kept block: blocks of another alignment, or
/// whose size is not a multiple of it, are not kept. A constant, so that a
/// size's stack is found with a shift (this runs on every allocation of a
/// thread that keeps blocks).
pub const ALIGN: usize = 8;

/// The bounds of a [`BlockStacks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Larger blocks are not kept.
    pub max_size: usize,
    /// Blocks kept per size.
    pub depth: usize,
    /// Bytes kept, all sizes together.
    pub budget: usize,
    /// Every this many frees offered, the older half of each stack goes back.
    pub decay_every: u32,
}

/// A stack of freed blocks per size, bounded by its [`Limits`]; one per
/// thread (it is neither `Send` nor `Sync`). Blocks still kept when it drops
/// go back through [`std::alloc::dealloc`].
///
/// ```
/// use std::alloc::{Layout, alloc, dealloc};
/// use std::ptr::NonNull;
/// use kinformer_alloc::stacks::{BlockStacks, Limits};
///
/// let limits = Limits { max_size: 256, depth: 4, budget: 1024, decay_every: 64 };
/// let mut stacks = BlockStacks::new(limits);
/// let layout = Layout::from_size_align(32, 8).unwrap();
/// let free = |b: NonNull<u8>, l: Layout| unsafe { dealloc(b.as_ptr(), l) };
/// let block = NonNull::new(unsafe { alloc(layout) }).unwrap();
/// // SAFETY: allocated with `layout` by the global allocator, unused now.
/// assert!(unsafe { stacks.push(block, layout, free) });
/// assert_eq!(stacks.pop(layout), Some(block));
/// free(block, layout);
/// ```
#[derive(Debug)]
pub struct BlockStacks {
    limits: Limits,
    /// A stack per size, indexed by size / [`ALIGN`].
    stacks: Vec<Vec<NonNull<u8>>>,
    /// Bytes kept, all stacks together.
    bytes: usize,
    /// Frees offered since the last decay.
    releases: u32,
}

impl BlockStacks {
    /// No blocks kept; the stacks grow as blocks are kept.
    pub const fn new(limits: Limits) -> Self {
        Self {
            limits,
            stacks: Vec::new(),
            bytes: 0,
            releases: 0,
        }
    }

    /// No blocks kept, with room made now for every stack's full depth, so
    /// that keeping a block never allocates (for use inside an allocator).
    pub fn with_room(limits: Limits) -> Self {
        let stacks = (0..=limits.max_size / ALIGN)
            .map(|_| Vec::with_capacity(limits.depth))
            .collect();
        Self {
            limits,
            stacks,
            bytes: 0,
            releases: 0,
        }
    }

    /// The stack index of a block of `layout`, if such blocks are kept.
    #[inline]
    fn class_of(&self, layout: Layout) -> Option<usize> {
        (layout.align() == ALIGN
            && layout.size() > 0
            && layout.size() <= self.limits.max_size
            && layout.size().is_multiple_of(ALIGN))
        .then_some(layout.size() / ALIGN)
    }

    /// The layout of the blocks in stack `class`.
    fn layout_of(class: usize) -> Layout {
        // SAFETY: a multiple of a power-of-two alignment no larger than
        // `max_size`, which some `Layout` had.
        unsafe { Layout::from_size_align_unchecked(class * ALIGN, ALIGN) }
    }

    /// The block freed last of `layout`'s size, if one is kept.
    #[inline]
    pub fn pop(&mut self, layout: Layout) -> Option<NonNull<u8>> {
        let class = self.class_of(layout)?;
        let block = self.stacks.get_mut(class)?.pop()?;
        self.bytes -= layout.size();
        Some(block)
    }

    /// Keeps `block` if its size is kept and its stack and the budget have
    /// room (`true`); otherwise the caller still owns it (`false`). Every
    /// [`Limits::decay_every`] calls the older half of every stack goes
    /// back through `free` first.
    ///
    /// # Safety
    /// `block` was allocated with `layout`, nothing uses it any more, and
    /// `free` (and, for blocks still kept when these stacks drop,
    /// [`std::alloc::dealloc`]) frees it to the allocator it came from.
    #[inline]
    pub unsafe fn push(
        &mut self,
        block: NonNull<u8>,
        layout: Layout,
        free: impl FnMut(NonNull<u8>, Layout),
    ) -> bool {
        let Some(class) = self.class_of(layout) else {
            return false;
        };
        self.releases += 1;
        if self.releases >= self.limits.decay_every {
            self.releases = 0;
            self.decay(free);
        }
        if self.bytes + layout.size() > self.limits.budget {
            return false;
        }
        if self.stacks.len() <= class {
            self.stacks.resize_with(class + 1, Vec::new);
        }
        let stack = &mut self.stacks[class];
        if stack.len() >= self.limits.depth {
            return false;
        }
        stack.push(block);
        self.bytes += layout.size();
        true
    }

    /// Gives the older half of every stack back through `free`.
    fn decay(&mut self, mut free: impl FnMut(NonNull<u8>, Layout)) {
        for class in 0..self.stacks.len() {
            let layout = Self::layout_of(class);
            let old = self.stacks[class].len() / 2;
            for block in self.stacks[class].drain(..old) {
                self.bytes -= layout.size();
                free(block, layout);
            }
        }
    }

    /// How many blocks of `size` bytes are kept.
    pub fn len(&self, size: usize) -> usize {
        Layout::from_size_align(size, ALIGN)
            .ok()
            .and_then(|l| self.class_of(l))
            .and_then(|class| self.stacks.get(class))
            .map_or(0, Vec::len)
    }

    /// How many bytes are kept, all sizes together.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for BlockStacks {
    /// Gives every kept block back through [`std::alloc::dealloc`].
    fn drop(&mut self) {
        for class in 0..self.stacks.len() {
            let layout = Self::layout_of(class);
            for block in self.stacks[class].drain(..) {
                // SAFETY: `push`'s contract: kept blocks came from the global
                // allocator with this layout and are owned by the stacks alone.
                unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{alloc, dealloc};

    const LIMITS: Limits = Limits {
        max_size: 512,
        depth: 16,
        budget: 4096,
        decay_every: 256,
    };

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap()
    }

    fn take(stacks: &mut BlockStacks, size: usize) -> NonNull<u8> {
        stacks.pop(layout(size)).unwrap_or_else(|| {
            // SAFETY: a non-zero size.
            NonNull::new(unsafe { alloc(layout(size)) }).unwrap()
        })
    }

    fn free(block: NonNull<u8>, l: Layout) {
        // SAFETY: every block in these tests came from `alloc(l)`.
        unsafe { dealloc(block.as_ptr(), l) }
    }

    /// Keeps `block` or frees it, as a user of the stacks does.
    fn give(stacks: &mut BlockStacks, block: NonNull<u8>, size: usize) {
        // SAFETY: `block` came from `take(size)` and is not used again.
        if !unsafe { stacks.push(block, layout(size), free) } {
            free(block, layout(size));
        }
    }

    #[test]
    fn a_freed_block_comes_back_last_in_first_out_for_its_size_only() {
        let mut stacks = BlockStacks::new(LIMITS);
        let (a, b) = (take(&mut stacks, 64), take(&mut stacks, 64));
        give(&mut stacks, a, 64);
        give(&mut stacks, b, 64);
        assert_eq!((stacks.len(64), stacks.bytes()), (2, 128));
        assert_eq!(stacks.pop(layout(128)), None, "another size gets none");
        assert_eq!(stacks.pop(layout(64)), Some(b), "the last freed first");
        assert_eq!(stacks.pop(layout(64)), Some(a));
        assert_eq!(stacks.bytes(), 0);
        free(a, layout(64));
        free(b, layout(64));
    }

    #[test]
    fn blocks_past_the_depth_the_size_limit_or_off_the_alignment_are_not_kept() {
        let mut stacks = BlockStacks::new(LIMITS);
        let blocks: Vec<_> = (0..LIMITS.depth + 3)
            .map(|_| take(&mut stacks, 32))
            .collect();
        for b in blocks {
            give(&mut stacks, b, 32);
        }
        assert_eq!(stacks.len(32), LIMITS.depth);
        let big = LIMITS.max_size + 8;
        let h = take(&mut stacks, big);
        // SAFETY: `h` came from `take(big)`; refused, it is freed below.
        assert!(!unsafe { stacks.push(h, layout(big), free) });
        free(h, layout(big));
        let odd = Layout::from_size_align(64, 16).unwrap();
        // SAFETY: a non-zero size; refused, it is freed below.
        let o = NonNull::new(unsafe { alloc(odd) }).unwrap();
        // SAFETY: `o` came from `alloc(odd)`.
        assert!(!unsafe { stacks.push(o, odd, free) }, "another alignment");
        free(o, odd);
    }

    #[test]
    fn the_stacks_keep_at_most_their_budget_of_bytes() {
        let mut stacks = BlockStacks::new(LIMITS);
        let n = LIMITS.budget / LIMITS.max_size;
        let blocks: Vec<_> = (0..n).map(|_| take(&mut stacks, LIMITS.max_size)).collect();
        for b in blocks {
            give(&mut stacks, b, LIMITS.max_size);
        }
        assert_eq!(stacks.bytes(), LIMITS.budget);
        let s = take(&mut stacks, 8);
        give(&mut stacks, s, 8);
        assert_eq!(stacks.len(8), 0, "a block past the budget is not kept");
        let again = take(&mut stacks, LIMITS.max_size);
        assert_eq!(stacks.bytes(), LIMITS.budget - LIMITS.max_size);
        give(&mut stacks, again, LIMITS.max_size);
    }

    #[test]
    fn a_decay_halves_every_stack_through_the_given_free() {
        let mut stacks = BlockStacks::new(LIMITS);
        let idle: Vec<_> = (0..LIMITS.depth).map(|_| take(&mut stacks, 128)).collect();
        for b in idle {
            give(&mut stacks, b, 128);
        }
        let mut freed = Vec::new();
        // Frees of another size, up to the decay.
        for _ in LIMITS.depth..LIMITS.decay_every as usize {
            let b = take(&mut stacks, 64);
            // SAFETY: `b` came from `take(64)`.
            let kept = unsafe {
                stacks.push(b, layout(64), |b, l| {
                    freed.push(l.size());
                    free(b, l)
                })
            };
            assert!(kept);
        }
        assert_eq!(stacks.len(128), LIMITS.depth / 2, "a decay halves a stack");
        assert_eq!(freed, vec![128; LIMITS.depth / 2], "through `free`");
    }
}

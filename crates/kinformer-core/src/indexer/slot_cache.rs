//! Trie node buffers this thread freed recently, handed out again before
//! the global allocator's.
//!
//! An update at a million entries copies a node of 64 slots (about 2.5 KB)
//! and retires the one it replaces; the retired buffers are freed a few
//! published batches later, in bursts, by whichever writer thread releases
//! them. Through the global allocator each copy then takes a block that was
//! freed long before (its free-list link a cache miss), often after a
//! search for a page with free blocks, since half the frees come from the
//! other writer thread. Here each thread keeps what it freed in a
//! last-in-first-out stack per size (kinformer-alloc's [`BlockStacks`]), so
//! the next copy of that size writes into memory that was in use a few
//! batches ago. The cache is bounded (a depth per size, a byte budget per
//! thread) and its older half goes back to the global allocator every so
//! many frees.
//!
//! Every buffer is a global-allocator block of the exact layout it is
//! handed out for; what does not fit the cache (or outlives the thread's
//! cache) goes back to the global allocator.
#![allow(unsafe_code)]

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::cell::RefCell;
use std::ptr::NonNull;

use kinformer_alloc::stacks::{BlockStacks, Limits};

/// The bounds of each thread's cache.
const LIMITS: Limits = Limits {
    // Larger buffers are not cached.
    max_size: 4096,
    // Buffers kept per size: about two batches of a 1M cache's node copies.
    depth: 512,
    // Bytes kept per thread, all sizes together: the copies of a burst's
    // batches fit (about 1.3 MB of 64-slot nodes at the depth); a full list
    // applied in large batches frees nodes of every size, and caching all of
    // them held some 60-80 MiB more at 1M.
    budget: 2 << 20,
    // Every this many frees on a thread the older half of each of its stacks
    // goes back: the buffers of sizes no longer in use (those a full list
    // left) do not keep the budget from the sizes in use.
    decay_every: 16_384,
};

thread_local! {
    static CACHE: RefCell<BlockStacks> = const { RefCell::new(BlockStacks::new(LIMITS)) };
}

/// A block for `layout` (whose size is not zero): one this thread freed
/// recently when it has one, else a new one from the global allocator.
pub(crate) fn allocate(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() > 0);
    if let Ok(Some(ptr)) = CACHE.try_with(|c| c.borrow_mut().pop(layout)) {
        return ptr;
    }
    // SAFETY: the size is not zero (the caller's contract).
    let ptr = unsafe { alloc(layout) };
    NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(layout))
}

fn free(ptr: NonNull<u8>, layout: Layout) {
    // SAFETY: every block in the cache came from the global allocator with
    // this layout and is owned by the cache alone.
    unsafe { dealloc(ptr.as_ptr(), layout) }
}

/// Frees a block from [`allocate`]: kept for reuse by this thread while its
/// stack for that size and its byte budget have room, else given back to
/// the global allocator.
///
/// # Safety
/// `ptr` came from [`allocate`] with this `layout` (or from the global
/// allocator with it), and nothing uses it any more.
pub(crate) unsafe fn release(ptr: NonNull<u8>, layout: Layout) {
    // SAFETY: the caller's contract; `free` is the global allocator's.
    let kept = CACHE.try_with(|c| unsafe { c.borrow_mut().push(ptr, layout, free) });
    if kept != Ok(true) {
        free(ptr, layout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kinformer_alloc::stacks::ALIGN;

    #[test]
    fn a_released_block_is_handed_out_again_for_its_size_only() {
        let small = Layout::from_size_align(64, ALIGN).unwrap();
        let large = Layout::from_size_align(128, ALIGN).unwrap();
        let a = allocate(small);
        // SAFETY: `a` came from `allocate(small)` and is not used again.
        unsafe { release(a, small) };
        let b = allocate(large);
        assert_ne!(a, b, "a block is reused for its own size only");
        let c = allocate(small);
        assert_eq!(a, c, "the block freed last comes back first");
        // SAFETY: as above, for each block.
        unsafe {
            release(b, large);
            release(c, small);
        }
        assert_eq!(CACHE.with(|c| c.borrow().len(64)), 1);
    }
}

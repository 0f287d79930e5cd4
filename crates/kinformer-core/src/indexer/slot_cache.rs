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
//! last-in-first-out stack per size, bounded, so the next copy of that size
//! writes into memory that was in use a few batches ago. The cache is bounded
//! (a depth per size, a byte budget per thread) and its older half goes back
//! to the global allocator every so many frees.
//!
//! Every buffer is a global-allocator block of the exact layout it is
//! handed out for; what does not fit the cache (or outlives the thread's
//! cache) goes back to the global allocator.
#![allow(unsafe_code)]

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::cell::RefCell;
use std::ptr::NonNull;

/// The alignment of every cached buffer (a slot's: pointers and `u64`s).
const ALIGN: usize = 8;
/// Larger buffers are not cached.
const MAX_SIZE: usize = 4096;
/// Buffers kept per size: about two batches of a 1M cache's node copies.
const DEPTH: usize = 512;
/// Bytes kept per thread, all sizes together: the copies of a burst's
/// batches fit (about 1.3 MB of 64-slot nodes at [`DEPTH`]); a full list
/// applied in large batches frees nodes of every size, and caching all of
/// them held some 60–80 MiB more at 1M.
const BUDGET: usize = 2 << 20;
/// Every this many frees on a thread, the older half of each of its stacks
/// goes back to the global allocator: the buffers of sizes no longer in
/// use (those a full list left) do not keep the budget from the sizes in use.
const DECAY_EVERY: u32 = 16_384;

/// The buffers of one thread, a stack per size (in units of [`ALIGN`]),
/// and their bytes.
struct Cache {
    stacks: Vec<Vec<NonNull<u8>>>,
    bytes: usize,
    /// Frees since the last decay.
    releases: u32,
}

impl Cache {
    fn stack(&mut self, size: usize) -> &mut Vec<NonNull<u8>> {
        let class = size / ALIGN;
        if self.stacks.len() <= class {
            self.stacks.resize_with(class + 1, Vec::new);
        }
        &mut self.stacks[class]
    }

    /// Gives the older half of every stack back to the global allocator.
    fn decay(&mut self) {
        for (class, stack) in self.stacks.iter_mut().enumerate() {
            let old = stack.len() / 2;
            for ptr in stack.drain(..old) {
                self.bytes -= class * ALIGN;
                // SAFETY: as in `drop`.
                unsafe {
                    dealloc(
                        ptr.as_ptr(),
                        Layout::from_size_align_unchecked(class * ALIGN, ALIGN),
                    )
                };
            }
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        for (class, stack) in self.stacks.iter_mut().enumerate() {
            for ptr in stack.drain(..) {
                // SAFETY: every cached buffer was allocated with this layout
                // (size `class * ALIGN`, alignment `ALIGN`) and is owned by
                // the cache alone.
                unsafe {
                    dealloc(
                        ptr.as_ptr(),
                        Layout::from_size_align_unchecked(class * ALIGN, ALIGN),
                    )
                };
            }
        }
    }
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache {
            stacks: Vec::new(),
            bytes: 0,
            releases: 0,
        })
    };
}

fn cacheable(layout: Layout) -> bool {
    layout.align() == ALIGN
        && layout.size() > 0
        && layout.size() <= MAX_SIZE
        && layout.size().is_multiple_of(ALIGN)
}

/// A block for `layout` (whose size is not zero): one this thread freed
/// recently when it has one, else a new one from the global allocator.
pub(crate) fn allocate(layout: Layout) -> NonNull<u8> {
    debug_assert!(layout.size() > 0);
    if cacheable(layout)
        && let Ok(Some(ptr)) = CACHE.try_with(|c| {
            let mut cache = c.borrow_mut();
            let ptr = cache.stack(layout.size()).pop();
            if ptr.is_some() {
                cache.bytes -= layout.size();
            }
            ptr
        })
    {
        return ptr;
    }
    // SAFETY: the size is not zero (the caller's contract).
    let ptr = unsafe { alloc(layout) };
    NonNull::new(ptr).unwrap_or_else(|| handle_alloc_error(layout))
}

/// Frees a block from [`allocate`]: kept for reuse by this thread while its
/// stack for that size and its byte budget have room, else given back to
/// the global allocator.
///
/// # Safety
/// `ptr` came from [`allocate`] with this `layout` (or from the global
/// allocator with it), and nothing uses it any more.
pub(crate) unsafe fn release(ptr: NonNull<u8>, layout: Layout) {
    if cacheable(layout) {
        let kept = CACHE.try_with(|c| {
            let mut cache = c.borrow_mut();
            cache.releases += 1;
            if cache.releases == DECAY_EVERY {
                cache.releases = 0;
                cache.decay();
            }
            let fits = cache.bytes + layout.size() <= BUDGET;
            let stack = cache.stack(layout.size());
            let room = fits && stack.len() < DEPTH;
            if room {
                stack.push(ptr);
                cache.bytes += layout.size();
            }
            room
        });
        if kept == Ok(true) {
            return;
        }
    }
    // SAFETY: the caller's contract.
    unsafe { dealloc(ptr.as_ptr(), layout) };
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn blocks_past_the_depth_or_the_size_limit_go_back_to_the_allocator() {
        let layout = Layout::from_size_align(4 * ALIGN, ALIGN).unwrap();
        let blocks: Vec<_> = (0..DEPTH + 8).map(|_| allocate(layout)).collect();
        for &b in &blocks {
            // SAFETY: each block came from `allocate(layout)`, freed once.
            unsafe { release(b, layout) };
        }
        let kept = CACHE.with(|c| c.borrow_mut().stack(layout.size()).len());
        assert_eq!(kept, DEPTH);
        let huge = Layout::from_size_align(MAX_SIZE + ALIGN, ALIGN).unwrap();
        let h = allocate(huge);
        // SAFETY: `h` came from `allocate(huge)`.
        unsafe { release(h, huge) };
        let cached = CACHE.with(|c| c.borrow_mut().stack(huge.size()).len());
        assert_eq!(cached, 0, "a block above the size limit is not kept");
    }

    #[test]
    fn a_thread_keeps_at_most_its_budget_of_bytes() {
        let large = Layout::from_size_align(MAX_SIZE, ALIGN).unwrap();
        let small = Layout::from_size_align(64, ALIGN).unwrap();
        let n = BUDGET / MAX_SIZE;
        let blocks: Vec<_> = (0..n).map(|_| allocate(large)).collect();
        for &b in &blocks {
            // SAFETY: each block came from `allocate(large)`, freed once.
            unsafe { release(b, large) };
        }
        assert_eq!(CACHE.with(|c| c.borrow().bytes), n * MAX_SIZE);
        let s = allocate(small);
        // SAFETY: `s` came from `allocate(small)`.
        unsafe { release(s, small) };
        let kept = CACHE.with(|c| c.borrow_mut().stack(small.size()).len());
        assert_eq!(
            kept, 0,
            "a block past the budget goes back to the allocator"
        );
        // Handed out again, the bytes are counted down.
        let again = allocate(large);
        assert_eq!(CACHE.with(|c| c.borrow().bytes), (n - 1) * MAX_SIZE);
        // SAFETY: as above.
        unsafe { release(again, large) };
    }

    #[test]
    fn unused_buffers_decay_to_the_allocator() {
        let idle = Layout::from_size_align(128, ALIGN).unwrap();
        let busy = Layout::from_size_align(64, ALIGN).unwrap();
        let blocks: Vec<_> = (0..64).map(|_| allocate(idle)).collect();
        for &b in &blocks {
            // SAFETY: each block came from `allocate(idle)`, freed once.
            unsafe { release(b, idle) };
        }
        // Frees of another size, enough for a decay.
        for _ in 0..DECAY_EVERY {
            let b = allocate(busy);
            // SAFETY: `b` came from `allocate(busy)`.
            unsafe { release(b, busy) };
        }
        let kept = CACHE.with(|c| c.borrow_mut().stack(idle.size()).len());
        assert_eq!(kept, 32, "a decay halves a stack");
    }
}

//! Blocks a thread freed recently, handed out again first, on threads that
//! ask for it ([`keep_freed_blocks`]).
//!
//! A decode thread frees the objects it decoded long ago as newer versions
//! replace them, and allocates the next objects' blocks outside their arena
//! chunks (the `Arc` around each object, its key) a moment later. Through
//! the wrapped allocator each of those allocations takes a block freed long
//! before: its free-list link is a cache miss, often after a search for a
//! page with free blocks. Kept here, in a last-in-first-out stack per size,
//! the next allocation of that size gets the block whose free just touched
//! it. The stacks are bounded (a depth per size, a byte budget per thread),
//! and their older half goes back every so many frees, so sizes no longer
//! in use do not hold memory.
#![allow(unsafe_code)] // a thread's stacks reached through a raw pointer

use std::alloc::Layout;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::stacks::{BlockStacks, Limits};

pub use crate::stacks::ALIGN;
/// Larger blocks are not kept.
pub const MAX_SIZE: usize = 1024;
/// Blocks kept per size: about two reclaimed batches of one decode thread.
pub const DEPTH: usize = 256;
/// Bytes kept per thread, all sizes together.
pub const BUDGET: usize = 1 << 20;
/// Every this many frees, the older half of each stack goes back.
pub const DECAY_EVERY: u32 = 16_384;

/// The bounds above, as a thread's [`BlockStacks`] keeps them.
pub const LIMITS: Limits = Limits {
    max_size: MAX_SIZE,
    depth: DEPTH,
    budget: BUDGET,
    decay_every: DECAY_EVERY,
};

thread_local! {
    /// This thread's stacks while it keeps freed blocks (null otherwise),
    /// made with room for every block they may keep, so that keeping a
    /// block never allocates.
    static HOT: Cell<*mut BlockStacks> = const { Cell::new(std::ptr::null_mut()) };
}

/// While alive, blocks this thread frees outside decode scopes are kept for
/// its next allocations of their size; dropping it gives them back. Only
/// effective under [`crate::ObjectArenas`].
#[derive(Debug)]
#[must_use = "the thread keeps freed blocks only while the guard lives"]
pub struct KeptBlocks {
    /// Tied to its thread.
    _thread: PhantomData<*mut ()>,
}

/// Has this thread keep the blocks it frees for its next allocations of
/// the same size (see the module's documentation) until the guard drops.
///
/// ```
/// let kept = kinformer_alloc::hot::keep_freed_blocks();
/// let v = vec![1u64; 4];
/// drop(v);
/// drop(kept);
/// ```
pub fn keep_freed_blocks() -> KeptBlocks {
    if HOT.with(Cell::get).is_null() {
        let stacks = Box::new(BlockStacks::with_room(LIMITS));
        HOT.with(|h| h.set(Box::into_raw(stacks)));
    }
    KeptBlocks {
        _thread: PhantomData,
    }
}

impl Drop for KeptBlocks {
    fn drop(&mut self) {
        let ptr = HOT.with(|h| h.replace(std::ptr::null_mut()));
        if ptr.is_null() {
            return;
        }
        // SAFETY: made by `keep_freed_blocks` on this thread and no longer
        // reachable through `HOT`, so this is its only reference; dropped,
        // it gives its blocks back through the wrapped allocator (with `HOT`
        // cleared, they are not kept again).
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// How many blocks of `size` bytes this thread keeps now.
pub fn kept(size: usize) -> usize {
    with_stacks(|s| s.len(size))
}

/// How many bytes this thread keeps now, all sizes together.
pub fn kept_bytes() -> usize {
    with_stacks(BlockStacks::bytes)
}

fn with_stacks(f: impl FnOnce(&BlockStacks) -> usize) -> usize {
    // SAFETY: read between allocator calls, with no other reference held.
    unsafe { stacks() }.map_or(0, |s| f(s))
}

/// This thread's stacks, if it keeps freed blocks.
///
/// # Safety
/// The caller holds no other reference to them while the one returned
/// lives (the allocator is not re-entered while they are borrowed).
#[inline]
unsafe fn stacks<'a>() -> Option<&'a mut BlockStacks> {
    let ptr = HOT.try_with(Cell::get).ok()?;
    // SAFETY: null or this thread's stacks, alive until its guard drops
    // (which cannot happen during an allocator call); exclusive by the
    // caller's contract.
    unsafe { ptr.as_mut() }
}

/// A kept block for `layout`, if this thread keeps blocks and has one.
#[inline]
pub(crate) fn take(layout: Layout) -> Option<*mut u8> {
    // SAFETY: not re-entered: popping never allocates.
    let stacks = unsafe { stacks() }?;
    stacks.pop(layout).map(NonNull::as_ptr)
}

/// Keeps `block` if this thread keeps blocks and has room for it (`true`);
/// blocks of an older half gone back on a decay are freed with `free`.
///
/// # Safety
/// `block` was allocated with `layout` by the allocator `free` frees to,
/// and nothing uses it any more.
#[inline]
pub(crate) unsafe fn keep(block: *mut u8, layout: Layout, free: impl Fn(*mut u8, Layout)) -> bool {
    let Some(block) = NonNull::new(block) else {
        return false;
    };
    // SAFETY: not re-entered: keeping never allocates (room made up front)
    // and `free` goes to the wrapped allocator, not back here.
    let Some(stacks) = (unsafe { stacks() }) else {
        return false;
    };
    // SAFETY: the caller's contract.
    unsafe { stacks.push(block, layout, |b, l| free(b.as_ptr(), l)) }
}

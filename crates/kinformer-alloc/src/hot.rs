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

/// The alignment of every kept block (blocks of other alignments, and sizes
/// that are not a multiple of it, are not kept).
pub const ALIGN: usize = 8;
/// Larger blocks are not kept.
pub const MAX_SIZE: usize = 1024;
/// Blocks kept per size: about two reclaimed batches of one decode thread.
pub const DEPTH: usize = 256;
/// Bytes kept per thread, all sizes together.
pub const BUDGET: usize = 1 << 20;
/// Every this many frees, the older half of each stack goes back.
pub const DECAY_EVERY: u32 = 16_384;

/// One thread's stacks, one per size in units of [`ALIGN`] (each with room
/// for [`DEPTH`] blocks made when the thread opts in, so that keeping a
/// block never allocates).
struct Stacks {
    stacks: Vec<Vec<*mut u8>>,
    bytes: usize,
    releases: u32,
}

thread_local! {
    /// This thread's stacks while it keeps freed blocks (null otherwise).
    static HOT: Cell<*mut Stacks> = const { Cell::new(std::ptr::null_mut()) };
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
        let stacks = Box::new(Stacks {
            stacks: (0..=MAX_SIZE / ALIGN)
                .map(|_| Vec::with_capacity(DEPTH))
                .collect(),
            bytes: 0,
            releases: 0,
        });
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
        // reachable through `HOT`, so this is its only reference.
        let stacks = unsafe { Box::from_raw(ptr) };
        for (class, stack) in stacks.stacks.iter().enumerate() {
            for &block in stack {
                // SAFETY: a kept block of this size, owned by the stacks
                // alone; with `HOT` cleared it goes to the wrapped allocator.
                unsafe { std::alloc::dealloc(block, layout_of(class)) };
            }
        }
    }
}

/// How many blocks of `size` bytes this thread keeps now.
pub fn kept(size: usize) -> usize {
    match Layout::from_size_align(size, ALIGN).ok().and_then(class_of) {
        Some(class) => with_stacks(|s| s.stacks[class].len()),
        None => 0,
    }
}

/// How many bytes this thread keeps now, all sizes together.
pub fn kept_bytes() -> usize {
    with_stacks(|s| s.bytes)
}

fn with_stacks(f: impl FnOnce(&Stacks) -> usize) -> usize {
    let ptr = HOT.try_with(Cell::get).unwrap_or(std::ptr::null_mut());
    if ptr.is_null() {
        return 0;
    }
    // SAFETY: this thread's stacks, read between allocator calls.
    f(unsafe { &*ptr })
}

fn layout_of(class: usize) -> Layout {
    // SAFETY: a multiple of a power-of-two alignment, far below `isize::MAX`.
    unsafe { Layout::from_size_align_unchecked(class * ALIGN, ALIGN) }
}

fn class_of(layout: Layout) -> Option<usize> {
    (layout.align() == ALIGN
        && layout.size() > 0
        && layout.size() <= MAX_SIZE
        && layout.size().is_multiple_of(ALIGN))
    .then_some(layout.size() / ALIGN)
}

/// A kept block for `layout`, if this thread keeps blocks and has one.
#[inline]
pub(crate) fn take(layout: Layout) -> Option<*mut u8> {
    let ptr = HOT.try_with(Cell::get).ok()?;
    if ptr.is_null() {
        return None;
    }
    let class = class_of(layout)?;
    // SAFETY: this thread's stacks; nothing else holds a reference to them
    // (the allocator is not re-entered while they are borrowed).
    let stacks = unsafe { &mut *ptr };
    let block = stacks.stacks[class].pop()?;
    stacks.bytes -= layout.size();
    Some(block)
}

/// Keeps `block` if this thread keeps blocks and has room for it (`true`);
/// blocks of an older half gone back on a decay are freed with `free`.
///
/// # Safety
/// `block` was allocated with `layout` by the allocator `free` frees to,
/// and nothing uses it any more.
#[inline]
pub(crate) unsafe fn keep(block: *mut u8, layout: Layout, free: impl Fn(*mut u8, Layout)) -> bool {
    let Ok(ptr) = HOT.try_with(Cell::get) else {
        return false;
    };
    if ptr.is_null() {
        return false;
    }
    let Some(class) = class_of(layout) else {
        return false;
    };
    // SAFETY: as in `take`.
    let stacks = unsafe { &mut *ptr };
    stacks.releases += 1;
    if stacks.releases == DECAY_EVERY {
        stacks.releases = 0;
        for (c, stack) in stacks.stacks.iter_mut().enumerate() {
            let old = stack.len() / 2;
            for b in stack.drain(..old) {
                stacks.bytes -= c * ALIGN;
                free(b, layout_of(c));
            }
        }
    }
    let stack = &mut stacks.stacks[class];
    if stack.len() == DEPTH || stacks.bytes + layout.size() > BUDGET {
        return false;
    }
    stack.push(block);
    stacks.bytes += layout.size();
    true
}

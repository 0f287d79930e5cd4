//! [`ObjectArenas`]: the global allocator that serves decode scopes from
//! chunks and everything else from the allocator it wraps.
#![allow(unsafe_code)] // a `GlobalAlloc` implementation

use std::alloc::{GlobalAlloc, Layout};

use crate::region::REGION;
use crate::scope;

/// A global allocator that puts what [`crate::with_object_arena`] allocates
/// into per-object chunks, and passes everything else to `A`.
///
/// ```
/// use kinformer_alloc::ObjectArenas;
/// #[global_allocator]
/// static GLOBAL: ObjectArenas<std::alloc::System> = ObjectArenas::new(std::alloc::System);
/// # fn main() {}
/// ```
///
/// The first object decoded in a scope reserves an address range (1 TiB of
/// address space, no memory: `MAP_NORESERVE`); where the system refuses
/// that, every allocation goes to `A`. Chunks are reused, not returned to
/// the system, so memory freed by objects stays with the process for the
/// next objects, as a cache's steady state wants.
#[derive(Debug)]
pub struct ObjectArenas<A> {
    inner: A,
}

impl<A> ObjectArenas<A> {
    /// Wraps `inner`, which serves everything outside decode scopes.
    pub const fn new(inner: A) -> Self {
        Self { inner }
    }
}

/// Frees a part: counts its chunk down, and puts the chunk back on its free
/// list after the last part.
///
/// # Safety
/// `ptr` is a live part (it is in [`REGION`]).
unsafe fn free_part(ptr: *mut u8) {
    let chunk = REGION.chunk_of(ptr as usize);
    // SAFETY: the chunk holds a live part, so its header is written and
    // stays until its count reaches zero.
    if unsafe { &*chunk }.live.release_part() {
        // SAFETY: the count reached zero: nothing of the chunk is live.
        unsafe { REGION.give_back(chunk as usize) };
    }
}

// SAFETY: parts are distinct ranges of chunks, each chunk used by one
// object's parts until all of them are freed; everything else is `A`'s.
unsafe impl<A: GlobalAlloc> GlobalAlloc for ObjectArenas<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match scope::alloc(layout.size(), layout.align()) {
            Some(part) => part,
            // SAFETY: the caller's layout, passed on.
            None => unsafe { self.inner.alloc(layout) },
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match scope::alloc(layout.size(), layout.align()) {
            Some(part) => {
                // SAFETY: the part is `layout.size()` writable bytes.
                unsafe { part.write_bytes(0, layout.size()) };
                part
            }
            // SAFETY: the caller's layout, passed on.
            None => unsafe { self.inner.alloc_zeroed(layout) },
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if REGION.contains(ptr as usize) {
            // SAFETY: a live part (the caller's contract).
            unsafe { free_part(ptr) }
        } else {
            // SAFETY: `A` allocated it (the caller's contract).
            unsafe { self.inner.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !REGION.contains(ptr as usize) {
            // A buffer from outside the scope stays outside.
            scope::note_outside_realloc();
            // SAFETY: `A` allocated it (the caller's contract).
            return unsafe { self.inner.realloc(ptr, layout, new_size) };
        }
        if scope::resize_last(ptr as usize, new_size) {
            return ptr;
        }
        // SAFETY: the caller guarantees a valid size for this alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a non-zero size (the caller's contract).
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both are live and distinct; the copy is within both.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                free_part(ptr);
            }
        }
        new
    }
}

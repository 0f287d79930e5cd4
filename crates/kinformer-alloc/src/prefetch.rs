//! Asking for an object's memory before it is dropped.
//!
//! Dropping a cached object decoded long ago reads every node of its tree
//! (each struct, vector and map node that holds a pointer), and when the
//! object is cold each of those reads is a cache miss that the drop waits
//! for before it can follow the next pointer. An object decoded in an arena
//! has its parts in one chunk, so the whole chunk can be asked for at once,
//! a little before the drop, and the misses overlap instead of queueing.
#![allow(unsafe_code)] // prefetch instructions

use crate::region::REGION;

/// Asks the CPU to bring in the chunk that holds `part` (a heap part of an
/// object decoded in an arena, e.g. the buffer of one of its strings).
/// Does nothing for memory outside the arenas, and never reads or writes
/// anything itself: calling it with any address is sound.
///
/// ```
/// let name = String::from("web-0");
/// kinformer_alloc::prefetch_chunk(name.as_ptr()); // outside the arenas: nothing
/// ```
#[inline]
pub fn prefetch_chunk(part: *const u8) {
    let addr = part as usize;
    if let Some((chunk, size)) = REGION.chunk_span(addr) {
        prefetch_range(chunk, size);
    }
}

/// Asks the CPU for the first cache line of the chunk that holds `part`
/// (its header: what releasing the chunk whole reads). Does nothing for
/// memory outside the arenas; sound with any address.
///
/// ```
/// let name = String::from("web-0");
/// kinformer_alloc::prefetch_chunk_header(name.as_ptr()); // outside the arenas: nothing
/// ```
#[inline]
pub fn prefetch_chunk_header(part: *const u8) {
    if let Some((chunk, _)) = REGION.chunk_span(part as usize) {
        prefetch_range(chunk, LINE);
    }
}

/// Asks the CPU to bring in the bytes of `value` itself (not what it points
/// to): for an `Arc`'s object, the struct in its shared allocation.
///
/// ```
/// let pod = std::sync::Arc::new([0u64; 32]);
/// kinformer_alloc::prefetch_value(&*pod);
/// ```
#[inline]
pub fn prefetch_value<T: ?Sized>(value: &T) {
    prefetch_range(
        (value as *const T).cast::<u8>() as usize,
        size_of_val(value),
    );
}

/// Cache line size assumed.
const LINE: usize = 64;

#[inline]
pub(crate) fn prefetch_range(start: usize, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let end = start.saturating_add(len);
        let mut line = start & !(LINE - 1);
        while line < end {
            // SAFETY: a prefetch is a hint: it neither faults nor changes
            // memory, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
            line += LINE;
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = (start, len, LINE);
}

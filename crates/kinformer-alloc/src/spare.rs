//! Spare chunks: a few new chunks, their pages already supplied by the
//! kernel, kept on the free lists for the first objects of a burst.
//!
//! After a sync every chunk holds a live object. The first updates that
//! follow each need a chunk before the object they replace is freed, and
//! those chunks are new: the decode thread that takes one waits while the
//! kernel supplies (and zeroes) its pages, which on some virtual machines
//! costs several microseconds per 4 KiB page. Topping the free lists up
//! right after a sync, off the decode path, moves that wait out of the
//! burst. The memory stays with the process: chunks are never returned.

use crate::region::REGION;

/// Spare chunks per thousand chunks cut, in each size class.
pub const SPARE_PER_MILLE: usize = 10;

/// Bytes of chunks one call of [`top_up_spare_chunks`] cuts at most (one
/// transparent huge page): short enough to run between decode jobs.
pub const TOP_UP_STEP: usize = 2 << 20;

/// Cuts and touches up to [`TOP_UP_STEP`] bytes of new chunks toward
/// [`SPARE_PER_MILLE`] free chunks per thousand cut in each size class;
/// returns whether more is wanted (call again). Does nothing unless
/// [`crate::ObjectArenas`] is the global allocator and has handed out
/// chunks.
///
/// ```
/// // Without the arenas in use there is nothing to top up.
/// assert!(!kinformer_alloc::top_up_spare_chunks());
/// ```
pub fn top_up_spare_chunks() -> bool {
    REGION.top_up(SPARE_PER_MILLE, TOP_UP_STEP)
}

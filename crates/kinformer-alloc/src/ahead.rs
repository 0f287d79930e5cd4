//! Pages populated ahead of the cuts: each size class's span is cut from
//! its start onward, so the memory its next chunks will come from is known
//! in advance, and the kernel can be asked to supply it before any thread
//! needs it.
//!
//! A thread that cuts a chunk from memory never touched waits while the
//! kernel supplies the pages (with transparent huge pages, a whole 2 MiB
//! page at once: one load test measured ~25 ms of a decode thread for one
//! such fault, on a virtual machine slow to supply memory). Spare chunks
//! (see [`crate::spare`]) cover the cuts right after a sync; this covers the
//! cuts that still happen later, whenever a class's free list runs dry.
//!
//! The pages are populated with `MADV_POPULATE_WRITE` (Linux 5.14+), which
//! writes nothing: it is safe over chunks other threads hold. Elsewhere, or
//! where the kernel refuses it, nothing is populated.
#![allow(unsafe_code)] // madvise over the reserved range

use std::sync::atomic::Ordering;

use crate::region::{PAGE, Region, SPAN_SHIFT};

/// The transparent huge page size on x86-64 and most arm64 kernels.
const HUGE_PAGE: usize = 2 << 20;

impl Region {
    /// Populates the pages of up to `budget` bytes (at least one page per
    /// call) past the last chunk cut in each class in use, until each has
    /// `ahead` bytes populated past it (rounded up to a 2 MiB boundary).
    /// Returns whether more is wanted (call again). Does nothing before the
    /// range is reserved.
    pub fn populate_ahead(&self, ahead: usize, budget: usize) -> bool {
        let Some(base) = self.reserved() else {
            return false;
        };
        let mut spent = 0;
        for (class, span, size) in self.spans() {
            let cut = span.chunks_cut(size) * size;
            if cut == 0 {
                continue;
            }
            let target = (cut + ahead)
                .next_multiple_of(HUGE_PAGE)
                .min(1 << SPAN_SHIFT);
            let from = span
                .populated
                .load(Ordering::Relaxed)
                .max(cut / PAGE * PAGE);
            if from >= target {
                continue;
            }
            if spent >= budget && spent > 0 {
                return true;
            }
            let room = budget
                .saturating_sub(spent)
                .next_multiple_of(PAGE)
                .max(PAGE);
            let to = target.min(from + room);
            populate(base + (class << SPAN_SHIFT) + from, to - from);
            span.populated.fetch_max(to, Ordering::Relaxed);
            spent += to - from;
            if to < target {
                return true;
            }
        }
        false
    }
}

/// Has the kernel supply the pages of `[addr, addr + len)`, which lies in
/// the reserved range, without changing their contents.
#[cfg(all(target_os = "linux", not(miri)))]
fn populate(addr: usize, len: usize) {
    // SAFETY: advice over part of the reserved, writable mapping;
    // MADV_POPULATE_WRITE faults pages in as a write would, but writes
    // nothing, so chunks in use keep their bytes. Refused (a kernel before
    // 5.14 answers EINVAL), nothing is populated and a later cut faults its
    // pages in itself, as without this module.
    let _ = unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
}

#[cfg(not(all(target_os = "linux", not(miri))))]
fn populate(_addr: usize, _len: usize) {}

#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use super::*;
    use crate::class::chunk_size;

    /// Whether the page holding `addr` is in memory.
    fn resident(addr: usize) -> bool {
        let page = addr / PAGE * PAGE;
        let mut v = [0u8; 1];
        // SAFETY: one page of the reserved mapping; `v` holds its one entry.
        let r = unsafe { libc::mincore(page as *mut libc::c_void, PAGE, v.as_mut_ptr()) };
        assert_eq!(r, 0);
        v[0] & 1 == 1
    }

    #[test]
    fn pages_past_the_last_cut_are_populated_and_chunks_keep_their_bytes() {
        static REGION: Region = Region::new();
        assert!(!REGION.populate_ahead(4 << 20, usize::MAX), "nothing yet");
        let size = chunk_size(5);
        let chunks: Vec<usize> = (0..10).map(|_| REGION.take(5, 0).unwrap().0).collect();
        let last = *chunks.last().unwrap();
        // A part's bytes in the last chunk cut, on the page populating starts at.
        let part = last + size - 8;
        // SAFETY: the chunk is ours and `part` lies inside it.
        unsafe { std::ptr::write(part as *mut u64, 0x5eed) };
        let span_start = chunks[0];
        let later = span_start + (5 << 20);
        assert!(!resident(later), "not touched yet");

        // 10 chunks of 832 bytes plus 4 MiB, rounded up: 6 MiB, in steps.
        assert!(REGION.populate_ahead(4 << 20, 1 << 20), "one MiB per call");
        while REGION.populate_ahead(4 << 20, 1 << 20) {}
        assert!(resident(later));
        assert!(!resident(span_start + (6 << 20) + PAGE), "no further");
        // SAFETY: as above.
        assert_eq!(unsafe { std::ptr::read(part as *const u64) }, 0x5eed);
        assert!(!REGION.populate_ahead(4 << 20, usize::MAX), "done");
    }
}

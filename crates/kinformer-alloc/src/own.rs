//! Chunks a thread gave back, kept on lists of its own and taken again
//! first, on threads that ask for it ([`keep_own_chunks`]).
//!
//! A decode thread gives back the chunks of the objects it decoded long ago
//! (the older versions of its own keys) and takes a chunk for each object
//! it decodes. Through the shared free list of a class, every take and
//! give-back locks a mutex that the other decode threads lock too, and a
//! take asks the CPU for the next chunk on the list, which another thread
//! is as likely to write next. A thread's own list is touched by no other
//! thread: no lock, and the next chunk asked for is its own next one.
//!
//! Each list holds up to [`LIMIT`] bytes per class; past that, chunks go
//! to the shared lists. Dropping the guard gives every kept chunk to the
//! shared lists. The kept bytes are counted in the region's
//! [`crate::region::RegionStats::free_bytes`] through one counter per
//! thread, which no other thread writes.
#![allow(unsafe_code)] // a thread's lists reached through a raw pointer

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::class::{CLASSES, chunk_size};
use crate::region::Region;

/// Bytes of chunks kept per class on a thread's list.
#[cfg(not(miri))]
pub const LIMIT: usize = 512 << 10;
/// Bytes of chunks kept per class on a thread's list (under Miri, whose
/// spans are 256 KiB, less than a span).
#[cfg(miri)]
pub const LIMIT: usize = 64 << 10;

/// Threads that can keep chunks at once; a thread that finds every slot
/// taken uses the shared lists only.
pub const SLOTS: usize = 16;

/// A thread's count of kept bytes, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct KeptBytes(AtomicUsize);

impl KeptBytes {
    pub(crate) const fn new() -> Self {
        Self(AtomicUsize::new(0))
    }

    /// The bytes last stored by the slot's thread.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Stores the slot's thread's kept bytes (only that thread calls it).
    fn set(&self, bytes: usize) {
        self.0.store(bytes, Ordering::Relaxed);
    }
}

/// Which slots are taken by a living guard.
static CLAIMED: [AtomicBool; SLOTS] = [const { AtomicBool::new(false) }; SLOTS];

/// One thread's lists: the head of each class's list (linked through the
/// chunks' headers, as the shared lists are) and its bytes.
struct OwnLists {
    /// The region the chunks belong to (null until the first is kept).
    region: *const Region,
    /// The slot whose counter this thread writes.
    slot: usize,
    heads: [usize; CLASSES],
    bytes: [usize; CLASSES],
    total: usize,
}

thread_local! {
    /// This thread's lists while it keeps chunks (null otherwise).
    static OWN: Cell<*mut OwnLists> = const { Cell::new(std::ptr::null_mut()) };
}

/// While alive, chunks this thread gives back are kept for its own next
/// takes; dropping it hands them to the shared lists. Only effective
/// under [`crate::ObjectArenas`].
#[derive(Debug)]
#[must_use = "the thread keeps its chunks only while the guard lives"]
pub struct OwnChunks {
    /// Tied to its thread.
    _thread: PhantomData<*mut ()>,
}

/// Has this thread keep the chunks it gives back for its own next takes
/// (see the module's documentation) until the guard drops. With every
/// slot taken, the guard does nothing.
///
/// ```
/// let own = kinformer_alloc::own::keep_own_chunks();
/// drop(own);
/// ```
pub fn keep_own_chunks() -> OwnChunks {
    if OWN.with(Cell::get).is_null()
        && let Some(slot) = (0..SLOTS).find(|&i| {
            CLAIMED[i]
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    {
        let lists = Box::new(OwnLists {
            region: std::ptr::null(),
            slot,
            heads: [0; CLASSES],
            bytes: [0; CLASSES],
            total: 0,
        });
        OWN.with(|o| o.set(Box::into_raw(lists)));
    }
    OwnChunks {
        _thread: PhantomData,
    }
}

impl Drop for OwnChunks {
    fn drop(&mut self) {
        let ptr = OWN.with(|o| o.replace(std::ptr::null_mut()));
        if ptr.is_null() {
            return;
        }
        // SAFETY: made by `keep_own_chunks` on this thread and no longer
        // reachable through `OWN`: this is its only reference.
        let lists = unsafe { Box::from_raw(ptr) };
        // SAFETY: a non-null region is the one whose chunks were kept, a
        // `'static` (see `keep`).
        if let Some(region) = unsafe { lists.region.as_ref() } {
            for mut chunk in lists.heads {
                while chunk != 0 {
                    // SAFETY: kept chunks are free, with a written header.
                    let next = unsafe { Region::next_of(chunk) };
                    // SAFETY: free (nothing of it is live), from `region`.
                    unsafe { region.give_back_shared(chunk) };
                    chunk = next;
                }
            }
            region.kept(lists.slot).set(0);
        }
        CLAIMED[lists.slot].store(false, Ordering::Release);
    }
}

/// This thread's lists, if it keeps chunks.
///
/// # Safety
/// The caller holds no other reference to them while the one returned
/// lives (the allocator is not re-entered while they are borrowed).
#[inline]
unsafe fn lists<'a>() -> Option<&'a mut OwnLists> {
    let ptr = OWN.try_with(Cell::get).ok()?;
    // SAFETY: null or this thread's lists, alive until its guard drops
    // (which cannot happen during an allocator call); exclusive by the
    // caller's contract.
    unsafe { ptr.as_mut() }
}

/// Keeps the free chunk `chunk` of `class` of `region` on this thread's
/// list, if it keeps chunks of that region and the class's list has room
/// (`true`).
///
/// # Safety
/// `chunk` is a free chunk of `region` (nothing of it is live), of
/// `class`.
#[inline]
pub(crate) unsafe fn keep(region: &'static Region, class: usize, chunk: usize) -> bool {
    // SAFETY: not re-entered: keeping never allocates.
    let Some(lists) = (unsafe { lists() }) else {
        return false;
    };
    if lists.region.is_null() {
        lists.region = region;
    } else if !std::ptr::eq(lists.region, region) {
        return false;
    }
    let size = chunk_size(class);
    let (Some(head), Some(bytes)) = (lists.heads.get_mut(class), lists.bytes.get_mut(class)) else {
        return false;
    };
    if *bytes + size > LIMIT {
        return false;
    }
    // SAFETY: the chunk is free and ours to link (the caller's contract).
    unsafe { Region::set_next(chunk, *head) };
    *head = chunk;
    *bytes += size;
    lists.total += size;
    region.kept(lists.slot).set(lists.total);
    true
}

/// A chunk of `class` off this thread's list for `region`, if it keeps
/// one; the next one on the list is then asked of the CPU (as
/// [`Region::take`] does for the shared lists).
#[inline]
pub(crate) fn take(region: &Region, class: usize) -> Option<usize> {
    // SAFETY: not re-entered: taking never allocates.
    let lists = unsafe { lists() }?;
    if !std::ptr::eq(lists.region, region) {
        return None;
    }
    let head = lists.heads.get_mut(class)?;
    let chunk = *head;
    if chunk == 0 {
        return None;
    }
    // SAFETY: kept chunks are free, with a written header.
    let next = unsafe { Region::next_of(chunk) };
    *head = next;
    let size = chunk_size(class);
    if let Some(bytes) = lists.bytes.get_mut(class) {
        *bytes -= size;
    }
    lists.total -= size;
    region.kept(lists.slot).set(lists.total);
    if next != 0 {
        crate::region::prefetch_next(next, class);
    }
    Some(chunk)
}

/// Bytes this thread keeps now, all classes together.
pub fn kept_bytes() -> usize {
    // SAFETY: read between allocator calls, with no other reference held.
    unsafe { lists() }.map_or(0, |l| l.total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes `n` chunks of `class` from `region`.
    fn take_n(region: &'static Region, class: usize, n: usize) -> Vec<usize> {
        (0..n)
            .map(|_| region.take(class, 0).expect("the range is reserved").0)
            .collect()
    }

    /// Gives `chunks` back to `region`.
    fn give_back(region: &'static Region, chunks: &[usize]) {
        for &chunk in chunks {
            // SAFETY: taken and never written: nothing of it is live.
            unsafe { region.give_back(chunk) };
        }
    }

    /// `chunks`, in address order.
    fn sorted(mut chunks: Vec<usize>) -> Vec<usize> {
        chunks.sort_unstable();
        chunks
    }

    /// What another thread, keeping no chunks, takes of `class`.
    fn taken_elsewhere(region: &'static Region, class: usize, n: usize) -> Vec<usize> {
        std::thread::spawn(move || take_n(region, class, n))
            .join()
            .expect("the thread ran")
    }

    #[test]
    fn a_thread_takes_back_its_own_chunks_and_no_other_thread_gets_them() {
        static REGION: Region = Region::new();
        let own = keep_own_chunks();
        let chunks = take_n(&REGION, 3, 4);
        give_back(&REGION, &chunks);
        let size = chunk_size(3);
        assert_eq!(kept_bytes(), 4 * size);
        assert_eq!(
            REGION.stats().free_bytes,
            4 * size,
            "kept bytes count as free"
        );

        let elsewhere = taken_elsewhere(&REGION, 3, 2);
        assert!(elsewhere.iter().all(|c| !chunks.contains(c)), "new chunks");

        // Last given back, first taken.
        let again = take_n(&REGION, 3, 4);
        assert_eq!(again, chunks.iter().rev().copied().collect::<Vec<_>>());
        assert_eq!(kept_bytes(), 0);
        assert_eq!(REGION.stats().free_bytes, 0);
        drop(own);
    }

    #[test]
    fn chunks_past_the_limit_go_to_the_shared_list() {
        static REGION: Region = Region::new();
        let own = keep_own_chunks();
        let size = chunk_size(10);
        let fit = LIMIT / size;
        let chunks = take_n(&REGION, 10, fit + 3);
        give_back(&REGION, &chunks);
        assert_eq!(kept_bytes(), fit * size);
        assert_eq!(REGION.stats().free_bytes, (fit + 3) * size);

        assert_eq!(
            sorted(taken_elsewhere(&REGION, 10, 3)),
            sorted(chunks[fit..].to_vec()),
            "the three past the limit are shared"
        );
        drop(own);
    }

    #[test]
    fn dropping_the_guard_hands_the_kept_chunks_to_the_shared_lists() {
        static REGION: Region = Region::new();
        let own = keep_own_chunks();
        let chunks = take_n(&REGION, 20, 3);
        give_back(&REGION, &chunks);
        let free = REGION.stats().free_bytes;
        assert_eq!(free, 3 * chunk_size(20));
        drop(own);
        assert_eq!(kept_bytes(), 0);
        assert_eq!(REGION.stats().free_bytes, free, "still free, now shared");

        assert_eq!(sorted(taken_elsewhere(&REGION, 20, 3)), sorted(chunks));
        assert_eq!(REGION.stats().free_bytes, 0);
    }

    #[test]
    fn a_thread_keeps_chunks_of_one_region_only() {
        static FIRST: Region = Region::new();
        static SECOND: Region = Region::new();
        let own = keep_own_chunks();
        let first = take_n(&FIRST, 5, 1);
        let second = take_n(&SECOND, 5, 1);
        give_back(&FIRST, &first);
        give_back(&SECOND, &second);
        assert_eq!(kept_bytes(), chunk_size(5), "the first region's only");
        assert_eq!(SECOND.stats().free_bytes, chunk_size(5));
        assert_eq!(taken_elsewhere(&SECOND, 5, 1), second, "shared");
        assert_eq!(take_n(&FIRST, 5, 1), first, "kept");
        drop(own);
    }
}

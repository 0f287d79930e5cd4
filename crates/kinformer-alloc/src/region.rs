//! The address range chunks are cut from.
//!
//! One range is reserved, the first time a chunk is wanted, and split into
//! one span per size class, so that the chunk of any part is found from the
//! part's address alone: the span gives the class, the class the chunk's
//! size, and the chunk starts at the multiple of that size below the part.
//! The range is reserved without committing memory (`MAP_NORESERVE`): a page
//! costs memory only once touched (with transparent huge pages, a 2 MiB page
//! once any of it is touched). Chunks whose parts are all freed go on
//! their class's free list and are reused, never returned to the system.
//!
//! A chunk starts with its [`Header`]; parts follow it.
#![allow(unsafe_code)] // raw memory: mmap, chunk headers, free lists

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::class::{CLASSES, chunk_size};
use crate::count::LiveCount;

/// Bytes of each class's span (16 GiB; small under Miri, which allocates
/// the range for real).
#[cfg(not(miri))]
pub(crate) const SPAN_SHIFT: u32 = 34;
#[cfg(miri)]
pub(crate) const SPAN_SHIFT: u32 = 18;

/// Bytes of the whole range.
const RANGE: usize = CLASSES << SPAN_SHIFT;

/// The start of a chunk.
#[derive(Debug)]
#[repr(C)]
pub struct Header {
    /// Parts still live (see [`crate::count`]).
    pub live: LiveCount,
    /// When the chunk holds one whole object (every part its decode
    /// allocated, none elsewhere): how many of its parts were live at the
    /// close; 0 otherwise (see [`crate::whole`]).
    pub whole: AtomicUsize,
    /// The next chunk on the free list (0: none), while the chunk is free.
    next: usize,
}

/// Bytes before a chunk's first part.
pub const HEADER: usize = size_of::<Header>();

/// How many classes up [`Region::take`] looks for a free chunk.
pub const LARGER: usize = 2;

/// How many classes down [`Region::take`] looks for a free chunk, after
/// the larger ones: a chunk one class smaller (1/9 less) still holds most
/// objects whose estimate rounded up to `class`, and an object that does
/// not fit continues in a second chunk.
pub const SMALLER: usize = 1;

/// The reserved range and its per-class free lists.
pub struct Region {
    /// Start of the range; 0 until reserved.
    base: AtomicUsize,
    /// The reservation was refused: chunks are never handed out.
    refused: AtomicBool,
    classes: [Class; CLASSES],
}

/// One class's span.
pub(crate) struct Class {
    /// Chunks cut from the span so far.
    cut: AtomicUsize,
    /// Head of the free list (0: empty).
    free: Mutex<usize>,
    /// Chunks on the free list.
    free_len: AtomicUsize,
}

impl Class {
    /// Chunks of `size` bytes cut from the span so far (a failed cut past
    /// the span's end still counted up `cut`).
    pub(crate) fn chunks_cut(&self, size: usize) -> usize {
        self.cut
            .load(Ordering::Relaxed)
            .min((1 << SPAN_SHIFT) / size)
    }
}

/// How much of the region is in use (see [`Region::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// Bytes of all chunks ever cut (what the region can hold in memory).
    pub cut_bytes: usize,
    /// Bytes of the chunks on the free lists, ready for reuse.
    pub free_bytes: usize,
}

/// The process's one region.
pub static REGION: Region = Region::new();

impl Region {
    pub(crate) const fn new() -> Self {
        Self {
            base: AtomicUsize::new(0),
            refused: AtomicBool::new(false),
            classes: [const {
                Class {
                    cut: AtomicUsize::new(0),
                    free: Mutex::new(0),
                    free_len: AtomicUsize::new(0),
                }
            }; CLASSES],
        }
    }

    /// Whether `addr` lies in a chunk.
    #[inline]
    pub fn contains(&self, addr: usize) -> bool {
        let base = self.base.load(Ordering::Relaxed);
        base != 0 && addr.wrapping_sub(base) < RANGE
    }

    /// The header of the chunk holding `addr`, which [`Region::contains`].
    #[inline]
    pub fn chunk_of(&self, addr: usize) -> *const Header {
        self.span_within(addr).0 as *const Header
    }

    /// The start and size of the chunk of `addr`, which is in the range.
    #[inline]
    fn span_within(&self, addr: usize) -> (usize, usize) {
        let offset = addr - self.base.load(Ordering::Relaxed);
        let within = offset & ((1 << SPAN_SHIFT) - 1);
        let size = chunk_size(offset >> SPAN_SHIFT);
        (addr - within % size, size)
    }

    /// The start and size of the chunk holding `addr`, if the address is in
    /// the region (whether or not the chunk is in use).
    #[inline]
    pub fn chunk_span(&self, addr: usize) -> Option<(usize, usize)> {
        self.contains(addr).then(|| self.span_within(addr))
    }

    /// A chunk of class `class` or near it, and never smaller than
    /// `at_least` bytes, with its size, its header written with an open
    /// count; `None` when the range could not be reserved or the span is
    /// used up.
    ///
    /// A free chunk of one of the next [`LARGER`] classes, or else of the
    /// [`SMALLER`] ones below that still hold `at_least`, is taken before a
    /// new one is cut, so that memory freed by objects of a kind whose size
    /// estimate drifts (or sits on a class boundary) is reused rather than
    /// stranded on its class's free list.
    pub fn take(&self, class: usize, at_least: usize) -> Option<(usize, usize)> {
        let base = self.base()?;
        let (chunk, class) = (class..=class + LARGER)
            .chain(
                (class.saturating_sub(SMALLER)..class)
                    .rev()
                    .filter(|&c| chunk_size(c) >= at_least),
            )
            .find_map(|c| Some((self.pop(c)?, c)))
            .or_else(|| Some((self.cut(base, class)?, class)))?;
        // SAFETY: the chunk is ours (fresh, or off the free list: no part
        // of it is live) and starts 64-aligned in the reserved range.
        unsafe {
            (chunk as *mut Header).write(Header {
                live: LiveCount::open(),
                whole: AtomicUsize::new(0),
                next: 0,
            });
        }
        Some((chunk, chunk_size(class)))
    }

    /// A new chunk of `class`, never handed out before (`None` when the
    /// span is used up).
    fn cut(&self, base: usize, class: usize) -> Option<usize> {
        let span = self.classes.get(class)?;
        let i = span.cut.fetch_add(1, Ordering::Relaxed);
        let size = chunk_size(class);
        ((i + 1) * size <= 1 << SPAN_SHIFT).then(|| base + (class << SPAN_SHIFT) + i * size)
    }

    /// Cuts new chunks, touches their pages and puts them on the free
    /// lists, until each class's free list holds `per_mille` thousandths of
    /// the chunks cut in that class so far (rounded up), or `budget` bytes were cut (at
    /// least one chunk per call, so that calling again always gets further).
    /// Returns whether more is wanted (call again). Does nothing before the
    /// range is reserved (no chunk was ever taken: the arenas are not in use).
    ///
    /// A chunk's pages are touched here, so that the thread that takes the
    /// chunk later does not wait for the kernel to supply them.
    pub fn top_up(&self, per_mille: usize, budget: usize) -> bool {
        let Some(base) = self.reserved() else {
            return false;
        };
        let mut spent = 0;
        for (class, span, size) in self.spans() {
            // Rounded up: every class in use keeps at least one spare (and
            // with it the huge page its next chunks are cut from).
            let want = (span.chunks_cut(size) * per_mille).div_ceil(1000);
            while span.free_len.load(Ordering::Relaxed) < want {
                if spent > 0 && spent + size > budget {
                    return true;
                }
                let Some(chunk) = self.cut(base, class) else {
                    break;
                };
                touch(chunk, size);
                spent += size;
                // SAFETY: a new chunk: nothing of it was ever handed out.
                unsafe { self.give_back(chunk) };
            }
        }
        false
    }

    /// The range's start, once reserved (`None`: no chunk was ever taken).
    pub(crate) fn reserved(&self) -> Option<usize> {
        let base = self.base.load(Ordering::Acquire);
        (base != 0).then_some(base)
    }

    /// Each class with its span and its chunk size.
    pub(crate) fn spans(&self) -> impl Iterator<Item = (usize, &Class, usize)> {
        (self.classes.iter().enumerate()).map(|(class, span)| (class, span, chunk_size(class)))
    }

    /// Puts a chunk whose count reached zero on its class's free list.
    ///
    /// # Safety
    /// `chunk` came from [`Region::take`] (or was cut for
    /// [`Region::top_up`]) and nothing of it is live.
    pub unsafe fn give_back(&self, chunk: usize) {
        let class = (chunk - self.base.load(Ordering::Relaxed)) >> SPAN_SHIFT;
        let Some(span) = self.classes.get(class) else {
            return;
        };
        let mut head = span.free.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the chunk is ours (the caller's contract).
        unsafe { Self::set_next(chunk, *head) };
        *head = chunk;
        span.free_len.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes cut and free, over all classes (read without stopping anyone:
    /// a snapshot that is only approximately consistent).
    pub fn stats(&self) -> RegionStats {
        let mut stats = RegionStats::default();
        for (class, span) in self.classes.iter().enumerate() {
            let size = chunk_size(class);
            stats.cut_bytes += span.chunks_cut(size) * size;
            stats.free_bytes += span.free_len.load(Ordering::Relaxed) * size;
        }
        stats
    }

    /// The chunk after the free chunk `chunk` on its list (0: none).
    ///
    /// # Safety
    /// `chunk` is free (on a list) and its header was written.
    unsafe fn next_of(chunk: usize) -> usize {
        // SAFETY: the caller's contract.
        unsafe { (*(chunk as *const Header)).next }
    }

    /// Links the free chunk `chunk` to `next`, the chunk after it on a list.
    ///
    /// # Safety
    /// `chunk` is free and nobody else's to link.
    unsafe fn set_next(chunk: usize, next: usize) {
        // SAFETY: the caller's contract.
        unsafe { (*(chunk as *mut Header)).next = next };
    }

    fn pop(&self, class: usize) -> Option<usize> {
        let span = self.classes.get(class)?;
        // An empty list is passed over without taking its lock.
        if span.free_len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut head = span.free.lock().unwrap_or_else(|e| e.into_inner());
        let chunk = *head;
        if chunk == 0 {
            return None;
        }
        // SAFETY: chunks on the list are free and hold a written header.
        let next = unsafe { Self::next_of(chunk) };
        *head = next;
        span.free_len.fetch_sub(1, Ordering::Relaxed);
        Some(chunk)
    }

    /// The range's start, reserving it on first use.
    fn base(&self) -> Option<usize> {
        let base = self.base.load(Ordering::Acquire);
        if base != 0 {
            return Some(base);
        }
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        let Some(reserved) = reserve() else {
            self.refused.store(true, Ordering::Relaxed);
            return None;
        };
        match self
            .base
            .compare_exchange(0, reserved, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Some(reserved),
            Err(winner) => {
                release(reserved);
                Some(winner)
            }
        }
    }
}

/// Writes one byte in each page of the chunk at `chunk` (`size` bytes),
/// so that the kernel supplies the pages now.
fn touch(chunk: usize, size: usize) {
    for page in (chunk..chunk + size).step_by(PAGE) {
        // SAFETY: the chunk lies in the reserved, writable range and is
        // nobody's yet (the caller just cut it).
        unsafe { std::ptr::write_volatile(page as *mut u8, 0) };
    }
}

/// The smallest page size the kernel maps.
pub(crate) const PAGE: usize = 4096;

#[cfg(not(miri))]
fn reserve() -> Option<usize> {
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choosing; nothing else refers to it.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            RANGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    // Huge pages where the system gives them on request (as mimalloc asks
    // for its own arenas): first touches of new chunks fault once per 2 MiB
    // instead of once per 4 KiB. Advice only: refused, it changes nothing.
    // SAFETY: advice on the mapping just made.
    unsafe { libc::madvise(addr, RANGE, libc::MADV_HUGEPAGE) };
    Some(addr as usize)
}

#[cfg(not(miri))]
fn release(addr: usize) {
    // SAFETY: `addr` is a mapping of `RANGE` bytes that lost the race to
    // become the region, so nothing points into it.
    unsafe { libc::munmap(addr as *mut libc::c_void, RANGE) };
}

#[cfg(miri)]
fn reserve() -> Option<usize> {
    let layout = std::alloc::Layout::from_size_align(RANGE, 4096).ok()?;
    // SAFETY: a non-zero size.
    let addr = unsafe { std::alloc::System.alloc(layout) };
    (!addr.is_null()).then_some(addr as usize)
}

#[cfg(miri)]
fn release(addr: usize) {
    if let Ok(layout) = std::alloc::Layout::from_size_align(RANGE, 4096) {
        // SAFETY: allocated by `reserve` with this layout.
        unsafe { std::alloc::System.dealloc(addr as *mut u8, layout) };
    }
}

#[cfg(miri)]
use std::alloc::GlobalAlloc;

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes a chunk of `class` and frees it at once (nothing else uses a
    /// test's own region).
    fn freed(region: &'static Region, class: usize) -> usize {
        let (chunk, _) = region.take(class, 0).expect("the range is reserved");
        // SAFETY: the chunk was just taken and holds no parts.
        unsafe { region.give_back(chunk) };
        chunk
    }

    #[test]
    fn take_looks_two_classes_up_and_one_down_before_cutting() {
        static REGION: Region = Region::new();
        let up2 = freed(&REGION, 12);
        assert_eq!(REGION.take(10, 0), Some((up2, chunk_size(12))));
        let down1 = freed(&REGION, 9);
        assert_eq!(REGION.take(10, 0), Some((down1, chunk_size(9))));

        let (up3, down2) = (freed(&REGION, 13), freed(&REGION, 8));
        let (new, size) = REGION.take(10, 0).expect("cut");
        assert!(new != up3 && new != down2, "a new chunk is cut");
        assert_eq!(size, chunk_size(10));
        assert_eq!(REGION.stats().free_bytes, chunk_size(13) + chunk_size(8));
    }

    #[test]
    fn the_span_of_any_address_in_a_chunk_is_that_chunk() {
        static REGION: Region = Region::new();
        let (chunk, size) = REGION.take(12, 0).expect("cut");
        for addr in [chunk, chunk + HEADER + 7, chunk + size - 1] {
            assert_eq!(REGION.chunk_span(addr), Some((chunk, size)));
        }
        assert_ne!(REGION.chunk_span(chunk + size), Some((chunk, size)));
        let outside = 7u64;
        assert_eq!(REGION.chunk_span(&raw const outside as usize), None);
    }

    #[test]
    fn top_up_fills_each_free_list_to_its_share_of_the_cut_chunks() {
        static REGION: Region = Region::new();
        assert!(!REGION.top_up(10, usize::MAX), "nothing before the range");
        assert_eq!(REGION.stats(), RegionStats::default());

        // The smallest class: 506 of its chunks fit in a span under Miri too.
        let taken: Vec<_> = (0..500).map(|_| REGION.take(0, 0)).collect();
        let (_, small) = REGION.take(40, 0).expect("cut");
        // 10 per mille, rounded up, of the chunks cut (the spares count
        // too): 6 for the 500 (5.06 with the six); one for the one.
        let size = chunk_size(0);
        assert!(
            REGION.top_up(10, 0),
            "a budget under one chunk still cuts one"
        );
        assert_eq!(REGION.stats().free_bytes, size);
        assert!(REGION.top_up(10, 2 * size), "the budget ends it early");
        assert_eq!(REGION.stats().free_bytes, 3 * size);
        assert!(!REGION.top_up(10, usize::MAX));
        let topped = 6 * size + small;
        assert_eq!(REGION.stats().free_bytes, topped);
        assert!(!REGION.top_up(10, usize::MAX), "already topped up");
        assert_eq!(REGION.stats().free_bytes, topped);

        // The spare chunks are new ones, and are what `take` hands out next.
        let (spare, _) = REGION.take(0, 0).expect("a spare chunk");
        assert!(taken.iter().all(|t| t.map(|(c, _)| c) != Some(spare)));
        assert_eq!(REGION.stats().free_bytes, topped - size);
    }

    #[test]
    fn a_larger_free_chunk_is_preferred_to_a_smaller_one() {
        static REGION: Region = Region::new();
        let (down, up) = (freed(&REGION, 20), freed(&REGION, 22));
        assert_eq!(REGION.take(21, 0), Some((up, chunk_size(22))));
        assert_eq!(REGION.take(21, 0), Some((down, chunk_size(20))));
    }

    #[test]
    fn a_smaller_chunk_is_not_taken_when_it_cannot_hold_the_part() {
        static REGION: Region = Region::new();
        let down = freed(&REGION, 30);
        let (new, size) = REGION.take(31, chunk_size(30) + 1).expect("cut");
        assert_ne!(new, down);
        assert_eq!(size, chunk_size(31));
        assert_eq!(
            REGION.take(31, chunk_size(30)),
            Some((down, chunk_size(30)))
        );
    }
}

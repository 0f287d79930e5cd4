//! A chunk's count of live parts.
//!
//! While a decode thread bumps parts into a chunk, it counts them in a
//! plain local; the shared count starts at [`OPEN`] instead, so no free of a
//! part (on any thread, at any time) can bring it to zero. Closing the chunk
//! takes `OPEN - parts` off: from then on the count is the number of parts
//! still live, and whoever takes it to zero (the closer, or the last free)
//! is the one thread that reuses the chunk.
//!
//! Each decrement is a release, and the one that reaches zero is followed by
//! an acquire fence, so every write to the chunk's parts happens before the
//! chunk is handed out again (the protocol of `Arc`'s count). The loom model
//! in this module's tests checks both claims.
#![allow(unsafe_code)] // the loom model writes through `UnsafeCell` pointers

#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering, fence};

/// What the count starts at: more parts than any chunk can hold.
pub const OPEN: usize = 1 << 40;

/// The live parts of one chunk (see the module docs).
#[derive(Debug)]
pub struct LiveCount(AtomicUsize);

impl LiveCount {
    /// A count for a chunk that is being filled.
    pub fn open() -> Self {
        Self(AtomicUsize::new(OPEN))
    }

    /// One part was freed. True when it was the last one and the chunk was
    /// already closed: the caller now owns the chunk.
    pub fn release_part(&self) -> bool {
        self.take(1) == 0
    }

    /// The filler is done with the chunk, having put `parts` parts in it.
    /// True when all of them were already freed: the caller owns the chunk.
    pub fn close(&self, parts: usize) -> bool {
        self.close_counting(parts) == 0
    }

    /// [`LiveCount::close`], returning how many of the parts are still live
    /// (0: the caller owns the chunk).
    pub fn close_counting(&self, parts: usize) -> usize {
        self.take(OPEN - parts)
    }

    /// Releases all `live` parts at once, when exactly `live` are still
    /// live: true when they were, and the caller now owns the chunk. For an
    /// owner of every live part that will never free them one by one.
    pub fn release_all(&self, live: usize) -> bool {
        live != 0
            && self
                .0
                .compare_exchange(live, 0, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    /// Takes `n` off; returns what is left (an acquire fence when nothing is).
    fn take(&self, n: usize) -> usize {
        let left = self.0.fetch_sub(n, Ordering::Release).wrapping_sub(n);
        if left == 0 {
            fence(Ordering::Acquire);
        }
        left
    }
}

#[cfg(all(test, loom))]
mod model {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    /// A chunk with two parts, each written and then freed by its own
    /// thread, while the filler closes it: exactly one of the three owns the
    /// chunk afterwards, and it sees both parts' writes.
    #[test]
    fn exactly_one_thread_reuses_the_chunk_and_sees_every_write() {
        loom::model(|| {
            let count = Arc::new(LiveCount::open());
            let parts = Arc::new([UnsafeCell::new(0u32), UnsafeCell::new(0u32)]);
            let handles: Vec<_> = (0..2)
                .map(|i| {
                    let (count, parts) = (Arc::clone(&count), Arc::clone(&parts));
                    loom::thread::spawn(move || {
                        // SAFETY: part `i` is this thread's alone until it
                        // releases it below; loom checks that claim.
                        parts[i].with_mut(|p| unsafe { *p = 1 });
                        if count.release_part() {
                            // The owner reads both parts (a reuse writes them).
                            // SAFETY: the owner of the closed chunk holds every
                            // part; loom reports any other access as a race.
                            parts[0].with_mut(|p| unsafe { *p = 2 });
                            // SAFETY: as above.
                            parts[1].with_mut(|p| unsafe { *p = 2 });
                            1
                        } else {
                            0
                        }
                    })
                })
                .collect();
            let mut owners = usize::from(count.close(2));
            if owners == 1 {
                // SAFETY: the closer owns the chunk, so every part; loom
                // reports any other access as a race.
                parts[0].with_mut(|p| unsafe { *p = 2 });
                // SAFETY: as above.
                parts[1].with_mut(|p| unsafe { *p = 2 });
            }
            for h in handles {
                owners += h.join().unwrap();
            }
            assert_eq!(owners, 1);
        });
    }

    /// A release of all parts racing a free of one of them (which the
    /// release's contract rules out) still never gives the chunk to two
    /// threads: the release succeeds only on the exact count.
    #[test]
    fn a_release_of_all_parts_never_shares_the_chunk_with_a_free() {
        loom::model(|| {
            let count = Arc::new(LiveCount::open());
            assert!(!count.close(2));
            let c = Arc::clone(&count);
            let t = loom::thread::spawn(move || c.release_part());
            let released = count.release_all(2);
            let freed = t.join().unwrap();
            assert!(!(released && freed), "two owners");
            assert!(!freed, "one part is still live for the free");
        });
    }

    /// A part freed before the close cannot make anyone the owner early.
    #[test]
    fn a_free_before_the_close_never_owns_the_chunk() {
        loom::model(|| {
            let count = Arc::new(LiveCount::open());
            let c = Arc::clone(&count);
            let t = loom::thread::spawn(move || c.release_part());
            let closed = count.close(2);
            let freed = t.join().unwrap();
            assert!(!closed && !freed, "one part is still live");
            assert!(count.release_part(), "the last part owns it");
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_count_reaches_zero_once_after_the_close() {
        let count = LiveCount::open();
        assert!(!count.release_part());
        assert!(!count.close(3));
        assert!(!count.release_part());
        assert!(count.release_part());

        let empty = LiveCount::open();
        assert!(empty.close(0), "a chunk with no parts is free at its close");

        let whole = LiveCount::open();
        assert_eq!(whole.close_counting(3), 3);
        assert!(!whole.release_all(2), "only on the exact count");
        assert!(whole.release_all(3));
        assert!(
            !whole.release_part(),
            "a stray free after it never owns the chunk"
        );
    }
}

//! `ObjectArenas` as this test binary's global allocator: the blocks a
//! thread that keeps freed blocks frees outside decode scopes are handed
//! out again, last freed first, for their size only, within bounds.
#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // raw allocations, as a `Box` or `Vec` would make them

use std::alloc::{Layout, System, alloc, dealloc};

use kinformer_alloc::ObjectArenas;
use kinformer_alloc::hot::{self, ALIGN, BUDGET, DECAY_EVERY, DEPTH, MAX_SIZE};

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

/// Sizes nothing else in these tests allocates.
const SIZE: usize = 776;
const OTHER: usize = 784;

fn layout(size: usize) -> Layout {
    Layout::from_size_align(size, ALIGN).unwrap()
}

fn take(size: usize) -> *mut u8 {
    // SAFETY: a non-zero size.
    let p = unsafe { alloc(layout(size)) };
    assert!(!p.is_null());
    p
}

fn give(p: *mut u8, size: usize) {
    // SAFETY: `p` came from `take(size)`, freed once.
    unsafe { dealloc(p, layout(size)) };
}

/// Runs `f` on a thread of its own (a fresh set of stacks).
fn on_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(f).join().unwrap();
}

#[test]
fn a_freed_block_comes_back_last_in_first_out_for_its_size_only() {
    on_thread(|| {
        let _kept = hot::keep_freed_blocks();
        let (a, b) = (take(SIZE), take(SIZE));
        give(a, SIZE);
        give(b, SIZE);
        assert_eq!(hot::kept(SIZE), 2);
        assert_eq!(hot::kept_bytes(), 2 * SIZE);
        let other = take(OTHER);
        assert_eq!(hot::kept(SIZE), 2, "another size does not take them");
        assert_eq!(take(SIZE), b, "the block freed last comes back first");
        assert_eq!(take(SIZE), a);
        assert_eq!(hot::kept_bytes(), 0);
        give(a, SIZE);
        give(b, SIZE);
        give(other, OTHER);
    });
}

#[test]
fn nothing_is_kept_after_the_guard_drops() {
    on_thread(|| {
        let kept = hot::keep_freed_blocks();
        let blocks: Vec<_> = (0..8).map(|_| take(SIZE)).collect();
        blocks.iter().for_each(|&b| give(b, SIZE));
        assert_eq!(hot::kept(SIZE), 8);
        drop(kept);
        assert_eq!(hot::kept_bytes(), 0, "the guard gives them back");
        let b = take(SIZE);
        give(b, SIZE);
        assert_eq!(hot::kept(SIZE), 0);
    });
}

#[test]
fn blocks_past_the_depth_budget_or_shape_are_not_kept() {
    on_thread(|| {
        let _kept = hot::keep_freed_blocks();
        let blocks: Vec<_> = (0..DEPTH + 8).map(|_| take(SIZE)).collect();
        blocks.iter().for_each(|&b| give(b, SIZE));
        assert_eq!(hot::kept(SIZE), DEPTH);
        // Too large, not a multiple of the alignment, another alignment.
        for l in [
            layout(MAX_SIZE + ALIGN),
            Layout::from_size_align(SIZE + 1, ALIGN).unwrap(),
            Layout::from_size_align(SIZE, 16).unwrap(),
        ] {
            // SAFETY: a non-zero size; freed once with its layout.
            unsafe { dealloc(alloc(l), l) };
        }
        assert_eq!(hot::kept_bytes(), DEPTH * SIZE);
        assert_eq!(hot::kept(SIZE + 1), 0, "no size of its own");
        // The budget: a few large sizes, each up to its depth, until the
        // next block would pass it.
        let sizes = [
            MAX_SIZE,
            MAX_SIZE - ALIGN,
            MAX_SIZE - 2 * ALIGN,
            MAX_SIZE - 3 * ALIGN,
            960,
        ];
        for size in sizes {
            let blocks: Vec<_> = (0..DEPTH).map(|_| take(size)).collect();
            blocks.iter().for_each(|&b| give(b, size));
        }
        let bytes = hot::kept_bytes();
        assert!(bytes <= BUDGET && bytes > BUDGET - MAX_SIZE, "{bytes}");
        assert_eq!(hot::kept(MAX_SIZE), DEPTH);
        assert!(hot::kept(960) < DEPTH, "blocks past the budget go back");
    });
}

#[test]
fn the_older_half_of_each_size_goes_back_every_so_many_frees() {
    on_thread(|| {
        let _kept = hot::keep_freed_blocks();
        let idle: Vec<_> = (0..64).map(|_| take(OTHER)).collect();
        idle.iter().for_each(|&b| give(b, OTHER));
        let frees_so_far = 64;
        for _ in frees_so_far..DECAY_EVERY {
            let b = take(SIZE);
            give(b, SIZE);
        }
        assert_eq!(hot::kept(OTHER), 32, "a decay halves an idle size");
        assert_eq!(hot::kept(SIZE), 1, "a size in use keeps its block");
    });
}

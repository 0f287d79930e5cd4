//! A global allocator that counts live bytes, over mimalloc.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, Ordering};

/// Counts bytes currently allocated through it.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

impl Counting {
    /// Bytes currently allocated.
    pub fn live_bytes() -> isize {
        LIVE.load(Ordering::SeqCst)
    }
}

// SAFETY: forwards every call unchanged to mimalloc, only counting sizes.

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: same contract as the caller's.
        unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
    }
}

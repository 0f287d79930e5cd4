//! Once a kind's size is learned, each object fits one chunk. In its own
//! binary: no other test frees chunks meanwhile, so no chunk of a smaller
//! class is on a free list (an object given one of those may continue into
//! a second chunk, which `Region::take` allows to reuse the memory).
#![allow(clippy::unwrap_used)]

use std::alloc::System;

use kinformer_alloc::ObjectArenas;

mod common;
use common::*;

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

#[test]
fn once_its_kind_is_learned_an_object_takes_one_chunk() {
    let objects: Vec<Object> = (0..if cfg!(miri) { 14 } else { 50 }).map(decode).collect();
    for o in &objects[10..] {
        let chunks: std::collections::BTreeSet<usize> = parts(o)
            .into_iter()
            .map(|p| chunk(p as *const u8))
            .collect();
        assert_eq!(chunks.len(), 1, "{o:?}");
    }
    for (i, o) in objects.iter().enumerate() {
        assert_eq!(*o, decode_outside(i));
    }
}

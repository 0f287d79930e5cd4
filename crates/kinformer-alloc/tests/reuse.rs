//! When a chunk is handed out again (its own binary: no other test's
//! objects take chunks off the free lists meanwhile).
#![allow(clippy::unwrap_used)]

use std::alloc::System;

use kinformer_alloc::region::REGION;
use kinformer_alloc::{ObjectArenas, with_object_arena};

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

fn decode(i: usize) -> Vec<String> {
    with_object_arena::<Vec<String>>(300, || (0..8).map(|n| format!("part-{i}-{n}")).collect())
}

fn chunk(p: *const u8) -> usize {
    REGION.chunk_of(p as usize) as usize
}

#[test]
fn a_chunk_is_reused_only_after_its_last_part_is_freed() {
    // Learn the kind's size, so that each object takes one chunk.
    for i in 0..20 {
        drop(decode(i));
    }
    let mut o = decode(3);
    let first = chunk(o.as_ptr().cast());
    assert!(o.iter().all(|s| chunk(s.as_ptr()) == first));
    let kept = o.pop().unwrap();
    drop(o);
    let others: Vec<Vec<String>> = (0..20).map(decode).collect();
    assert!(
        others.iter().all(|p| chunk(p.as_ptr().cast()) != first),
        "handed out while a part is live"
    );
    assert_eq!(kept, "part-3-7");
    drop(kept);
    assert_eq!(
        chunk(decode(4).as_ptr().cast()),
        first,
        "the freed chunk comes first"
    );
    drop(others);
}

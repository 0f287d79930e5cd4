//! The decode pool makes spare object-arena chunks ready, and the objects
//! decoded next take them instead of new chunks (its own binary: the
//! arenas are this process's global allocator, and no other test takes
//! chunks meanwhile).
#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::time::{Duration, Instant};

use kinformer_alloc::region::REGION;
use kinformer_alloc::{ObjectArenas, with_object_arena};
use kinformer_reflector::DecodePool;

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

/// An "object" of a few parts, about 3 KB in all.
fn decode(i: usize) -> Vec<String> {
    with_object_arena::<Vec<String>>(1000, || {
        (0..3)
            .map(|n| format!("{i}-{n}-{}", "x".repeat(1000)))
            .collect()
    })
}

#[test]
fn after_a_top_up_the_next_objects_take_spare_chunks_not_new_ones() {
    let pool = DecodePool::new(2, "spare-test").unwrap();
    // Learn the size, then hold 3,000 objects: about 3,000 chunks of one
    // class, none free.
    drop((0..50).map(decode).collect::<Vec<_>>());
    let held: Vec<_> = (0..3000).map(decode).collect();
    let before = REGION.stats();
    let chunk = before.cut_bytes / 3000;
    assert!(before.free_bytes < 60 * chunk, "{before:?}");

    pool.top_up_spare_chunks();
    let deadline = Instant::now() + Duration::from_secs(30);
    while REGION.stats().free_bytes < before.free_bytes + 25 * chunk {
        assert!(
            Instant::now() < deadline,
            "no spare chunks: {:?}",
            REGION.stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let topped = REGION.stats();
    // Ten per thousand: about 30 chunks, not a few hundred.
    assert!(
        topped.free_bytes < before.free_bytes + 40 * chunk,
        "{topped:?}"
    );

    let more: Vec<_> = (0..20).map(decode).collect();
    let after = REGION.stats();
    assert_eq!(after.cut_bytes, topped.cut_bytes, "no chunk cut");
    assert!(after.free_bytes < topped.free_bytes, "spare chunks taken");
    drop((held, more));
}

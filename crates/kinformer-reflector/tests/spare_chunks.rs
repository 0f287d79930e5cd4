//! The decode pool's keeper makes spare object-arena chunks ready without
//! being asked, and makes them again after objects took them (its own
//! binary: the arenas are this process's global allocator, and no other
//! test takes chunks meanwhile).
#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::time::{Duration, Instant};

use kinformer_alloc::region::{REGION, RegionStats};
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

/// Waits (up to 30 s) until `done` holds for the region's figures.
fn wait_until(what: &str, done: impl Fn(RegionStats) -> bool) -> RegionStats {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stats = REGION.stats();
        if done(stats) {
            return stats;
        }
        assert!(Instant::now() < deadline, "{what}: {stats:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_keeper_keeps_spare_chunks_ready_as_objects_take_them() {
    let pool = DecodePool::new(2, "spare-test").unwrap();
    // Learn the size, then hold 3,000 objects: about 3,000 chunks of one
    // class.
    drop((0..50).map(decode).collect::<Vec<_>>());
    let mut held: Vec<_> = (0..3000).map(decode).collect();
    let chunk = REGION.stats().cut_bytes / 3000;

    // Nobody asks: the keeper's periodic look tops the class up to ten per
    // thousand, about 30 chunks, and not a few hundred.
    let topped = wait_until("no spare chunks", |s| s.free_bytes >= 25 * chunk);
    assert!(topped.free_bytes < 40 * chunk, "{topped:?}");

    // 25 more objects take the spares; the keeper makes new ones.
    held.extend((3000..3025).map(decode));
    let again = wait_until("spare chunks not made again", |s| {
        s.free_bytes >= 25 * chunk && s.cut_bytes >= topped.cut_bytes + 20 * chunk
    });
    assert!(
        again.cut_bytes < topped.cut_bytes + 60 * chunk,
        "{again:?} after {topped:?}"
    );
    drop((pool, held));
}

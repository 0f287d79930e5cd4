//! An object decoded whole into one chunk gives the chunk back at once; any
//! other object is refused and dropped as usual. In its own binary: no
//! other test takes chunks from the free lists meanwhile.
#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // release_whole and its contract are what is tested

use std::alloc::System;
use std::collections::BTreeSet;

use kinformer_alloc::region::REGION;
use kinformer_alloc::{ObjectArenas, release_whole, with_object_arena};

mod common;
use common::*;

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

/// Decodes objects until their kind's size is learned; returns the last.
fn learned() -> Object {
    let mut last = decode(0);
    for i in 1..20 {
        last = decode(i);
    }
    last
}

fn chunks_of(o: &Object) -> BTreeSet<usize> {
    parts(o)
        .into_iter()
        .map(|p| chunk(p as *const u8))
        .collect()
}

#[test]
fn whole_objects_give_their_chunks_back_and_others_are_refused() {
    // A whole object: its chunk goes back on the free list at once and is
    // the next object's.
    let o = learned();
    let at = chunks_of(&o);
    assert_eq!(at.len(), 1);
    let free = REGION.stats().free_bytes;
    // SAFETY: `o` is owned here, decoded in one scope, unchanged, and owns
    // its parts alone.
    assert!(unsafe { release_whole(o.name.as_ptr()) });
    std::mem::forget(o);
    assert!(REGION.stats().free_bytes > free, "the chunk is free");
    let next = decode(7);
    assert_eq!(chunks_of(&next), at, "and taken again");
    assert_eq!(next, decode_outside(7));

    // An object that lost a part since its decode is refused, and its
    // drop frees the rest as usual.
    let mut lost = decode(8);
    lost.labels.remove("label-3");
    // SAFETY: as above; the one change only freed parts.
    assert!(!unsafe { release_whole(lost.name.as_ptr()) });
    let lost_at = chunks_of(&lost);
    drop(lost);
    assert_eq!(chunks_of(&decode(9)), lost_at, "freed part by part");

    // An object spread over two chunks (its kind's size not yet learned,
    // from an input length far too small) is refused, also through a part
    // in its last chunk (here its name, allocated last).
    #[derive(Debug)]
    struct Spread(Object);
    let spread = with_object_arena::<Spread>(1, || {
        let Object { labels, items, .. } = decode_outside(10);
        Spread(Object {
            name: String::from("object-10"),
            labels,
            items,
        })
    });
    assert!(chunks_of(&spread.0).len() > 1);
    // SAFETY: as above.
    assert!(!unsafe { release_whole(spread.0.name.as_ptr()) });
    assert_eq!(spread.0, decode_outside(10));
    drop(spread);

    // An object holding a buffer allocated before its scope and grown in
    // it (the buffer stays with the wrapped allocator) is refused.
    let mut outside: Vec<u64> = Vec::with_capacity(1);
    let (name, grown) = with_object_arena::<(String, Vec<u64>)>(100, move || {
        outside.extend(0..100);
        (String::from("grown"), outside)
    });
    assert!(in_region(name.as_ptr()) && !in_region(grown.as_ptr()));
    // SAFETY: as above.
    assert!(!unsafe { release_whole(name.as_ptr()) });
    drop((name, grown));

    // An object with a part left to the wrapped allocator (too large for a
    // chunk) is refused.
    let (name, big) =
        with_object_arena::<(String, Vec<u8>)>(100, || (String::from("big"), vec![1u8; 64 * 1024]));
    assert!(in_region(name.as_ptr()) && !in_region(big.as_ptr()));
    // SAFETY: as above.
    assert!(!unsafe { release_whole(name.as_ptr()) });
    drop((name, big));
}

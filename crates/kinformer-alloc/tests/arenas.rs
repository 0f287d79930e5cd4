//! `ObjectArenas` as this test binary's global allocator: where parts go,
//! when chunks are reused, growth in place, frees on other threads, panics.
#![allow(clippy::unwrap_used)]

use std::alloc::System;

use kinformer_alloc::region::REGION;
use kinformer_alloc::{ObjectArenas, with_object_arena};

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

mod common;
use common::*;

#[test]
fn what_a_scope_allocates_is_in_chunks_and_the_rest_is_not() {
    let outside = String::from("outside");
    assert!(!in_region(outside.as_ptr()));
    let o = decode(1);
    assert!(parts(&o).into_iter().all(|p| REGION.contains(p)));
    // Too large for a chunk.
    let big = with_object_arena::<Vec<u8>>(10, || vec![7u8; 64 * 1024]);
    assert!(!in_region(big.as_ptr()));
    assert!(big.iter().all(|&b| b == 7));
}

#[test]
fn the_last_part_grows_in_place_and_outside_buffers_stay_outside() {
    let mut outside: Vec<u64> = Vec::with_capacity(4);
    let grown = with_object_arena::<Vec<u64>>(1000, || {
        let mut v: Vec<u64> = Vec::with_capacity(4);
        let at = v.as_ptr();
        v.extend(0..64);
        assert_eq!(v.as_ptr(), at, "grown in place");
        outside.extend(0..64);
        v
    });
    assert!(in_region(grown.as_ptr()));
    assert!(!in_region(outside.as_ptr()));
    assert_eq!(grown, (0..64).collect::<Vec<_>>());
    assert_eq!(outside, grown);
    // Growing a part that is not the last one moves it, contents and all.
    let (a, b) = with_object_arena::<(Vec<u8>, Vec<u8>)>(100, || {
        let mut a = vec![1u8; 10];
        let b = vec![2u8; 10];
        a.extend([3u8; 100]);
        (a, b)
    });
    assert_eq!(&a[..10], &[1u8; 10]);
    assert_eq!(&a[10..], &[3u8; 100][..]);
    assert_eq!(b, vec![2u8; 10]);
}

#[test]
fn a_panic_in_a_scope_ends_it() {
    let r = std::panic::catch_unwind(|| {
        with_object_arena::<Object>(400, || -> Object {
            let _partial = String::from("half an object");
            panic!("malformed");
        })
    });
    assert!(r.is_err());
    let after = String::from("after the scope");
    assert!(!in_region(after.as_ptr()));
    assert_eq!(decode(5), decode_outside(5));
}

#[test]
fn nested_scopes_share_the_outer_one() {
    let (outer, inner) = with_object_arena::<(String, String)>(50, || {
        let outer = String::from("outer");
        let inner = with_object_arena::<String>(10, || String::from("inner"));
        (outer, inner)
    });
    assert_eq!(chunk(outer.as_ptr()), chunk(inner.as_ptr()));
}

/// xorshift64*: a small deterministic generator for the stress test.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Objects each decoder makes in the stress test (fewer under Miri).
const OBJECTS: u64 = if cfg!(miri) { 40 } else { 3000 };
/// Parts the dropper holds on to before it frees them in random order.
const HELD: usize = if cfg!(miri) { 20 } else { 500 };

#[test]
fn objects_freed_on_other_threads_in_any_order_never_overlap() {
    // Two decoders hand objects to a dropper thread, which frees some parts
    // at once and others later; every live object is checked against its
    // fill before it is freed, so a chunk handed out while a part of it is
    // live would show as a changed byte.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(64);
    let decoders: Vec<_> = (0..2u64)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut seed = 0x9e37_79b9_7f4a_7c15 ^ (t + 1);
                for i in 0..OBJECTS {
                    let n = 1 + (next(&mut seed) % 12) as usize;
                    let sizes: Vec<usize> = (0..n)
                        .map(|_| 1 + (next(&mut seed) % 700) as usize)
                        .collect();
                    let fill = (i % 251) as u8;
                    let object = with_object_arena::<Vec<Vec<u8>>>(100 + i as usize % 900, || {
                        sizes.iter().map(|&s| vec![fill; s]).collect()
                    });
                    tx.send(object).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut seed = 7u64;
    let mut held: Vec<Vec<u8>> = Vec::new();
    while let Ok(object) = rx.recv() {
        for part in object {
            check(&part);
            if next(&mut seed).is_multiple_of(4) {
                held.push(part);
            }
        }
        if held.len() > HELD {
            let at = (next(&mut seed) % held.len() as u64) as usize;
            let part = held.swap_remove(at);
            check(&part);
        }
    }
    for d in decoders {
        d.join().unwrap();
    }
    held.iter().for_each(|p| check(p));
}

fn check(part: &[u8]) {
    let fill = part[0];
    assert!(part.iter().all(|&b| b == fill), "a part was overwritten");
}

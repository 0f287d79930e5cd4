//! What the arena tests share: an object shaped like a decoded one, decoded
//! in a scope or outside, and where its parts are.
#![allow(dead_code)] // each test binary uses part of it

use std::collections::BTreeMap;

use kinformer_alloc::region::REGION;
use kinformer_alloc::with_object_arena;

/// Something shaped like a decoded object: a map of strings and a list.
#[derive(Clone, Debug, PartialEq)]
pub struct Object {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub items: Vec<String>,
}

pub fn decode(i: usize) -> Object {
    with_object_arena::<Object>(400, || Object {
        name: format!("object-{i}"),
        labels: (0..6)
            .map(|l| (format!("label-{l}"), format!("value-{i}-{l}")))
            .collect(),
        items: (0..4).map(|n| "x".repeat(20 + n + i % 7)).collect(),
    })
}

pub fn in_region<T: ?Sized>(p: *const T) -> bool {
    REGION.contains(p.cast::<u8>() as usize)
}

pub fn chunk<T: ?Sized>(p: *const T) -> usize {
    REGION.chunk_of(p.cast::<u8>() as usize) as usize
}

pub fn parts(o: &Object) -> Vec<usize> {
    let mut v = vec![o.name.as_ptr() as usize, o.items.as_ptr() as usize];
    v.extend(o.items.iter().map(|s| s.as_ptr() as usize));
    v.extend(
        o.labels
            .iter()
            .flat_map(|(k, v)| [k.as_ptr() as usize, v.as_ptr() as usize]),
    );
    v
}

pub fn decode_outside(i: usize) -> Object {
    Object {
        name: format!("object-{i}"),
        labels: (0..6)
            .map(|l| (format!("label-{l}"), format!("value-{i}-{l}")))
            .collect(),
        items: (0..4).map(|n| "x".repeat(20 + n + i % 7)).collect(),
    }
}

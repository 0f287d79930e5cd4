//! The reflector's decoder leaves each object whole in one arena chunk
//! once its kind's size is learned, so that the whole-releasing reclaimer
//! can give the chunk back at once: typed Pods from watch events and list
//! items, metadata-only ones with `managedFields` skipped. Its own binary:
//! the arenas are this process's global allocator, and no other test takes
//! chunks meanwhile.
#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // whole releases of decoded objects

use std::alloc::System;

use k8s_openapi::api::core::v1::Pod;
use kinformer_alloc::ObjectArenas;
use kinformer_reflector::event::{WatchEvent, decode_event_with};
use kinformer_reflector::json;
use kube_core::PartialObjectMeta;

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

fn template(i: usize) -> Vec<u8> {
    let pod = kinformer_sim::template::pod("ns-1", &format!("web-{i}"), 7 + i as u64);
    serde_json::to_vec(&pod).unwrap()
}

/// A watch line as kube-apiserver writes it.
fn modified_line(i: usize) -> Vec<u8> {
    [
        br#"{"type":"MODIFIED","object":"#.as_slice(),
        &template(i),
        b"}",
    ]
    .concat()
}

/// Releases `object` whole when it can; true when it did (and forgot it).
fn released<K: kube_core::Resource>(object: K) -> bool {
    let name = object.meta().name.as_ref().unwrap().as_ptr();
    // SAFETY: owned here, decoded in one scope and unchanged; `Pod` and
    // `PartialObjectMeta` own their parts alone.
    let released = unsafe { kinformer_alloc::release_whole(name) };
    if released {
        std::mem::forget(object);
    }
    released
}

/// How many of `objects` after the first `skip` were released whole.
fn released_after<K: kube_core::Resource>(objects: Vec<K>, skip: usize) -> usize {
    objects
        .into_iter()
        .skip(skip)
        .map(released)
        .filter(|&r| r)
        .count()
}

/// Decodes 40 watch events of `K`.
fn watched<K: kube_core::Resource + serde::de::DeserializeOwned>(skip_fields: bool) -> Vec<K> {
    (0..40)
        .map(
            |i| match decode_event_with::<K>(&modified_line(i), skip_fields).unwrap() {
                WatchEvent::Modified(object) => object,
                _ => panic!("not a MODIFIED event"),
            },
        )
        .collect()
}

#[test]
fn decoded_objects_sit_whole_in_one_chunk_once_their_size_is_learned() {
    // Typed Pods from watch events, then from list items (the estimate is
    // shared).
    let pods = watched::<Pod>(false);
    assert_eq!(released_after(pods, 30), 10, "every watched Pod after 30");
    let listed: Vec<Pod> = (0..10)
        .map(|i| json::from_slice(&template(i), false).unwrap())
        .collect();
    assert_eq!(released_after(listed, 0), 10, "every listed Pod");

    // Metadata-only, `managedFields` skipped, from watch events.
    let metas = watched::<PartialObjectMeta<Pod>>(true);
    assert_eq!(
        released_after(metas, 30),
        10,
        "every metadata object after 30"
    );
}

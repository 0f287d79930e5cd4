//! The reflector's decoder under `kinformer_alloc::ObjectArenas`: objects
//! decode to what `serde_json` makes of them, their parts are in chunks, and
//! replacing them many times over reuses the chunks.
#![allow(clippy::unwrap_used)]

use std::alloc::System;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use k8s_openapi::api::core::v1::Pod;
use kinformer_alloc::ObjectArenas;
use kinformer_alloc::region::REGION;
use kinformer_reflector::event::{WatchEvent, decode_event_with};
use kinformer_reflector::json;
use kube_core::PartialObjectMeta;

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

/// Taken to read, by every test that cuts chunks; to write, by the test
/// that counts the region's cut bytes, which a test cutting chunks on
/// another thread at the same time would add to (up to 0.9 MB seen).
static REGION_COUNTED: RwLock<()> = RwLock::new(());

fn cuts_chunks() -> RwLockReadGuard<'static, ()> {
    REGION_COUNTED
        .read()
        .unwrap_or_else(PoisonError::into_inner)
}

fn counts_cut_bytes() -> RwLockWriteGuard<'static, ()> {
    REGION_COUNTED
        .write()
        .unwrap_or_else(PoisonError::into_inner)
}

fn template(i: usize) -> Vec<u8> {
    let pod = kinformer_sim::template::pod("ns-1", &format!("web-{i}"), 7 + i as u64);
    serde_json::to_vec(&pod).unwrap()
}

#[test]
fn decoded_objects_live_in_chunks_and_equal_the_reference() {
    let _shared = cuts_chunks();
    let bytes = template(1);
    let reference: Pod = serde_json::from_slice(&bytes).unwrap();
    for skip in [false, true] {
        let pod: Pod = json::from_slice(&bytes, skip).unwrap();
        let mut expected = reference.clone();
        if skip {
            expected.metadata.managed_fields = None;
        }
        assert_eq!(pod, expected);
        let name = pod.metadata.name.as_ref().unwrap();
        assert!(REGION.contains(name.as_ptr() as usize));
        let containers = pod.spec.as_ref().unwrap().containers.as_ptr();
        assert!(REGION.contains(containers as usize));
    }
    let line = [br#"{"type":"MODIFIED","object":"#.as_slice(), &bytes, b"}"].concat();
    let WatchEvent::Modified(meta) =
        decode_event_with::<PartialObjectMeta<Pod>>(&line, true).unwrap()
    else {
        panic!("not a MODIFIED event");
    };
    assert_eq!(meta.metadata.labels, reference.metadata.labels);
    assert!(REGION.contains(meta.metadata.name.as_ref().unwrap().as_ptr() as usize));
}

#[test]
fn replacing_objects_reuses_their_chunks() {
    let _alone = counts_cut_bytes();
    let lines: Vec<Vec<u8>> = (0..64).map(template).collect();
    let mut cache: Vec<Pod> = lines
        .iter()
        .map(|l| json::from_slice(l, false).unwrap())
        .collect();
    let before = REGION.stats();
    for round in 0..20 {
        for (i, line) in lines.iter().enumerate() {
            cache[(i * 7 + round) % 64] = json::from_slice(line, false).unwrap();
        }
    }
    let after = REGION.stats();
    // 1,280 replacements; the chunks cut meanwhile are a small fraction of
    // that many objects' (each object is ~30 KB).
    let grown = after.cut_bytes - before.cut_bytes;
    assert!(grown < 16 * 40 * 1024, "cut {grown} more bytes");
    let names: std::collections::BTreeSet<_> = cache
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names.len(), 64);
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

/// The size of the chunk holding a decoded Pod's name. The Pods are kept,
/// so that no freed chunk is there to be reused.
struct ChunkSizes(Vec<Pod>);

impl ChunkSizes {
    fn of(&mut self, pod: Pod) -> usize {
        let name = pod.metadata.name.as_ref().unwrap().as_ptr() as usize;
        self.0.push(pod);
        REGION.chunk_span(name).unwrap().1
    }

    fn of_watch_event(&mut self, i: usize) -> usize {
        let WatchEvent::Modified(pod) = decode_event_with::<Pod>(&modified_line(i), false).unwrap()
        else {
            panic!("not a MODIFIED event");
        };
        self.of(pod)
    }

    /// Decodes 40 watch events, and the chunk size they settled on.
    fn settled(&mut self) -> usize {
        let learned: Vec<usize> = (0..40).map(|i| self.of_watch_event(i)).collect();
        let steady = learned[39];
        assert_eq!(learned[35..], [steady; 5], "the estimate settled");
        steady
    }
}

#[test]
fn a_bookmark_between_objects_leaves_their_chunk_size_alone() {
    let _shared = cuts_chunks();
    let mut sizes = ChunkSizes(Vec::new());
    let steady = sizes.settled();
    // As kube-apiserver writes it, and with spaces and another key first.
    let bookmarks: [&[u8]; 2] = [
        br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12345"}}}"#,
        br#"{"extra": [1, 2], "type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "12346"}}}"#,
    ];
    for (i, bookmark) in bookmarks.into_iter().enumerate() {
        assert!(matches!(
            decode_event_with::<Pod>(bookmark, false),
            Ok(WatchEvent::Bookmark { .. })
        ));
        assert_eq!(sizes.of_watch_event(40 + i), steady);
    }
}

#[test]
fn an_error_event_between_objects_leaves_their_chunk_size_alone() {
    let _shared = cuts_chunks();
    let mut sizes = ChunkSizes(Vec::new());
    let steady = sizes.settled();
    let error = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}"#;
    assert!(matches!(
        decode_event_with::<Pod>(error, false),
        Ok(WatchEvent::Error(_))
    ));
    assert_eq!(sizes.of_watch_event(40), steady);
}

#[test]
fn watch_events_take_the_chunk_size_list_items_settled_on() {
    let _shared = cuts_chunks();
    let mut sizes = ChunkSizes(Vec::new());
    let learned: Vec<usize> = (0..40)
        .map(|i| sizes.of(json::from_slice(&template(i), false).unwrap()))
        .collect();
    let steady = learned[39];
    assert_eq!(learned[35..], [steady; 5], "the estimate settled");
    // The first watch event on this thread.
    assert_eq!(sizes.of_watch_event(40), steady);
}

/// Every heap part of a protobuf-decoded object (a LIST item, whose type
/// comes from its list, and a watch frame's object) lies in one chunk: a
/// part allocated before the scope (its lists' growing vectors, or the
/// list's type moved in) would either waste the chunk's space or be missed
/// by a whole release of the chunk.
#[test]
fn a_protobuf_objects_parts_are_all_in_its_chunk() {
    let _shared = cuts_chunks();
    use kinformer_reflector::protobuf::{
        decode_list, decode_list_item, decode_watch_frame, encode_partial_object_meta_list,
        next_frame,
    };
    let pod: Pod = serde_json::from_slice(&template(3)).unwrap();
    let mut metadata = pod.metadata.clone();
    metadata.finalizers = Some(vec!["a/b".into(), "c/d".into()]);
    let list = k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta {
        resource_version: Some("5".into()),
        ..Default::default()
    };
    let page = decode_list(encode_partial_object_meta_list(&list, [&metadata]).into()).unwrap();
    let item: PartialObjectMeta<Pod> =
        decode_list_item(page.items[0].clone(), page.item_types.clone(), true).unwrap();
    let stored = kinformer_sim::object::StoredObject::new(
        template(3).into(),
        kinformer_sim::object::ObjMeta::default(),
    );
    let frame =
        kinformer_sim::protobuf::frame_of_stored(kinformer_sim::history::EventType::Added, &stored);
    let frame = next_frame(&mut bytes::BytesMut::from(&frame[..]))
        .unwrap()
        .unwrap();
    let WatchEvent::Added(event) = decode_watch_frame::<Pod>(frame, true).unwrap() else {
        panic!("not an ADDED event");
    };
    for object in [&item, &event] {
        let m = &object.metadata;
        let chunk = |p: *const u8| REGION.chunk_span(p as usize).map(|(c, _)| c);
        let name = chunk(m.name.as_ref().unwrap().as_ptr());
        assert!(name.is_some(), "the name is in a chunk");
        let types = object.types.as_ref().unwrap();
        let owners = m.owner_references.as_ref().unwrap();
        let mut parts = vec![
            types.kind.as_ptr(),
            types.api_version.as_ptr(),
            owners.as_ptr().cast(),
            owners[0].uid.as_ptr(),
            m.labels.as_ref().unwrap().values().next().unwrap().as_ptr(),
        ];
        if let Some(f) = &m.finalizers {
            parts.push(f.as_ptr().cast());
            assert_eq!(f.capacity(), f.len(), "a list at its exact size");
        }
        assert_eq!(owners.capacity(), owners.len(), "a list at its exact size");
        for p in parts {
            assert_eq!(chunk(p), name);
        }
    }
    metadata.managed_fields = None;
    assert_eq!(item.metadata, metadata);
    assert_eq!(item.types.unwrap().kind, "PartialObjectMetadata");
}

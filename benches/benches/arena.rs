//! Object-arena bytes per decoded object, by decoder: the chunks cut from
//! `kinformer_alloc`'s region, less those free, after decoding and holding
//! many objects (as a cache holds them), divided by their number. Compares
//! kube's derived impls of `PartialObjectMeta` and `DynamicObject` (whose
//! `flatten` leaves a freed buffer inside each object's chunk) with the
//! reflector's own decoders for them (`kinformer_reflector::object_decode`),
//! and the protobuf decoder of metadata-only watch frames, on the
//! simulator's Pod. Run: `cargo bench -p kinformer-benches --bench arena`.

use bytes::{Bytes, BytesMut};
use k8s_openapi::api::core::v1::Pod;
use kinformer_alloc::ObjectArenas;
use kinformer_alloc::region::REGION;
use kinformer_reflector::Decoders;
use kinformer_reflector::protobuf::{decode_watch_frame, next_frame};
use kinformer_sim::history::EventType;
use kinformer_sim::object::{ObjMeta, StoredObject};
use kinformer_sim::protobuf::frame_of_stored;
use kube_core::DynamicObject;
use kube_core::{PartialObjectMeta, Resource};
use serde::de::DeserializeOwned;

#[global_allocator]
static GLOBAL: ObjectArenas<mimalloc::MiMalloc> = ObjectArenas::new(mimalloc::MiMalloc);

/// Arena bytes in use (cut less free).
fn arena_bytes() -> usize {
    let s = REGION.stats();
    s.cut_bytes.saturating_sub(s.free_bytes)
}

/// Decodes `n` objects from `lines` in turn with `decoders` and holds them;
/// arena bytes per object.
fn per_object<K: Resource + DeserializeOwned>(
    n: usize,
    lines: &[Vec<u8>],
    decoders: Decoders<K>,
) -> f64 {
    per_decoded(n, lines, |line| decoders.event(line, true).expect("decode"))
}

/// Decodes `n` objects from `inputs` in turn with `decode` and holds them;
/// arena bytes per object.
fn per_decoded<I, T>(n: usize, inputs: &[I], decode: impl Fn(&I) -> T) -> f64 {
    let before = arena_bytes();
    let held: Vec<T> = inputs.iter().cycle().take(n).map(decode).collect();
    let per = (arena_bytes() - before) as f64 / n as f64;
    drop(held);
    per
}

fn main() {
    // `cargo test --benches` runs this binary without `--bench`: quick then.
    let n = if std::env::args().any(|a| a == "--bench") {
        200_000
    } else {
        2_000
    };
    // Chunks come in size classes an eighth apart: Pods whose annotation
    // pads them by 0 to 1,008 bytes spread the objects over several
    // classes, so that the mean counts what each decoder allocates rather
    // than where one class boundary falls.
    let pods: Vec<Vec<u8>> = (0..64)
        .map(|i| {
            let mut pod = kinformer_sim::template::pod("ns-1", "web-7d4b9c8f6-00000001", 7);
            pod["metadata"]["annotations"]["example.com/pad"] = "x".repeat(16 * i).into();
            serde_json::to_vec(&pod).expect("encode the template Pod")
        })
        .collect();
    let line =
        |object: &[u8]| [br#"{"type":"MODIFIED","object":"#.as_slice(), object, b"}"].concat();
    let typed: Vec<_> = pods.iter().map(|p| line(p)).collect();
    let metadata: Vec<_> = pods
        .iter()
        .map(|p| line(&kinformer_sim::metadata::partial(p)))
        .collect();
    // The same objects' protobuf watch frames, as the simulator writes them.
    let frames: Vec<Bytes> = pods
        .iter()
        .map(|p| {
            let stored = StoredObject::new(Bytes::from(p.clone()), ObjMeta::default());
            let frame = frame_of_stored(EventType::Modified, &stored);
            next_frame(&mut BytesMut::from(&frame[..]))
                .expect("a frame")
                .expect("a whole frame")
        })
        .collect();
    let partial = Decoders::<PartialObjectMeta<Pod>>::partial_object_meta;
    let rows = [
        (
            "Pod",
            "derive",
            per_object(n, &typed, Decoders::<Pod>::serde()),
        ),
        (
            "PartialObjectMeta<Pod>",
            "derive",
            per_object(n, &metadata, Decoders::<PartialObjectMeta<Pod>>::serde()),
        ),
        (
            "PartialObjectMeta<Pod>",
            "own",
            per_object(n, &metadata, partial()),
        ),
        (
            "PartialObjectMeta<Pod>",
            "protobuf",
            per_decoded(n, &frames, |f| {
                decode_watch_frame::<Pod>(f.clone(), true).expect("decode")
            }),
        ),
        (
            "DynamicObject (a Pod)",
            "derive",
            per_object(n, &typed, Decoders::<DynamicObject>::serde()),
        ),
        (
            "DynamicObject (a Pod)",
            "own",
            per_object(n, &typed, Decoders::dynamic_object()),
        ),
    ];
    println!("| object (`managedFields` skipped) | decoder | arena bytes/object |");
    println!("| --- | --- | --- |");
    for (object, decoder, bytes) in rows {
        println!("| {object} | {decoder} | {bytes:.0} |");
    }
}

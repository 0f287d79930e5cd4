//! One metadata-only watch event decoded from each of kube-apiserver's two
//! encodings: the JSON line (what the informer reads today) and the
//! protobuf frame (what client-go's metadata informers ask for). Both are
//! the bytes kube-apiserver v1.37.2 wrote for the same Pod
//! (`crates/kinformer-wire/tests/fixtures/protobuf/`), decoded into the
//! same `PartialObjectMeta<Pod>` (a unit test checks they are equal), with
//! and without `metadata.managedFields`; then what handing the decoded
//! object to the queue costs (`DeltaFifo::prepare`).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{DeltaFifo, Indexer, builtin_indexers};
use kinformer_reflector::protobuf::{decode_watch_frame, next_frame};
use kinformer_reflector::{Decoders, WatchEvent};
use kinformer_sim::history::EventType;
use kinformer_sim::object::{ObjMeta, StoredObject, metadata_range};
use kube_core::PartialObjectMeta;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const JSON_LINE: &[u8] =
    include_bytes!("../../crates/kinformer-wire/tests/fixtures/protobuf/pod-metadata-watch.json");
const WATCH_PB: &[u8] =
    include_bytes!("../../crates/kinformer-wire/tests/fixtures/protobuf/pod-metadata-watchlist.pb");

fn first_frame() -> Bytes {
    next_frame(&mut BytesMut::from(WATCH_PB))
        .expect("a frame")
        .expect("a whole frame")
}

/// A group that times one object per iteration, briefly (these take µs).
fn per_object_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    group
}

fn decode(c: &mut Criterion) {
    let line = JSON_LINE.trim_ascii_end();
    let frame = first_frame();
    let json = Decoders::<PartialObjectMeta<Pod>>::partial_object_meta();
    let mut group = per_object_group(c, "metadata_event");
    for skip in [true, false] {
        let what = if skip {
            "skip_managed_fields"
        } else {
            "keep_managed_fields"
        };
        group.bench_function(format!("json_line_{what}"), |b| {
            b.iter(|| json.event(line, skip).expect("decode"))
        });
        group.bench_function(format!("protobuf_frame_{what}"), |b| {
            b.iter(|| decode_watch_frame::<Pod>(frame.clone(), skip).expect("decode"))
        });
    }
    group.finish();
}

/// What a decode thread pays after the decode to hand the object to the
/// queue (`DeltaFifo::prepare`: its key, the digest of the builtin indexes'
/// inputs, its `Arc`), for the fixture's Pod without `managedFields`.
fn prepare(c: &mut Criterion) {
    let object = match decode_watch_frame::<Pod>(first_frame(), true).expect("decode") {
        WatchEvent::Added(o) | WatchEvent::Modified(o) => o,
        other => panic!("an object event, not {other:?}"),
    };
    let fifo = DeltaFifo::new(Indexer::new(builtin_indexers()), None);
    let mut group = per_object_group(c, "prepare");
    group.bench_function("partial_object_meta_builtin_indexes", |b| {
        b.iter_batched(
            || object.clone(),
            |o| fifo.prepare(o).expect("a key"),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// What the simulator pays per object to answer a protobuf watch or LIST
/// from its JSON.
fn sim_encode(c: &mut Criterion) {
    let line = JSON_LINE.trim_ascii_end();
    let mut group = per_object_group(c, "sim_protobuf");
    let value: serde_json::Value = serde_json::from_slice(line).expect("the fixture's line");
    let bytes = bytes::Bytes::from(serde_json::to_vec(&value["object"]).expect("its object"));
    let stored = |bytes: &bytes::Bytes| {
        StoredObject::located(
            bytes.clone(),
            ObjMeta::from_value(&value["object"]),
            metadata_range(bytes),
        )
    };
    // Through k8s-openapi's `ObjectMeta` (the fallback when the transcode fails).
    group.bench_function("frame_of_line", |b| {
        b.iter(|| kinformer_sim::protobuf::frame_of_line(line))
    });
    // The JSON `metadata` transcoded: an object's first frame.
    group.bench_function("frame_of_stored_first", |b| {
        b.iter_batched(
            || stored(&bytes),
            |o| kinformer_sim::protobuf::frame_of_stored(EventType::Added, &o),
            criterion::BatchSize::SmallInput,
        )
    });
    // Its later frames, from the message it keeps.
    let kept = stored(&bytes);
    kinformer_sim::protobuf::frame_of_stored(EventType::Added, &kept);
    group.bench_function("frame_of_stored_again", |b| {
        b.iter(|| kinformer_sim::protobuf::frame_of_stored(EventType::Added, &kept))
    });
    group.finish();
}

criterion_group!(benches, decode, prepare, sim_encode);
criterion_main!(benches);

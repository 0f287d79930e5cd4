//! What the compact store costs per object: packing the simulator's Pod
//! (as the load tests serve it), and each step of getting it back (the
//! zstd frame, the JSON decode, the metadata put back), with `serde_json`
//! and with the reflector's decoder (simd-json) on the same bytes.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_compact::{Compact, codec};
use kinformer_reflector::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn compact(c: &mut Criterion) {
    let wire = serde_json::to_vec(&kinformer_sim::template::pod(
        "ns-1",
        "web-7d4b9c8f6-00000001",
        7,
    ))
    .expect("encode the template Pod");
    let pod: Pod = serde_json::from_slice(&wire).expect("decode the template Pod");
    let packed = Compact::pack(pod.clone()).expect("pack");
    let body = packed.packed_bytes().expect("packed").to_vec();
    let mut encoded = Vec::new();
    codec::unpack(&body, &mut encoded).expect("unpack");
    eprintln!(
        "template Pod: {} bytes of JSON, {} encoded without its metadata, {} packed",
        wire.len(),
        encoded.len(),
        body.len()
    );
    let mut group = c.benchmark_group("compact_pod");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(1));
    group.bench_function("pack", |b| {
        b.iter(|| Compact::pack(pod.clone()).expect("pack"))
    });
    group.bench_function("decode", |b| b.iter(|| packed.decode().expect("decode")));
    let mut out = Vec::new();
    group.bench_function("unpack_frame", |b| {
        b.iter(|| codec::unpack(&body, &mut out).expect("unpack"))
    });
    group.bench_function("json_serde_json", |b| {
        b.iter(|| serde_json::from_slice::<Pod>(&encoded).expect("decode"))
    });
    group.bench_function("json_simd", |b| {
        b.iter(|| json::from_slice::<Pod>(&encoded, false).expect("decode"))
    });
    group.bench_function("metadata_clone", |b| b.iter(|| pod.metadata.clone()));
    group.finish();
}

criterion_group!(benches, compact);
criterion_main!(benches);

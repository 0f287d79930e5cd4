//! What decoding one object costs: the simulator's Pod (as the load tests
//! serve it) decoded into k8s-openapi's `Pod` whole, without
//! `metadata.managedFields` (skipped while parsing), and as metadata only;
//! with `serde_json` (what kube-rs does, and kinformer before simd-json) and
//! with the reflector's decoder (`kinformer_reflector::json`, simd-json),
//! in the same run. The informer decodes on its pool, so these costs bound
//! how many watch events per second a core can take.

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::json;
use kinformer_reflector::prune::from_slice_without_managed_fields;
use kube_core::PartialObjectMeta;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn decode(c: &mut Criterion) {
    let pod = kinformer_sim::template::pod("ns-1", "web-7d4b9c8f6-00000001", 7);
    let bytes = serde_json::to_vec(&pod).expect("encode the template Pod");
    let mut group = c.benchmark_group("decode_pod");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("serde_json_typed_whole", |b| {
        b.iter(|| serde_json::from_slice::<Pod>(&bytes).expect("decode"))
    });
    group.bench_function("serde_json_typed_whole_then_clone", |b| {
        b.iter(|| {
            serde_json::from_slice::<Pod>(&bytes)
                .expect("decode")
                .clone()
        })
    });
    group.bench_function("serde_json_typed_skip_managed_fields", |b| {
        b.iter(|| from_slice_without_managed_fields::<Pod>(&bytes).expect("decode"))
    });
    group.bench_function("serde_json_metadata_skip_managed_fields", |b| {
        b.iter(|| {
            from_slice_without_managed_fields::<PartialObjectMeta<Pod>>(&bytes).expect("decode")
        })
    });
    group.bench_function("kinformer_typed_whole", |b| {
        b.iter(|| json::from_slice::<Pod>(&bytes, false).expect("decode"))
    });
    group.bench_function("kinformer_typed_skip_managed_fields", |b| {
        b.iter(|| json::from_slice::<Pod>(&bytes, true).expect("decode"))
    });
    group.bench_function("kinformer_metadata_skip_managed_fields", |b| {
        b.iter(|| json::from_slice::<PartialObjectMeta<Pod>>(&bytes, true).expect("decode"))
    });
    // The metadata-only document a metadata watch carries
    // (`PartialObjectMetadata`, `managedFields` included), as a whole line.
    let meta_line = [
        br#"{"type":"MODIFIED","object":"#.as_slice(),
        &kinformer_sim::metadata::partial(&bytes),
        b"}",
    ]
    .concat();
    group.bench_function("serde_json_metadata_line_skip_managed_fields", |b| {
        b.iter(|| serde_metadata_line(&meta_line))
    });
    // The scan alone: finding `managedFields` in that line, which the
    // decoder cuts before simd-json parses the rest.
    group.bench_function("scan_metadata_line_managed_fields", |b| {
        b.iter(|| {
            kinformer_json_scan::member_span(
                &meta_line,
                &[b"object", b"metadata", b"managedFields"],
            )
            .expect("found")
        })
    });
    group.bench_function("kinformer_metadata_line_skip_managed_fields", |b| {
        b.iter(|| {
            kinformer_reflector::event::decode_event_with::<PartialObjectMeta<Pod>>(
                &meta_line, true,
            )
            .expect("decode")
        })
    });
    // The same line through the decoder metadata-only informers use
    // (`PartialObjectMeta` read member by member, not through kube's
    // derive and its `flatten` buffer).
    let partial = kinformer_reflector::Decoders::<PartialObjectMeta<Pod>>::partial_object_meta();
    group.bench_function(
        "kinformer_metadata_line_skip_managed_fields_own_decoder",
        |b| b.iter(|| partial.event(&meta_line, true).expect("decode")),
    );
    // A whole watch line, as the apiserver writes it (`type` first): parsed
    // once, the object decoded as its type says.
    let line = [br#"{"type":"MODIFIED","object":"#.as_slice(), &bytes, b"}"].concat();
    // The same line as a dynamic informer decodes it: kube's derived
    // `DynamicObject` (its `flatten` buffers the whole body first), and the
    // decoder dynamic informers use (each member once, into its place).
    let derived = kinformer_reflector::Decoders::<kube_core::DynamicObject>::serde();
    group.bench_function("kinformer_dynamic_line_skip_managed_fields_derive", |b| {
        b.iter(|| derived.event(&line, true).expect("decode"))
    });
    let own = kinformer_reflector::Decoders::<kube_core::DynamicObject>::dynamic_object();
    group.bench_function(
        "kinformer_dynamic_line_skip_managed_fields_own_decoder",
        |b| b.iter(|| own.event(&line, true).expect("decode")),
    );
    group.bench_function("kinformer_watch_line_typed_whole", |b| {
        b.iter(|| kinformer_reflector::event::decode_event::<Pod>(&line).expect("decode"))
    });
    // The check that the parsed line does not nest too deep: over 64-byte
    // blocks (what the decoder runs), and the earlier way, over the offsets
    // of simd-json's structural characters (known after the parse, so not
    // timed here).
    group.bench_function("nesting_check_typed_line_blocks", |b| {
        b.iter(|| {
            let mut check = kinformer_json_scan::NestingCheck::new(kinformer_json_scan::MAX_DEPTH);
            check.feed(&line);
            check.exceeded()
        })
    });
    let mut copy = line.clone();
    let mut buffers = simd_json::Buffers::new(line.len());
    simd_json::Deserializer::from_slice_with_buffers(&mut copy, &mut buffers).expect("parse");
    let structural = buffers.structural_indexes().to_vec();
    group.bench_function("nesting_check_typed_line_structural_indexes", |b| {
        b.iter(|| {
            depth_from_structural_indexes(&line, &structural) > kinformer_json_scan::MAX_DEPTH
        })
    });
    // The same line with `object` before `type`: the two-pass path (find
    // the object's bytes with `serde_json`, then decode them), which every
    // line took before 3b229b3.
    let object_first = [
        br#"{"object":"#.as_slice(),
        &bytes,
        br#","type":"MODIFIED"}"#,
    ]
    .concat();
    group.bench_function("kinformer_watch_line_typed_whole_two_passes", |b| {
        b.iter(|| kinformer_reflector::event::decode_event::<Pod>(&object_first).expect("decode"))
    });
    group.finish();
}

/// A metadata-only watch line decoded with `serde_json` the way kube-rs
/// reads one: the line's object found first, then decoded without
/// `managedFields`.
fn serde_metadata_line(line: &[u8]) -> PartialObjectMeta<Pod> {
    #[derive(serde::Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        object: &'a serde_json::value::RawValue,
    }
    let l: Line<'_> = serde_json::from_slice(line).expect("line");
    from_slice_without_managed_fields(l.object.get().as_bytes()).expect("decode")
}

/// The deepest nesting of `bytes` from the offsets of its structural
/// characters: the decoder's earlier check, kept as the baseline of the
/// block count.
fn depth_from_structural_indexes(bytes: &[u8], structural: &[u32]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for &at in structural {
        let b = bytes.get(at as usize).map_or(0, |b| b | 0x20);
        depth = (depth + usize::from(b == b'{')).saturating_sub(usize::from(b == b'}'));
        deepest = deepest.max(depth);
    }
    deepest
}

criterion_group!(benches, decode);
criterion_main!(benches);

//! What replacing a cold cached object costs a decode thread: decode the new
//! version and drop the one it replaces, in a cache of many objects, in
//! random order, as a burst of updates does. With the object arenas
//! (`kinformer_alloc::ObjectArenas` over mimalloc) and without them (mimalloc
//! alone), in one run; and with the arenas and the victim released whole
//! instead of dropped (`kinformer_alloc::release_whole`, as the
//! whole-releasing reclaimer does). The hot decode of `--bench decode` reuses
//! the blocks it just freed; here every freed object is cold, as in a large
//! cache.
//! Run: `cargo bench -p kinformer-benches --bench replace`.
#![allow(unsafe_code)] // releasing victims whole, as the reclaimer does

use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use k8s_openapi::api::core::v1::Pod;
use kinformer_alloc::ObjectArenas;
use kinformer_benches::filter::selected;
use kinformer_benches::fixtures::Rng;
use kinformer_reflector::decode::release_or_drop;
use kinformer_reflector::json;
use kube_core::{PartialObjectMeta, Resource};
use serde::de::DeserializeOwned;

#[global_allocator]
static GLOBAL: ObjectArenas<mimalloc::MiMalloc> = ObjectArenas::new(mimalloc::MiMalloc);

/// Typed Pods cached (~36 KB of heap each).
const TYPED: usize = 40_000;
/// Metadata-only Pods cached (~2 KB each).
const METADATA: usize = 400_000;

const GROUP: &str = "replace_cold_object";

/// The group every variant is measured in: one replacement per element.
fn group(c: &mut Criterion) -> BenchmarkGroup<'_, WallTime> {
    let mut group = c.benchmark_group(GROUP);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(1));
    group
}

/// Replaces random objects of a cache of `n`, each decoded from `bytes`.
fn replace<K: DeserializeOwned + Resource>(
    c: &mut Criterion,
    name: &str,
    n: usize,
    bytes: &[u8],
    skip_managed_fields: bool,
) {
    let decode = || json::from_slice::<K>(bytes, skip_managed_fields).expect("decode");
    let mut group = group(c);
    let variants = [
        ("mimalloc", false, Victim::Drop),
        ("object_arenas", true, Victim::Drop),
        ("object_arenas_whole", true, Victim::Release),
    ];
    for (allocator, arenas, victims) in variants {
        let function = format!("{name}/{allocator}");
        if !selected(&format!("{GROUP}/{function}/{n}")) {
            continue;
        }
        let id = BenchmarkId::new(function, n);
        kinformer_alloc::set_enabled(arenas);
        let mut cache: Vec<K> = (0..n).map(|_| decode()).collect();
        let mut rng = Rng(0x2545_f491);
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                let mut victim = rng.below(n);
                for _ in 0..iters {
                    let next = rng.below(n);
                    let old = std::mem::replace(&mut cache[victim], decode());
                    if let Victim::Release = victims {
                        // SAFETY: owned here, decoded in one scope and
                        // unchanged; `Pod` and `PartialObjectMeta` own their
                        // parts alone.
                        unsafe { release_or_drop(old) };
                    } else {
                        drop(old);
                    }
                    victim = next;
                }
                start.elapsed()
            })
        });
        drop(cache);
    }
    group.finish();
    kinformer_alloc::set_enabled(true);
}

/// What happens to a replaced object.
#[derive(Clone, Copy)]
enum Victim {
    /// Dropped.
    Drop,
    /// Released whole when it can be.
    Release,
}

fn benches(c: &mut Criterion) {
    let pod = kinformer_sim::template::pod("ns-1", "web-7d4b9c8f6-00000001", 7);
    let bytes = serde_json::to_vec(&pod).expect("encode the template Pod");
    replace::<Pod>(c, "typed_pod", TYPED, &bytes, false);
    let partial = kinformer_sim::metadata::partial(&bytes);
    replace::<PartialObjectMeta<Pod>>(c, "metadata_skip_managed_fields", METADATA, &partial, true);
}

criterion_group!(replace_benches, benches);
criterion_main!(replace_benches);

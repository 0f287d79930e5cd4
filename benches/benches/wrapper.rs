//! What `kinformer_alloc::ObjectArenas` adds to an allocation made outside
//! decode scopes (the pool's, the reader's): a batch of 256 blocks
//! allocated and freed through the wrapper, against the same through
//! mimalloc directly.
//! Run: `cargo bench -p kinformer-benches --bench wrapper`.
#![allow(unsafe_code)] // raw allocations, as a `Box` or `Vec` would make them

use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kinformer_alloc::ObjectArenas;

#[global_allocator]
static GLOBAL: ObjectArenas<mimalloc::MiMalloc> = ObjectArenas::new(mimalloc::MiMalloc);

/// Blocks allocated, then freed, per iteration.
const BATCH: usize = 256;

/// Allocates `BATCH` blocks of `layout` through `a`, then frees them.
fn round(a: &impl GlobalAlloc, layout: Layout, blocks: &mut Vec<*mut u8>) {
    for _ in 0..BATCH {
        // SAFETY: a non-zero size.
        blocks.push(black_box(unsafe { a.alloc(layout) }));
    }
    for b in blocks.drain(..) {
        // SAFETY: allocated just above by `a` with `layout`, freed once.
        unsafe { a.dealloc(b, layout) };
    }
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("outside_scopes");
    group.throughput(Throughput::Elements(BATCH as u64));
    let mut blocks = Vec::with_capacity(BATCH);
    for size in [64usize, 512] {
        let layout = Layout::from_size_align(size, 8).expect("a valid layout");
        group.bench_function(BenchmarkId::new("mimalloc", size), |b| {
            b.iter(|| round(&mimalloc::MiMalloc, layout, &mut blocks))
        });
        group.bench_function(BenchmarkId::new("object_arenas", size), |b| {
            b.iter(|| round(&GLOBAL, layout, &mut blocks))
        });
    }
    group.finish();
}

criterion_group!(wrapper_benches, benches);
criterion_main!(wrapper_benches);

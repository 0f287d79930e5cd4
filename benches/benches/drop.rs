//! What freeing a replaced object costs, by where it is freed: on the
//! thread that allocated it, or on another one (as when a pool or handler
//! thread drops an object a decode thread allocated). The objects are cold
//! and freed in random order, as replaced objects of a large cache are.
//! Run: `cargo bench -p kinformer-benches --bench drop`.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_benches::fixtures::{Rng, pod};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Objects freed per measured iteration.
const OBJECTS: usize = 200_000;

enum Request {
    /// Allocate this many objects and send them back, shuffled.
    Allocate(usize, mpsc::Sender<Vec<Arc<Pod>>>),
    /// Free these objects here and report how long it took.
    Free(Vec<Arc<Pod>>, mpsc::Sender<Duration>),
}

/// A long-lived thread that owns the allocations it makes (it stays alive,
/// so its allocator pages are never abandoned).
fn owner_thread() -> mpsc::Sender<Request> {
    let (tx, rx) = mpsc::channel::<Request>();
    std::thread::spawn(move || {
        let mut rng = Rng(7);
        for request in rx {
            match request {
                Request::Allocate(n, reply) => {
                    let mut objs: Vec<Arc<Pod>> =
                        (0..n).map(|i| Arc::new(pod(i, i as u64))).collect();
                    for i in (1..objs.len()).rev() {
                        objs.swap(i, rng.below(i + 1));
                    }
                    let _ = reply.send(objs);
                }
                Request::Free(objs, reply) => {
                    let start = Instant::now();
                    drop(objs);
                    let _ = reply.send(start.elapsed());
                }
            }
        }
    });
    tx
}

fn allocate(owner: &mpsc::Sender<Request>) -> Vec<Arc<Pod>> {
    let (tx, rx) = mpsc::channel();
    owner
        .send(Request::Allocate(OBJECTS, tx))
        .expect("owner thread alive");
    let objs = rx.recv().expect("owner thread alive");
    // Evict them from the caches: touch as many bytes elsewhere.
    let evict = vec![1u8; 256 << 20];
    std::hint::black_box(&evict);
    objs
}

fn frees(c: &mut Criterion) {
    let owner = owner_thread();
    let mut group = c.benchmark_group("free_replaced_objects");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(OBJECTS as u64));
    group.bench_function(BenchmarkId::new("on_the_allocating_thread", OBJECTS), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let objs = allocate(&owner);
                    let (tx, rx) = mpsc::channel();
                    owner
                        .send(Request::Free(objs, tx))
                        .expect("owner thread alive");
                    rx.recv().expect("owner thread alive")
                })
                .sum()
        })
    });
    group.bench_function(BenchmarkId::new("on_another_thread", OBJECTS), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let objs = allocate(&owner);
                    let start = Instant::now();
                    drop(objs);
                    start.elapsed()
                })
                .sum()
        })
    });
    group.finish();
}

criterion_group!(benches, frees);
criterion_main!(benches);

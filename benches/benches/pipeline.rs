//! The core pipeline (DeltaFIFO → pool → Indexer → handlers) with
//! pre-decoded objects: deltas per second at 100k and 1M cached objects,
//! with one no-op handler and with ten.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_benches::filter;
use kinformer_benches::fixtures::{pod, two_indexes};
use kinformer_core::{EventHandlerFns, Observed, SharedIndexInformer};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Updates pushed per measured iteration.
const ROUND: usize = 100_000;

/// Waits until every handler has seen `target` notifications. It sleeps
/// between checks instead of yielding: on 2 cores a waiter spinning through
/// `sched_yield` took ~15% of the CPU the measured threads need (perf), and a
/// 50 µs poll adds at most that to a round of 100k deltas.
fn wait(counters: &[Arc<AtomicU64>], target: u64) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while counters.iter().any(|c| c.load(Ordering::Relaxed) < target) {
        assert!(Instant::now() < deadline, "pipeline stalled");
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// How the bench thread feeds the queue.
#[derive(Clone, Copy)]
enum Producer {
    PerObject,
    Batched,
}

/// The criterion group of this bench.
const GROUP: &str = "core_pipeline";

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group(GROUP);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(ROUND as u64));
    // The processor's batch size: the old default (256) against the current
    // one (4096), compared in the same run.
    // The producer: one `update` call per object, or batches of 128
    // prepared objects through `push_observed`, as the reflector feeds the
    // queue (there `prepare` runs on the decode pool; here on the producer).
    let configs = [256usize, 4096]
        .into_iter()
        .flat_map(|batch| [100_000usize, 1_000_000].map(|n| (batch, n)))
        .flat_map(|(batch, n)| [1usize, 10].map(|h| (batch, n, h, Producer::PerObject)))
        .chain([(4096, 100_000, 1, Producer::Batched)]);
    for (batch, n, handlers, producer) in configs {
        let suffix = match producer {
            Producer::PerObject => "",
            Producer::Batched => "_push128",
        };
        let function = format!("{handlers}_handlers_batch{batch}{suffix}");
        // Filling an informer of up to 1M objects is most of a filtered
        // run's time: skip the configurations the filter leaves out.
        if !filter::selected(&format!("{GROUP}/{function}/{n}")) {
            continue;
        }
        let id = BenchmarkId::new(function, n);
        let informer = SharedIndexInformer::<Pod>::builder()
            .name("bench")
            .indexers(two_indexes())
            .batch_size(batch)
            .build();
        let counters: Vec<Arc<AtomicU64>> =
            (0..handlers).map(|_| Arc::new(AtomicU64::new(0))).collect();
        for c in &counters {
            let c = Arc::clone(c);
            let count = move || {
                c.fetch_add(1, Ordering::Relaxed);
            };
            let (a, u) = (count.clone(), count);
            informer
                .add_event_handler(
                    EventHandlerFns::new()
                        .on_add(move |_: &Arc<Pod>, _| a())
                        .on_update(move |_: &Arc<Pod>, _: &Arc<Pod>| u()),
                )
                .expect("register handler");
        }
        informer.start().expect("start");
        informer
            .queue()
            .replace((0..n).map(|i| pod(i, 1)), "1")
            .expect("replace");
        wait(&counters, n as u64);
        let mut delivered = n as u64;
        let mut rv = 1u64;
        let mut next = 0usize;
        group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    rv += 1;
                    let batch: Vec<Pod> = (0..ROUND).map(|j| pod((next + j) % n, rv)).collect();
                    next = (next + ROUND) % n;
                    let start = Instant::now();
                    let q = informer.queue();
                    match producer {
                        Producer::PerObject => {
                            for p in batch {
                                q.update(p).expect("update");
                            }
                        }
                        Producer::Batched => {
                            let mut objects = batch.into_iter();
                            loop {
                                let chunk: Vec<_> = objects
                                    .by_ref()
                                    .take(128)
                                    .map(|p| (Observed::Updated, q.prepare(p).expect("prepare")))
                                    .collect();
                                if chunk.is_empty() {
                                    break;
                                }
                                q.push_observed(chunk).expect("push");
                            }
                        }
                    }
                    delivered += ROUND as u64;
                    wait(&counters, delivered);
                    total += start.elapsed();
                }
                total
            })
        });
        informer.shutdown();
    }
    group.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);

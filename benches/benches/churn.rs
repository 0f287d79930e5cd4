//! Decode threads (two, and four) replacing the objects of their own keys, as the
//! decode pool does through a burst of updates over a large cache: each
//! replacement decodes a metadata-only Pod watch line into an object-arena
//! chunk and releases the version it replaces (decoded long ago, cold,
//! picked at random), the chunk given back whole as the reclaimer does.
//! Compared in one run: the chunks given back on each class's shared free
//! list, against kept on each thread's own list (`kinformer_alloc::own`,
//! what the decode pool's threads do). Run:
//! `cargo bench -p kinformer-benches --bench churn`.
#![allow(unsafe_code)] // release_or_drop, as the reclaimer calls it

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kinformer_alloc::ObjectArenas;
use kinformer_benches::filter;
use kinformer_benches::fixtures::Rng;
use kinformer_reflector::Decoders;
use kinformer_reflector::decode::{prefetch_object, release_or_drop};
use kinformer_reflector::event::WatchEvent;
use kube_core::PartialObjectMeta;

#[global_allocator]
static GLOBAL: ObjectArenas<mimalloc::MiMalloc> = ObjectArenas::new(mimalloc::MiMalloc);

/// The object type the burst decodes.
type Meta = PartialObjectMeta<Pod>;

/// Replacements per measured iteration, both threads together.
const ROUND: usize = 100_000;

/// The decode threads: as many as the load test's pool on this machine's
/// two cores, and twice that (threads descheduled while they hold a lock).
const THREADS: [usize; 2] = [2, 4];

/// The criterion group of this bench.
const GROUP: &str = "arena_churn";

/// Metadata-only watch lines of the simulator's Pod under 64 names of one
/// length, as the load test's objects are (all of one chunk class).
fn lines() -> Vec<Vec<u8>> {
    (0..64)
        .map(|i| {
            let name = format!("web-7d4b9c8f6-{i:08}");
            let pod = kinformer_sim::template::pod("ns-1", &name, 7);
            let bytes = serde_json::to_vec(&pod).expect("encode the template Pod");
            let object = kinformer_sim::metadata::partial(&bytes);
            [br#"{"type":"MODIFIED","object":"#.as_slice(), &object, b"}"].concat()
        })
        .collect()
}

/// Decodes one watch line into a chunk of its own.
fn decode(decoders: &Decoders<Meta>, line: &[u8]) -> Meta {
    match decoders.event(line, true).expect("decode") {
        WatchEvent::Modified(object) => object,
        _ => panic!("a MODIFIED line"),
    }
}

/// A decode thread holding its share of the objects: told how many to
/// replace, it answers with the time that took.
struct Worker {
    orders: Option<mpsc::Sender<usize>>,
    done: mpsc::Receiver<Duration>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Starts a thread that decodes `held` objects, keeping its own chunks
    /// when `own`, and then waits for orders.
    fn start(seed: u64, held: usize, own: bool) -> Self {
        let (orders, rx) = mpsc::channel::<usize>();
        let (tx, done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let _kept = kinformer_alloc::hot::keep_freed_blocks();
            let _own = own.then(kinformer_alloc::own::keep_own_chunks);
            let decoders = Decoders::<Meta>::partial_object_meta();
            let lines = lines();
            let mut objects: Vec<Meta> = (0..held)
                .map(|i| decode(&decoders, &lines[i % lines.len()]))
                .collect();
            let mut rng = Rng(seed);
            let mut next = rng.below(held);
            tx.send(Duration::ZERO).expect("the bench waits");
            while let Ok(n) = rx.recv() {
                let start = Instant::now();
                for _ in 0..n {
                    let i = next;
                    next = rng.below(held);
                    // As the reclaimer does, one object ahead.
                    prefetch_object(&objects[next]);
                    let line = &lines[i % lines.len()];
                    let old = std::mem::replace(&mut objects[i], decode(&decoders, line));
                    // SAFETY: a decoded object, owned here, nothing else
                    // refers to it (the reclaimer's contract).
                    unsafe { release_or_drop(old) };
                }
                if tx.send(start.elapsed()).is_err() {
                    break;
                }
            }
            for object in objects {
                // SAFETY: as above.
                unsafe { release_or_drop(object) };
            }
        });
        let worker = Self {
            orders: Some(orders),
            done,
            thread: Some(thread),
        };
        worker.done.recv().expect("the thread decoded its objects");
        worker
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.orders.take();
        if let Some(thread) = self.thread.take() {
            thread.join().expect("the worker ran");
        }
    }
}

fn churn(c: &mut Criterion) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test --benches` runs this binary without `--bench`: few
    // objects then.
    let objects = if args.iter().any(|a| a == "--bench") {
        1_000_000
    } else {
        10_000
    };
    let mut group = c.benchmark_group(GROUP);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(ROUND as u64));
    let configs = THREADS
        .into_iter()
        .flat_map(|t| [("shared_lists", false, t), ("own_lists", true, t)]);
    for (name, own, threads) in configs {
        let param = format!("{threads}_threads");
        if !filter::selected_by(&args, &format!("{GROUP}/{name}/{param}")) {
            continue;
        }
        let workers: Vec<Worker> = (0..threads)
            .map(|t| Worker::start(0x9e37_79b9 + t as u64, objects / threads, own))
            .collect();
        group.bench_function(BenchmarkId::new(name, &param), |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    for w in &workers {
                        if let Some(orders) = &w.orders {
                            orders.send(ROUND / threads).expect("the worker waits");
                        }
                    }
                    for w in &workers {
                        w.done.recv().expect("the worker answers");
                    }
                }
                start.elapsed()
            });
        });
        let cut = kinformer_alloc::region::REGION.stats().cut_bytes;
        eprintln!("{GROUP}/{name}/{param}: {} MiB of chunks cut", cut >> 20);
        drop(workers);
    }
    group.finish();
}

criterion_group!(benches, churn);
criterion_main!(benches);

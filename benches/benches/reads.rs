//! Read latency at 1M objects: `get` hot and cold, `by_index`, idle and with
//! a writer running flat out, against kube-rs's RwLock store.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kinformer_benches::baseline::{ImblStore, RwLockStore};
use kinformer_benches::fixtures::{Rng, objects, two_indexes};
use kinformer_core::{Indexer, LABEL_INDEX};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const N: usize = 1_000_000;
const HOT: usize = 64;

struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Writer {
    fn start(mut step: impl FnMut() + Send + 'static) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                step();
            }
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn reads(c: &mut Criterion) {
    let objs = Arc::new(objects(N));
    let keys: Vec<String> = objs.iter().map(|(k, _)| k.to_string()).collect();
    let indexer = Indexer::new(two_indexes());
    indexer.write(|w| {
        objs.iter()
            .for_each(|(k, o)| drop(w.upsert(k.clone(), Arc::clone(o))))
    });
    let rwlock = Arc::new(RwLockStore::default());
    objs.iter()
        .for_each(|(k, o)| rwlock.upsert(k.clone(), Arc::clone(o)));

    let mut group = c.benchmark_group("reads_1m");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for writer in ["idle", "writer_flat_out"] {
        let _w = (writer != "idle").then(|| {
            let (indexer, objs) = (indexer.clone(), Arc::clone(&objs));
            let mut rng = Rng(99);
            Writer::start(move || {
                indexer.write(|w| {
                    for _ in 0..64 {
                        let (k, o) = &objs[rng.below(N)];
                        w.upsert(k.clone(), Arc::clone(o));
                    }
                });
            })
        });
        let mut rng = Rng(1);
        let mut i = 0usize;
        group.bench_function(BenchmarkId::new("kinformer_get_hot", writer), |b| {
            b.iter(|| {
                i = (i + 1) % HOT;
                indexer.get(&keys[i])
            })
        });
        group.bench_function(BenchmarkId::new("kinformer_get_cold", writer), |b| {
            b.iter(|| indexer.get(&keys[rng.below(N)]))
        });
        if writer == "idle" {
            // Where a cold `get` spends its time: the same lookups in one
            // snapshot held across them (no pinning per call), borrowed and
            // then cloned. Idle only: a snapshot held under a writer keeps
            // every later batch's garbage alive.
            let snapshot = indexer.snapshot();
            let mut rng = Rng(1);
            group.bench_function(
                BenchmarkId::new("kinformer_snapshot_get_cold", writer),
                |b| b.iter(|| snapshot.get(&keys[rng.below(N)]).is_some()),
            );
            let mut rng = Rng(1);
            group.bench_function(
                BenchmarkId::new("kinformer_snapshot_get_clone_cold", writer),
                |b| b.iter(|| snapshot.get(&keys[rng.below(N)]).cloned()),
            );
            // The bench's own share: fetching and hashing a random key.
            let mut rng = Rng(1);
            let state = foldhash::fast::RandomState::default();
            group.bench_function(BenchmarkId::new("bench_key_only_cold", writer), |b| {
                b.iter(|| state.hash_one(keys[rng.below(N)].as_str()))
            });
        }
        group.bench_function(BenchmarkId::new("kinformer_by_index_2k", writer), |b| {
            b.iter(|| {
                indexer
                    .index_keys(LABEL_INDEX, "app=app-7")
                    .map(|v| v.len())
            })
        });
    }
    for writer in ["idle", "writer_flat_out"] {
        let _w = (writer != "idle").then(|| {
            let (store, objs) = (Arc::clone(&rwlock), Arc::clone(&objs));
            let mut rng = Rng(99);
            Writer::start(move || {
                for _ in 0..64 {
                    let (k, o) = &objs[rng.below(N)];
                    store.upsert(k.clone(), Arc::clone(o));
                }
            })
        });
        let mut rng = Rng(1);
        let mut i = 0usize;
        group.bench_function(BenchmarkId::new("baseline_rwlock_get_hot", writer), |b| {
            b.iter(|| {
                i = (i + 1) % HOT;
                rwlock.get(&keys[i])
            })
        });
        group.bench_function(BenchmarkId::new("baseline_rwlock_get_cold", writer), |b| {
            b.iter(|| rwlock.get(&keys[rng.below(N)]))
        });
    }
    // The previous design (imbl's reference-counted trie), idle only.
    let imbl = ImblStore::default();
    imbl.write_batch(objs.iter().map(|(k, o)| (k.clone(), Arc::clone(o))));
    let mut rng = Rng(1);
    let mut i = 0usize;
    group.bench_function(BenchmarkId::new("candidate_imbl_get_hot", "idle"), |b| {
        b.iter(|| {
            i = (i + 1) % HOT;
            imbl.get(&keys[i])
        })
    });
    group.bench_function(BenchmarkId::new("candidate_imbl_get_cold", "idle"), |b| {
        b.iter(|| imbl.get(&keys[rng.below(N)]))
    });
    group.finish();
}

criterion_group!(benches, reads);
criterion_main!(benches);

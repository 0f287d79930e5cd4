//! Indexer write throughput at 10k, 100k and 1M objects with two secondary
//! indexes, against the candidate designs and kube-rs's RwLock store.

use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kinformer_benches::baseline::{FullCloneStore, ImblStore, RwLockStore, ShardedStore};
use kinformer_benches::fixtures::{Rng, objects, pod, two_indexes};
use kinformer_core::{Indexer, ObjectKey};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BATCH: usize = 256;

fn updates(c: &mut Criterion) {
    let mut group = c.benchmark_group("indexer_updates");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for n in [10_000usize, 100_000, 1_000_000] {
        let objs = objects(n);
        // Relabelled variants: every update moves the object to another label value.
        let relabelled: Vec<Arc<_>> = (0..4096)
            .map(|i| {
                let mut p = pod(i, 2);
                p.metadata
                    .labels
                    .get_or_insert_default()
                    .insert("app".into(), format!("moved-{}", i % 7));
                Arc::new(p)
            })
            .collect();
        group.throughput(Throughput::Elements(BATCH as u64));

        // Distinct objects for updates (a new resourceVersion), as a watch delivers.
        let next: Vec<Arc<_>> = (0..n).map(|i| Arc::new(pod(i, 2))).collect();
        let plain = Indexer::new(Vec::new());
        plain.write(|w| {
            objs.iter()
                .for_each(|(k, o)| drop(w.upsert(k.clone(), Arc::clone(o))))
        });
        let mut rng = Rng(7);
        group.bench_function(BenchmarkId::new("kinformer_batch256_no_index", n), |b| {
            b.iter(|| {
                plain.write(|w| {
                    for _ in 0..BATCH {
                        let i = rng.below(n);
                        w.upsert(objs[i].0.clone(), Arc::clone(&next[i]));
                    }
                })
            })
        });
        drop(plain);
        let indexer = Indexer::new(two_indexes());
        indexer.write(|w| {
            objs.iter()
                .for_each(|(k, o)| drop(w.upsert(k.clone(), Arc::clone(o))))
        });
        group.bench_function(BenchmarkId::new("kinformer_batch256", n), |b| {
            b.iter(|| {
                indexer.write(|w| {
                    for _ in 0..BATCH {
                        let i = rng.below(n);
                        w.upsert(objs[i].0.clone(), Arc::clone(&next[i]));
                    }
                })
            })
        });
        // Each update replaces the other version of its object (the same
        // labels, another resource version): the replaced object is not the
        // new one, and at 1M it is cold, as in a watch's updates.
        let mut current = vec![false; n];
        group.bench_function(BenchmarkId::new("kinformer_batch256_alternate", n), |b| {
            b.iter(|| {
                indexer.write(|w| {
                    for _ in 0..BATCH {
                        let i = rng.below(n);
                        current[i] = !current[i];
                        let obj = if current[i] { &next[i] } else { &objs[i].1 };
                        w.upsert(objs[i].0.clone(), Arc::clone(obj));
                    }
                })
            })
        });
        // The pool's batch, and four times it as a pool thread takes while
        // a list streams in: the nodes a batch copies are shared by more
        // updates.
        for size in [4096usize, 16_384] {
            group.throughput(Throughput::Elements(size as u64));
            let id = BenchmarkId::new(format!("kinformer_batch{size}"), n);
            group.bench_function(id, |b| {
                b.iter(|| {
                    indexer.write(|w| {
                        for _ in 0..size {
                            let i = rng.below(n);
                            w.upsert(objs[i].0.clone(), Arc::clone(&next[i]));
                        }
                    })
                })
            });
        }
        group.throughput(Throughput::Elements(BATCH as u64));
        group.bench_function(BenchmarkId::new("kinformer_batch256_relabel", n), |b| {
            b.iter(|| {
                indexer.write(|w| {
                    for _ in 0..BATCH {
                        let i = rng.below(n);
                        let (k, o) = &objs[i];
                        let obj = if i.is_multiple_of(2) {
                            Arc::clone(&relabelled[i % 4096])
                        } else {
                            Arc::clone(o)
                        };
                        w.upsert(k.clone(), obj);
                    }
                })
            })
        });
        group.bench_function(BenchmarkId::new("kinformer_publish_each", n), |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    let i = rng.below(n);
                    indexer.write(|w| w.upsert(objs[i].0.clone(), Arc::clone(&next[i])));
                }
            })
        });
        drop(indexer);

        let rwlock = RwLockStore::default();
        objs.iter()
            .for_each(|(k, o)| rwlock.upsert(k.clone(), Arc::clone(o)));
        group.bench_function(
            BenchmarkId::new("baseline_rwlock_hashmap_no_index", n),
            |b| {
                b.iter(|| {
                    for _ in 0..BATCH {
                        let (k, o) = &objs[rng.below(n)];
                        rwlock.upsert(k.clone(), Arc::clone(o));
                    }
                })
            },
        );
        drop(rwlock);

        let sharded = ShardedStore::new(65_536);
        objs.iter()
            .for_each(|(k, o)| sharded.upsert(k.clone(), Arc::clone(o)));
        group.bench_function(BenchmarkId::new("candidate_sharded_65k_no_index", n), |b| {
            b.iter(|| {
                for _ in 0..BATCH {
                    let (k, o) = &objs[rng.below(n)];
                    sharded.upsert(k.clone(), Arc::clone(o));
                }
            })
        });
        drop(sharded);

        let imbl = ImblStore::default();
        imbl.write_batch(objs.iter().map(|(k, o)| (k.clone(), Arc::clone(o))));
        group.bench_function(
            BenchmarkId::new("candidate_imbl_trie_batch256_no_index", n),
            |b| {
                b.iter(|| {
                    imbl.write_batch((0..BATCH).map(|_| {
                        let i = rng.below(n);
                        (objs[i].0.clone(), Arc::clone(&next[i]))
                    }))
                })
            },
        );
        drop(imbl);

        let full = FullCloneStore::default();
        full.write_batch(objs.iter().map(|(k, o)| (k.clone(), Arc::clone(o))));
        group.bench_function(
            BenchmarkId::new("candidate_full_clone_batch256_no_index", n),
            |b| {
                b.iter(|| {
                    full.write_batch((0..BATCH).map(|_| {
                        let (k, o): &(ObjectKey, _) = &objs[rng.below(n)];
                        (k.clone(), Arc::clone(o))
                    }))
                })
            },
        );
    }
    group.finish();
}

fn snapshot(c: &mut Criterion) {
    let mut group = c.benchmark_group("indexer_snapshot");
    for n in [10_000usize, 1_000_000] {
        let objs = objects(n);
        let indexer = Indexer::new(two_indexes());
        indexer.write(|w| {
            objs.iter()
                .for_each(|(k, o)| drop(w.upsert(k.clone(), Arc::clone(o))))
        });
        group.bench_function(BenchmarkId::new("snapshot", n), |b| {
            b.iter(|| indexer.snapshot())
        });
    }
    group.finish();
}

criterion_group!(benches, updates, snapshot);
criterion_main!(benches);

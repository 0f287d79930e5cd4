//! Memory per cached object, by a counting allocator: the Indexer's overhead
//! per object (key, trie nodes) and per index entry, against kube-rs's
//! RwLock<HashMap> store. Run: `cargo bench -p kinformer-benches --bench memory`.

use std::sync::Arc;

use kinformer_benches::alloc::Counting;
use kinformer_benches::baseline::RwLockStore;
use kinformer_benches::fixtures::{pod, two_indexes};
use kinformer_core::{Indexer, ObjectKey};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn measure<S>(
    objs: &[Arc<k8s_openapi::api::core::v1::Pod>],
    build: impl FnOnce() -> S,
    fill: impl FnOnce(&S),
) -> (f64, S) {
    let before = Counting::live_bytes();
    let store = build();
    fill(&store);
    let after = Counting::live_bytes();
    ((after - before) as f64 / objs.len() as f64, store)
}

fn main() {
    // `cargo test --benches` runs this binary with `--bench`-less args; keep it quick then.
    let quick = !std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if quick {
        &[10_000]
    } else {
        &[100_000, 1_000_000]
    };
    println!("| objects | store | bytes/object | bytes/index entry |");
    println!("| --- | --- | --- | --- |");
    for &n in sizes {
        let objs: Vec<Arc<_>> = (0..n).map(|i| Arc::new(pod(i, 1))).collect();
        let key = |o: &Arc<_>| ObjectKey::of(&**o).expect("fixture has a name");
        let (plain, s0) = measure(
            &objs,
            || Indexer::new(Vec::new()),
            |ix| {
                ix.write(|w| {
                    objs.iter()
                        .for_each(|o| drop(w.upsert(key(o), Arc::clone(o))))
                });
            },
        );
        let (indexed, s1) = measure(
            &objs,
            || Indexer::new(two_indexes()),
            |ix| {
                ix.write(|w| {
                    objs.iter()
                        .for_each(|o| drop(w.upsert(key(o), Arc::clone(o))))
                });
            },
        );
        // Namespace (1) + labels (3) = 4 index entries per object.
        let per_entry = (indexed - plain) / 4.0;
        let (rw, s2) = measure(&objs, RwLockStore::default, |st| {
            objs.iter().for_each(|o| st.upsert(key(o), Arc::clone(o)));
        });
        println!("| {n} | kinformer Indexer, no index | {plain:.0} | |");
        println!("| {n} | kinformer Indexer, namespace + labels | {indexed:.0} | {per_entry:.0} |");
        println!("| {n} | baseline RwLock<HashMap> | {rw:.0} | |");
        drop((s0, s1, s2));
    }
}

//! The decode pool's whole-releasing reclaimer gives an object's chunk back
//! in one step and forgets the object, when it holds the object's last
//! reference and the object sits whole in one chunk; anything else is
//! dropped as usual. Its own binary: the object arenas are this process's
//! global allocator.
#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // release_whole and its contract are what is tested

use std::alloc::System;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kinformer_alloc::region::REGION;
use kinformer_alloc::{ObjectArenas, with_object_arena};
use kinformer_core::{ObjectKey, Observed, Prepared, SharedIndexInformer};
use kinformer_reflector::{DecodePool, OwnsPartsAlone};
use kube_core::{ObjectMeta, Resource};

#[global_allocator]
static GLOBAL: ObjectArenas<System> = ObjectArenas::new(System);

/// Drops of [`Counted`] objects so far: what tells a drop from a release
/// (a release forgets the object). Its only effect beyond freeing memory,
/// which the test relies on, not the program.
static DROPS: AtomicUsize = AtomicUsize::new(0);

/// An object with a few parts whose drops are counted.
struct Counted {
    meta: ObjectMeta,
    data: Vec<String>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        DROPS.fetch_add(1, Ordering::SeqCst);
    }
}

// SAFETY: `Counted` owns its parts alone; its `Drop` only counts (the count
// is what these tests read, and a release skips it on purpose).
unsafe impl OwnsPartsAlone for Counted {}

impl Resource for Counted {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "Counted".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "counted".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.meta
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.meta
    }
}

/// "Decodes" object `i` in an arena scope: about 2 KB in a few parts.
fn decode(i: usize) -> (ObjectKey, Arc<Counted>) {
    let object = with_object_arena::<Counted>(1000, || Counted {
        meta: ObjectMeta {
            name: Some(format!("object-{i}")),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        data: (0..4).map(|n| format!("{n}-{}", "x".repeat(500))).collect(),
    });
    (
        ObjectKey::parse(&format!("default/object-{i}")),
        Arc::new(object),
    )
}

/// The tests of this binary read the process-wide drop count and the
/// arenas' free bytes: one at a time.
static SERIAL: parking_lot::Mutex<()> = parking_lot::Mutex::new(());

/// Runs a job on every thread of `pool` after what is queued there.
fn settle(pool: &DecodePool) {
    for shard in 0..pool.size() {
        pool.submit_to(shard, || ()).blocking_recv().unwrap();
    }
}

#[test]
fn objects_held_whole_give_their_chunks_back_and_others_are_dropped() {
    let _serial = SERIAL.lock();
    let pool = DecodePool::new(2, "whole-test").unwrap();
    // Learn the kind's size: from here on each object takes one chunk.
    drop((0..50).map(decode).collect::<Vec<_>>());
    let objects: Vec<_> = (0..400).map(decode).collect();
    let chunk = {
        let (_, o) = &objects[0];
        REGION.chunk_span(o.meta.name.as_ref().unwrap().as_ptr() as usize)
    };
    let (_, chunk_size) = chunk.expect("decoded in the arenas");

    // Released whole: none dropped, and their chunks are free.
    let drops = DROPS.load(Ordering::SeqCst);
    let free = REGION.stats().free_bytes;
    // SAFETY: `Counted` owns its parts alone; its `Drop` only counts (the
    // count is what this test reads, and a release skips it on purpose).
    let whole = unsafe { pool.whole_releasing_reclaimer::<Counted>() };
    whole.reclaim(objects);
    settle(&pool);
    assert_eq!(DROPS.load(Ordering::SeqCst), drops, "released, not dropped");
    let freed = REGION.stats().free_bytes - free;
    assert!(freed >= 400 * chunk_size, "{freed} bytes freed");

    // Still referenced elsewhere: left to the last holder, who drops it.
    let (key, shared) = decode(1000);
    let held = Arc::clone(&shared);
    whole.reclaim(vec![(key, shared)]);
    settle(&pool);
    assert_eq!(DROPS.load(Ordering::SeqCst), drops);
    drop(held);
    assert_eq!(DROPS.load(Ordering::SeqCst), drops + 1);

    // Lost a part since its decode: dropped, part by part.
    let (key, object) = decode(1001);
    let mut object = Arc::into_inner(object).unwrap();
    object.data.pop();
    whole.reclaim(vec![(key, Arc::new(object))]);
    settle(&pool);
    assert_eq!(DROPS.load(Ordering::SeqCst), drops + 2);

    // The plain reclaimer drops every object.
    pool.reclaimer::<Counted>()
        .reclaim((2000..2010).map(decode).collect());
    settle(&pool);
    assert_eq!(DROPS.load(Ordering::SeqCst), drops + 12);
}

/// "Decodes" version `v` of object `i`, as [`decode`] does.
fn decode_version(i: usize, v: usize) -> Counted {
    with_object_arena::<Counted>(1000, || Counted {
        meta: ObjectMeta {
            name: Some(format!("object-{i}")),
            namespace: Some("default".into()),
            resource_version: Some(v.to_string()),
            ..ObjectMeta::default()
        },
        data: (0..4).map(|n| format!("{n}-{}", "x".repeat(500))).collect(),
    })
}

/// Decodes version `v` of objects `0..n` and keys them for `informer`'s
/// queue as a reflector does, through `prepare_decoded`.
fn decoded(
    informer: &SharedIndexInformer<Counted>,
    n: usize,
    v: usize,
) -> Vec<(Observed, Prepared<Counted>)> {
    let fifo = informer.queue();
    (0..n)
        .map(|i| {
            // SAFETY: the object is as its "decode" built it.
            let p = unsafe { fifo.prepare_decoded(decode_version(i, v)) }.unwrap();
            (Observed::Updated, p)
        })
        .collect()
}

/// Waits (up to 10 s) for `cond`.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn an_informer_releases_whole_until_an_object_comes_from_elsewhere() {
    let _serial = SERIAL.lock();
    let pool = DecodePool::new(2, "whole-informer").unwrap();
    let informer: SharedIndexInformer<Counted> =
        SharedIndexInformer::builder().name("whole").build();
    informer.start().unwrap();
    assert!(pool.release_whole_into(&informer));
    // A handler: its thread hands the replaced objects it was shown to the
    // reclaimer once delivered (as a factory's informers with handlers do).
    informer
        .add_event_handler(kinformer_core::EventHandlerFns::new())
        .unwrap();
    // Learn the kind's size: from here on each object takes one chunk.
    drop((0..50).map(|i| decode_version(i, 0)).collect::<Vec<_>>());
    let probe = decode_version(0, 0);
    let span = REGION.chunk_span(probe.meta.name.as_ref().unwrap().as_ptr() as usize);
    let (_, chunk_size) = span.expect("decoded in the arenas");
    drop(probe);
    let n = 200;
    let current = |v: &str| {
        (0..n).all(|i| {
            informer
                .indexer()
                .get(&format!("default/object-{i}"))
                .and_then(|o| o.meta.resource_version.clone())
                .as_deref()
                == Some(v)
        })
    };
    informer
        .queue()
        .push_observed(decoded(&informer, n, 1))
        .unwrap();
    until("version 1 cached", || current("1"));

    // Replaced objects of a decoded-only cache: released, not dropped.
    let next = decoded(&informer, n, 2);
    let drops = DROPS.load(Ordering::SeqCst);
    let free = REGION.stats().free_bytes;
    informer.queue().push_observed(next).unwrap();
    until("version 2 cached", || current("2"));
    until("the replaced objects' chunks given back", || {
        settle(&pool);
        REGION.stats().free_bytes.saturating_sub(free) >= n * chunk_size
    });
    assert_eq!(DROPS.load(Ordering::SeqCst), drops, "released, not dropped");

    // An object from elsewhere: from now on every replaced object is dropped.
    let foreign = Counted {
        meta: ObjectMeta {
            name: Some("foreign".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        data: Vec::new(),
    };
    informer.queue().add(foreign).unwrap();
    assert!(!informer.indexer().provenance().decoded_only());
    let next = decoded(&informer, n, 3);
    informer.queue().push_observed(next).unwrap();
    until("version 3 cached", || current("3"));
    until("the replaced objects dropped", || {
        settle(&pool);
        DROPS.load(Ordering::SeqCst) - drops >= n
    });
}

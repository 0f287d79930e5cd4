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
use kinformer_core::ObjectKey;
use kinformer_reflector::DecodePool;
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

/// Runs a job on every thread of `pool` after what is queued there.
fn settle(pool: &DecodePool) {
    for shard in 0..pool.size() {
        pool.submit_to(shard, || ()).blocking_recv().unwrap();
    }
}

#[test]
fn objects_held_whole_give_their_chunks_back_and_others_are_dropped() {
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

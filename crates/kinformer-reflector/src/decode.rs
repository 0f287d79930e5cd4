//! The decode stage: a pool of OS threads that turn raw JSON into objects
//! ready for the queue, so that decoding (the dominant per-object cost, far
//! above the queue and the cache) uses every core instead of the one tokio
//! thread that reads the response.
//!
//! The reflector keeps the order: it submits batches in arrival order and
//! takes their results back in the same order (see [`crate::events`]), so the
//! queue sees the events of a key in the order the server sent them.
//!
//! Each thread has a queue of its own: a key's objects are decoded on the
//! thread of its [shard](crate::decode_thread), and the informer hands the objects
//! it lets go of back to that thread through [`DecodePool::reclaimer`], so
//! they are freed where they were allocated (cheaper for the allocator, and
//! the freed memory is reused by the next objects decoded there). With the
//! object arenas, a [`SpareKeeper`] thread beside them keeps new chunks
//! ready, so that a decode thread seldom waits for the kernel's pages.
#![allow(unsafe_code)] // the whole-releasing reclaimer: an opt-in with a contract

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use kinformer_alloc::spare::SpareKeeper;
use kinformer_core::panic::caught_panic_message;
use kinformer_core::{ObjectKey, Provenance, Reclaimer};
use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::decode_thread::thread_of_key;

type Job = Box<dyn FnOnce() + Send>;

/// A pool of decode threads, shared by the reflectors of a factory.
///
/// Dropping the last handle closes the pool and joins its threads.
///
/// ```
/// use kinformer_reflector::DecodePool;
/// let pool = DecodePool::new(2, "decode").unwrap();
/// let answer = pool.submit(|| 6 * 7);
/// assert_eq!(answer.blocking_recv().unwrap(), 42);
/// ```
pub struct DecodePool {
    /// One queue per thread (none once the pool is closing). Reclaimers
    /// hold them weakly: a reclaimer never keeps the pool's threads alive,
    /// nor ends up running its `Drop`.
    jobs: Option<Arc<[Sender<Job>]>>,
    /// Where the next job without a shard goes.
    next: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
    size: usize,
    /// Keeps spare object-arena chunks ready (joined on drop).
    spares: SpareKeeper,
}

impl DecodePool {
    /// Starts `threads` decode threads (at least one) named `name-N`, and
    /// the spare-chunk keeper, `name-spares`.
    pub fn new(threads: usize, name: &str) -> std::io::Result<Arc<Self>> {
        let size = threads.max(1);
        let mut jobs = Vec::with_capacity(size);
        let mut handles = Vec::with_capacity(size);
        for i in 0..size {
            let (tx, rx) = crossbeam_channel::unbounded::<Job>();
            jobs.push(tx);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || work(&rx))?,
            );
        }
        Ok(Arc::new(Self {
            jobs: Some(jobs.into()),
            next: AtomicUsize::new(0),
            threads: Mutex::new(handles),
            size,
            spares: SpareKeeper::start(&format!("{name}-spares"))?,
        }))
    }

    /// A pool with one thread per available core.
    pub fn per_core(name: &str) -> std::io::Result<Arc<Self>> {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::new(n, name)
    }

    /// Number of threads.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Runs `f` on a pool thread (taking turns); its result arrives on the
    /// returned receiver. A panic in `f` is caught and logged, and the
    /// receiver then reports a closed channel.
    pub fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let shard = self.next.fetch_add(1, Ordering::Relaxed);
        self.submit_to(shard, f)
    }

    /// Runs `f` on thread `shard % size` (see [`crate::decode_thread`]), after the
    /// jobs already queued there; otherwise as [`DecodePool::submit`].
    pub fn submit_to<T: Send + 'static>(
        &self,
        shard: usize,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        self.run_on(
            shard,
            Box::new(move || {
                // A dropped receiver (the reflector stopped) is not an error.
                let _ = tx.send(f());
            }),
        );
        rx
    }

    fn run_on(&self, shard: usize, job: Job) {
        if let Some(jobs) = &self.jobs {
            send(jobs, shard, job);
        }
    }

    /// Has the pool's [`SpareKeeper`] top the spare object-arena chunks up
    /// now rather than at its next look (see [`kinformer_alloc::spare`]),
    /// so that the updates after a sync find chunks whose pages the kernel
    /// has already supplied. Does nothing unless the process uses
    /// [`kinformer_alloc::ObjectArenas`].
    pub fn top_up_spare_chunks(&self) {
        self.spares.wake();
    }

    /// A [`Reclaimer`] for informers fed by this pool: objects are dropped
    /// on the thread of their key's shard, the one that decoded them.
    /// Once the pool is gone, objects are dropped where they are handed in.
    pub fn reclaimer<K: Resource + Send + Sync + 'static>(&self) -> Arc<dyn Reclaimer<K>> {
        Arc::new(ShardReclaimer::new(self, None))
    }

    /// A [`DecodePool::reclaimer`] that, for an object whose last
    /// reference it holds and whose parts all sit in one object-arena chunk,
    /// gives the chunk back at once and forgets the object instead of
    /// walking its tree to free each part ([`kinformer_alloc::whole`]).
    /// Other objects are dropped as usual.
    ///
    /// The safe way to install it in an informer is
    /// [`DecodePool::release_whole_into`].
    ///
    /// # Safety
    /// Every object handed to it was decoded by this crate and not changed
    /// since (no transform ran on it) other than by dropping parts (never by
    /// moving one out), and `K` owns every heap part it points to alone (no
    /// `Arc`, `Rc` or other buffer shared with owners that could outlive it)
    /// and has no `Drop` with effects beyond freeing memory
    /// ([`OwnsPartsAlone`](crate::whole::OwnsPartsAlone)).
    pub unsafe fn whole_releasing_reclaimer<K: Resource + Send + Sync + 'static>(
        &self,
    ) -> Arc<dyn Reclaimer<K>> {
        Arc::new(ShardReclaimer::new(self, Some(Provenance::default())))
    }
}

/// Sends `job` to thread `shard % jobs.len()`.
fn send(jobs: &[Sender<Job>], shard: usize, job: Job) {
    if let Some(tx) = jobs.get(shard % jobs.len().max(1)) {
        // Each thread holds its receiver until every sender is dropped, so
        // a send through a live sender cannot fail.
        let _ = tx.send(job);
    }
}

/// Hands objects back to the decode thread of their key's shard.
pub(crate) struct ShardReclaimer {
    jobs: Option<Weak<[Sender<Job>]>>,
    /// Objects may be released whole while this says their cache's objects
    /// all came from a decoder (see [`DecodePool::whole_releasing_reclaimer`]).
    whole: Option<Provenance>,
}

impl ShardReclaimer {
    pub(crate) fn new(pool: &DecodePool, whole: Option<Provenance>) -> Self {
        Self {
            jobs: pool.jobs.as_ref().map(Arc::downgrade),
            whole,
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Reclaimer<K> for ShardReclaimer {
    fn reclaim(&self, objects: Vec<(ObjectKey, Arc<K>)>) {
        // Once the pool is closing, objects are dropped here.
        let Some(jobs) = self.jobs.as_ref().and_then(Weak::upgrade) else {
            return;
        };
        let mut shards: Vec<Vec<(ObjectKey, Arc<K>)>> =
            (0..jobs.len()).map(|_| Vec::new()).collect();
        for (key, obj) in objects {
            shards[thread_of_key(key.as_str(), jobs.len())].push((key, obj));
        }
        // Read after the objects left the cache: an object that made the
        // provenance mixed entered it before, so this sees the mark.
        let whole = self.whole.as_ref().is_some_and(Provenance::decoded_only);
        for (shard, objects) in shards.into_iter().enumerate() {
            if !objects.is_empty() {
                send(&jobs, shard, Box::new(move || drop_all(objects, whole)));
            }
        }
    }
}

/// Drops `objects`; with `whole`, releases those it can whole instead (the
/// contract of [`DecodePool::whole_releasing_reclaimer`]).
fn drop_all<K: Resource>(objects: Vec<(ObjectKey, Arc<K>)>, whole: bool) {
    for (_, object) in objects {
        if !whole {
            drop(object);
        } else if let Some(last) = Arc::into_inner(object) {
            // SAFETY: the reclaimer's contract (`whole_releasing_reclaimer`).
            unsafe { release_or_drop(last) };
        }
    }
}

/// Gives `object`'s chunk back and forgets the object when it sits whole in
/// one chunk ([`kinformer_alloc::release_whole`]); otherwise drops it.
///
/// # Safety
/// `object` meets the contract of
/// [`DecodePool::whole_releasing_reclaimer`].
pub unsafe fn release_or_drop<K: Resource>(object: K) {
    if let Some(name) = object.meta().name.as_deref() {
        // SAFETY: the object is owned here by value, and the caller's
        // contract covers the rest.
        if unsafe { kinformer_alloc::release_whole(name.as_ptr()) } {
            std::mem::forget(object);
            return;
        }
    }
    drop(object);
}

fn work(rx: &Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
            let msg = caught_panic_message(p);
            tracing::error!(panic = %msg, "decode job panicked");
        }
    }
}

impl Drop for DecodePool {
    fn drop(&mut self) {
        // Closes the queues (the upgrade of a reclaimer keeps them open
        // only for the few sends it is making). The keeper is joined when
        // the fields drop.
        self.jobs.take();
        let me = std::thread::current().id();
        for h in self.threads.get_mut().drain(..) {
            // The last handle may be dropped by a job on the pool itself.
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }
}

impl std::fmt::Debug for DecodePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodePool")
            .field("size", &self.size)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube_core::ObjectMeta;

    use super::*;

    #[test]
    fn a_panicking_job_is_reported_as_lost_and_the_pool_lives_on() {
        let pool = DecodePool::new(1, "t").unwrap();
        let lost = pool.submit(|| -> u32 { panic!("boom") });
        assert!(lost.blocking_recv().is_err());
        assert_eq!(pool.submit(|| 1).blocking_recv().unwrap(), 1);
    }

    #[test]
    fn the_reclaimer_drops_each_object_on_the_thread_of_its_key() {
        /// Records its key and the thread it is dropped on.
        struct Tracked(Arc<Mutex<Vec<(String, String)>>>, String, ObjectMeta);
        impl Drop for Tracked {
            fn drop(&mut self) {
                let thread = std::thread::current().name().unwrap_or("").to_string();
                self.0.lock().push((std::mem::take(&mut self.1), thread));
            }
        }
        impl Resource for Tracked {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;
            fn kind(_: &()) -> Cow<'_, str> {
                "Tracked".into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                "".into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                "v1".into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                "tracked".into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.2
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.2
            }
        }
        let pool = DecodePool::new(3, "t").unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let objects = (0..60)
            .map(|i| {
                let key = format!("ns-{}/pod-{i}", i % 4);
                let meta = ObjectMeta {
                    name: Some(format!("pod-{i}")),
                    ..ObjectMeta::default()
                };
                let obj = Arc::new(Tracked(Arc::clone(&log), key.clone(), meta));
                (ObjectKey::parse(&key), obj)
            })
            .collect();
        pool.reclaimer::<Tracked>().reclaim(objects);
        // A job queued on every thread after the drops runs after them.
        for shard in 0..3 {
            pool.submit_to(shard, || ()).blocking_recv().unwrap();
        }
        let log = log.lock();
        assert_eq!(log.len(), 60);
        for (key, thread) in log.iter() {
            assert_eq!(*thread, format!("t-{}", thread_of_key(key, 3)), "{key}");
        }
        let threads: std::collections::HashSet<_> = log.iter().map(|(_, t)| t).collect();
        assert_eq!(threads.len(), 3, "keys spread over every thread");
    }

    #[test]
    fn once_the_pool_is_gone_the_reclaimer_drops_in_place() {
        let pool = DecodePool::new(2, "t").unwrap();
        let reclaimer = pool.reclaimer::<ConfigMap>();
        drop(pool);
        let obj = Arc::new(ConfigMap::default());
        let weak = Arc::downgrade(&obj);
        reclaimer.reclaim(vec![(ObjectKey::parse("a"), obj)]);
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn dropping_the_pool_joins_its_threads() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::{Barrier, Mutex as StdMutex};

        /// Counts its thread's exit (thread-local destructors run before a
        /// join returns).
        struct OnExit(Arc<AtomicUsize>);
        impl Drop for OnExit {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        thread_local! {
            static GUARD: StdMutex<Option<OnExit>> = const { StdMutex::new(None) };
        }

        let exited = Arc::new(AtomicUsize::new(0));
        let pool = DecodePool::new(2, "t").unwrap();
        // Both jobs wait at the barrier, so each thread runs one of them.
        let barrier = Arc::new(Barrier::new(2));
        let jobs: Vec<_> = (0..2)
            .map(|_| {
                let (barrier, exited) = (Arc::clone(&barrier), Arc::clone(&exited));
                pool.submit(move || {
                    GUARD.with(|g| *g.lock().unwrap() = Some(OnExit(exited)));
                    barrier.wait();
                })
            })
            .collect();
        for j in jobs {
            j.blocking_recv().unwrap();
        }
        assert_eq!(exited.load(Ordering::SeqCst), 0);
        drop(pool);
        assert_eq!(
            exited.load(Ordering::SeqCst),
            2,
            "drop returned before the threads exited"
        );
    }
}

//! The decode stage: a pool of OS threads that turn raw JSON into objects
//! ready for the queue, so that decoding (the dominant per-object cost, far
//! above the queue and the cache) uses every core instead of the one tokio
//! thread that reads the response.
//!
//! The reflector keeps the order: it submits batches in arrival order and
//! takes their results back in the same order (see [`crate::events`]), so the
//! queue sees the events of a key in the order the server sent them.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use tokio::sync::oneshot;

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
    jobs: Option<Sender<Job>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    size: usize,
}

impl DecodePool {
    /// Starts `threads` decode threads (at least one) named `name-N`.
    pub fn new(threads: usize, name: &str) -> std::io::Result<Arc<Self>> {
        let size = threads.max(1);
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let mut handles = Vec::with_capacity(size);
        for i in 0..size {
            let rx: Receiver<Job> = rx.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || work(&rx))?,
            );
        }
        Ok(Arc::new(Self {
            jobs: Some(tx),
            threads: Mutex::new(handles),
            size,
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

    /// Runs `f` on a pool thread; its result arrives on the returned
    /// receiver. A panic in `f` is caught and logged, and the receiver then
    /// reports a closed channel.
    pub fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            // A dropped receiver (the reflector stopped) is not an error.
            let _ = tx.send(f());
        });
        if let Some(jobs) = &self.jobs {
            // The pool's threads hold the receiver until `jobs` is dropped
            // in `Drop`, so a send from a live pool cannot fail.
            let _ = jobs.send(job);
        }
        rx
    }
}

fn work(rx: &Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        if let Err(p) = catch_unwind(AssertUnwindSafe(job)) {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            tracing::error!(panic = %msg, "decode job panicked");
        }
    }
}

impl Drop for DecodePool {
    fn drop(&mut self) {
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
    use super::*;

    #[test]
    fn a_panicking_job_is_reported_as_lost_and_the_pool_lives_on() {
        let pool = DecodePool::new(1, "t").unwrap();
        let lost = pool.submit(|| -> u32 { panic!("boom") });
        assert!(lost.blocking_recv().is_err());
        assert_eq!(pool.submit(|| 1).blocking_recv().unwrap(), 1);
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

//! The shared index informer: one DeltaFIFO, one Indexer, a pool of OS
//! threads applying deltas, and any number of handler registrations.
//!
//! This type does no I/O: a producer (the reflector, or a test) feeds
//! [`SharedIndexInformer::queue`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use kube_core::Resource;
use parking_lot::Mutex;

use crate::error::InformerError;
use crate::fifo::{DeltaFifo, FifoStats, Transform};
use crate::handler::ResourceEventHandler;
use crate::index::Indexers;
use crate::indexer::{Indexer, IndexerStats};
use crate::latency::LatencyHistogram;
use crate::processor::{Pipeline, ProcessorCounters};
use crate::reclaimer::Reclaimer;
use crate::registration::{HandlerRegistration, HandlerStats, Registration};

/// The shortest resync period; shorter requests are raised to it.
pub const MIN_RESYNC_PERIOD: Duration = Duration::from_secs(1);
/// How often the resync driver checks whether a handler's resync is due.
const RESYNC_CHECK: Duration = Duration::from_millis(100);

/// Configures a [`SharedIndexInformer`].
pub struct InformerBuilder<K> {
    name: String,
    threads: usize,
    batch_size: usize,
    transform: Option<Transform<K>>,
    indexers: Indexers<K>,
    default_resync: Option<Duration>,
    trickle_linger: Duration,
}

impl<K: Resource + Send + Sync + 'static> InformerBuilder<K> {
    /// A name for threads and logs.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Number of processor threads (default: available cores).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Most keys a processor thread applies in one published batch
    /// (default 4096). A batch takes only the keys already waiting (after
    /// the [trickle linger](Self::trickle_linger)), so at a steady event
    /// rate batches stay small (low latency) and only a bulk load (an
    /// initial list) fills it, publishing fewer snapshots.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size.max(1);
        self
    }

    /// How long a processor thread woken for fewer than
    /// [`TRICKLE_KEYS`](crate::fifo::TRICKLE_KEYS) keys lets more gather
    /// before it applies them (default
    /// [`TRICKLE_LINGER`](crate::fifo::TRICKLE_LINGER), 50 µs; zero
    /// disables it). See [`DeltaFifo::set_trickle_linger`].
    pub fn trickle_linger(mut self, linger: Duration) -> Self {
        self.trickle_linger = linger;
        self
    }

    /// A transform applied to every incoming object before it is queued,
    /// stored or handed to handlers (e.g. dropping `managedFields`). It must
    /// be idempotent.
    pub fn transform(mut self, f: impl Fn(K) -> K + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(f));
        self
    }

    /// Index functions registered from the start.
    pub fn indexers(mut self, indexers: Indexers<K>) -> Self {
        self.indexers = indexers;
        self
    }

    /// The resync period of handlers added without one (default: none).
    pub fn default_resync(mut self, period: Option<Duration>) -> Self {
        self.default_resync = period;
        self
    }

    /// Builds the informer (threads start with [`SharedIndexInformer::start`]).
    pub fn build(self) -> SharedIndexInformer<K> {
        let indexer = Indexer::new(self.indexers);
        let reclaimer = indexer.reclaimer_slot();
        let fifo = Arc::new(DeltaFifo::new(indexer.clone(), self.transform));
        fifo.set_trickle_linger(self.trickle_linger);
        let signal = Arc::clone(fifo.sync_signal());
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(0);
        SharedIndexInformer {
            inner: Arc::new(Inner {
                name: self.name,
                threads: self.threads,
                batch_size: self.batch_size,
                default_resync: self.default_resync,
                pipeline: Arc::new(Pipeline {
                    fifo,
                    indexer,
                    registrations: ArcSwap::from_pointee(Vec::new()),
                    reclaimer,
                    synced: Arc::new(AtomicBool::new(false)),
                    signal,
                    counters: ProcessorCounters::default(),
                }),
                next_id: AtomicU64::new(1),
                started: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                threads_running: Mutex::new(Vec::new()),
                stop_tx: Mutex::new(Some(stop_tx)),
                stop_rx,
            }),
        }
    }
}

struct Inner<K: Resource + Send + Sync + 'static> {
    name: String,
    threads: usize,
    batch_size: usize,
    default_resync: Option<Duration>,
    pipeline: Arc<Pipeline<K>>,
    next_id: AtomicU64,
    started: AtomicBool,
    stopped: AtomicBool,
    threads_running: Mutex<Vec<JoinHandle<()>>>,
    stop_tx: Mutex<Option<Sender<()>>>,
    stop_rx: Receiver<()>,
}

/// Metrics of an informer, readable from code.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InformerMetrics {
    /// Keys waiting in the DeltaFIFO.
    pub queue_depth: usize,
    /// Deltas applied to the cache.
    pub deltas_processed: u64,
    /// Batches published.
    pub batches: u64,
    /// Deletes (or tombstones) for keys that were not cached (not delivered
    /// to handlers).
    pub unknown_deletes: u64,
    /// Handler panics caught, over all registrations.
    pub handler_panics: u64,
    /// How long keys waited, from their oldest delta's arrival in the queue
    /// to the cache holding it. Sampled: one key in
    /// [`SAMPLE_EVERY`](crate::latency::SAMPLE_EVERY) entering the queue.
    pub event_to_cache: LatencyHistogram,
    /// The queue's counters.
    pub fifo: FifoStats,
    /// The cache's counters.
    pub indexer: IndexerStats,
    /// One entry per registered handler.
    pub handlers: Vec<HandlerStats>,
}

/// A shared informer of one resource type: cache, indexes, handlers. Clone
/// to share; threads stop on [`SharedIndexInformer::shutdown`] or when the
/// last handle is dropped.
///
/// ```
/// use kinformer_core::{EventHandlerFns, SharedIndexInformer};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_core::ObjectMeta;
///
/// let informer = SharedIndexInformer::<ConfigMap>::builder().threads(1).build();
/// let (tx, rx) = std::sync::mpsc::channel();
/// informer.add_event_handler(EventHandlerFns::new().on_add(move |cm: &std::sync::Arc<ConfigMap>, _| {
///     tx.send(cm.metadata.name.clone()).unwrap();
/// })).unwrap();
/// informer.start().unwrap();
/// let cm = ConfigMap { metadata: ObjectMeta { name: Some("a".into()), ..Default::default() }, ..Default::default() };
/// informer.queue().replace(vec![cm], "1").unwrap();
/// assert_eq!(rx.recv().unwrap().as_deref(), Some("a"));
/// assert!(informer.indexer().get("a").is_some());
/// informer.shutdown();
/// ```
pub struct SharedIndexInformer<K: Resource + Send + Sync + 'static> {
    inner: Arc<Inner<K>>,
}

impl<K: Resource + Send + Sync + 'static> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K: Resource + Send + Sync + 'static> SharedIndexInformer<K> {
    /// A builder with defaults: threads = available cores, batch 4096, no
    /// transform, no indexes, no resync.
    pub fn builder() -> InformerBuilder<K> {
        InformerBuilder {
            name: "informer".into(),
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            batch_size: 4096,
            transform: None,
            indexers: Vec::new(),
            default_resync: None,
            trickle_linger: crate::fifo::TRICKLE_LINGER,
        }
    }

    /// The queue producers feed (`add`, `update`, `delete`, `replace`).
    pub fn queue(&self) -> &Arc<DeltaFifo<K>> {
        &self.inner.pipeline.fifo
    }

    /// Sets where handler threads hand the objects they hold the last
    /// reference to (see [`crate::reclaimer`]); typically installed by the
    /// producer that allocates the objects. Only the first call takes
    /// effect: returns false if a reclaimer was already set.
    pub fn set_reclaimer(&self, reclaimer: Arc<dyn Reclaimer<K>>) -> bool {
        self.inner.pipeline.reclaimer.set(reclaimer).is_ok()
    }

    /// The cache, for lock-free reads.
    pub fn indexer(&self) -> Indexer<K> {
        self.inner.pipeline.indexer.clone()
    }

    /// Adds indexes, computed at once for every cached object.
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        self.inner.pipeline.indexer.add_indexers(indexers)
    }

    /// Whether the first full list has been applied to the cache.
    pub fn has_synced(&self) -> bool {
        let p = &self.inner.pipeline;
        if !p.synced.load(Ordering::SeqCst) && p.fifo.has_synced() {
            // A list with nothing in it, or a producer that only adds.
            p.synced.store(true, Ordering::SeqCst);
        }
        p.synced.load(Ordering::SeqCst)
    }

    /// Resolves once [`has_synced`](Self::has_synced) is true or the
    /// informer shut down (check `has_synced` to tell which). Notified by
    /// the pool thread that applies the last delta of the first list, not
    /// polled; usable from any async runtime.
    pub async fn synced(&self) {
        self.until_or_stopped(|| self.has_synced()).await;
    }

    /// Blocks until [`has_synced`](Self::has_synced) is true, the informer
    /// shuts down, or `timeout` passes; whether it has synced.
    pub fn wait_synced_blocking(&self, timeout: Duration) -> bool {
        self.until_or_stopped_blocking(|| self.has_synced(), timeout)
    }

    /// Whether the informer has synced and every handler registered now has
    /// been handed every object of the initial list (or of its replay).
    pub fn has_synced_with_handlers(&self) -> bool {
        self.has_synced()
            && self
                .inner
                .pipeline
                .registrations
                .load()
                .iter()
                .all(|r| r.has_synced())
    }

    /// Resolves once [`has_synced_with_handlers`](Self::has_synced_with_handlers)
    /// is true or the informer shut down; notified, not polled.
    pub async fn synced_with_handlers(&self) {
        self.until_or_stopped(|| self.has_synced_with_handlers())
            .await;
    }

    /// Blocks until [`has_synced_with_handlers`](Self::has_synced_with_handlers)
    /// is true, the informer shuts down, or `timeout` passes; whether it is.
    pub fn wait_synced_with_handlers_blocking(&self, timeout: Duration) -> bool {
        self.until_or_stopped_blocking(|| self.has_synced_with_handlers(), timeout)
    }

    /// Waits on the sync signal until `done()` or shutdown.
    async fn until_or_stopped(&self, done: impl Fn() -> bool) {
        let stopped = || self.inner.stopped.load(Ordering::SeqCst);
        self.inner
            .pipeline
            .signal
            .until(|| done() || stopped())
            .await;
    }

    /// Blocks on the sync signal until `done()`, shutdown or `timeout`;
    /// whether `done()`.
    fn until_or_stopped_blocking(&self, done: impl Fn() -> bool, timeout: Duration) -> bool {
        let stopped = || self.inner.stopped.load(Ordering::SeqCst);
        self.inner
            .pipeline
            .signal
            .until_blocking(|| done() || stopped(), timeout);
        done()
    }

    /// The resourceVersion of the last full list applied to the queue (empty
    /// before the first).
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.pipeline.fifo.last_sync_resource_version()
    }

    /// Registers a handler with the informer's default resync period.
    ///
    /// Each handler runs on a thread of its own. Unlike client-go, whose
    /// handlers receive every delta, a key's deltas are coalesced while
    /// they wait in the queue ([`FifoStats::merged`](crate::FifoStats::merged))
    /// and a handler that falls behind receives its backlog coalesced per
    /// key ([`HandlerStats::merged`](crate::HandlerStats::merged)): it sees
    /// each key's states in order, up to the newest, but not every
    /// intermediate one. A panic in a handler is caught and counted.
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
    ) -> Result<HandlerRegistration<K>, InformerError> {
        self.add_event_handler_with_resync(handler, self.inner.default_resync)
    }

    /// Registers a handler with its own resync period (at least
    /// [`MIN_RESYNC_PERIOD`]; `None` or zero for no resync, as a zero period
    /// is in client-go). A handler added after the cache has objects first
    /// receives `on_add(obj, true)` for each.
    pub fn add_event_handler_with_resync(
        &self,
        handler: impl ResourceEventHandler<K>,
        resync: Option<Duration>,
    ) -> Result<HandlerRegistration<K>, InformerError> {
        if self.inner.stopped.load(Ordering::SeqCst) {
            return Err(InformerError::ShutDown);
        }
        let resync = resync.filter(|p| !p.is_zero()).map(|p| {
            if p < MIN_RESYNC_PERIOD {
                tracing::warn!(requested = ?p, "resync period raised to the minimum of 1 s");
            }
            p.max(MIN_RESYNC_PERIOD)
        });
        let p = &self.inner.pipeline;
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let reg = Arc::new(Registration::new(
            id,
            resync,
            Arc::clone(&p.synced),
            Arc::clone(&p.signal),
            Arc::clone(&p.reclaimer),
        ));
        let name = format!("{}-handler-{id}", self.inner.name);
        reg.spawn(Box::new(handler), name.clone())
            .map_err(|e| InformerError::Spawn {
                name,
                reason: e.to_string(),
            })?;
        // Install at an exact point of the write sequence: every commit up to
        // `seq` is in the replayed snapshot, every later one is dispatched.
        p.indexer.with_writes_paused(|master| {
            reg.start_seq.store(master.seq(), Ordering::SeqCst);
            if !master.is_empty() {
                reg.set_replay(Arc::clone(master));
            }
            p.registrations.rcu(|regs| {
                let mut regs = Vec::clone(regs);
                regs.push(Arc::clone(&reg));
                regs
            });
        });
        Ok(HandlerRegistration { inner: reg })
    }

    /// Removes a handler while the informer runs; its thread is joined and
    /// its backlog dropped. Returns whether `registration` was one of this
    /// informer's: another informer's registration (ids are only unique
    /// within an informer) or one already removed is left alone.
    pub fn remove_event_handler(&self, registration: &HandlerRegistration<K>) -> bool {
        let mut found = false;
        self.inner.pipeline.registrations.rcu(|regs| {
            found = regs.iter().any(|r| Arc::ptr_eq(r, &registration.inner));
            regs.iter()
                .filter(|r| !Arc::ptr_eq(r, &registration.inner))
                .cloned()
                .collect::<Vec<_>>()
        });
        if found {
            registration.inner.stop();
        }
        found
    }

    /// Starts the processor pool and the resync driver. Idempotent.
    pub fn start(&self) -> Result<(), InformerError> {
        if self.inner.stopped.load(Ordering::SeqCst) {
            return Err(InformerError::ShutDown);
        }
        if self.inner.started.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let mut threads = self.inner.threads_running.lock();
        for i in 0..self.inner.threads {
            let pipeline = Arc::clone(&self.inner.pipeline);
            let batch = self.inner.batch_size;
            threads.push(spawn(format!("{}-pool-{i}", self.inner.name), move || {
                pipeline.run_worker(batch)
            })?);
        }
        let pipeline = Arc::clone(&self.inner.pipeline);
        let stop = self.inner.stop_rx.clone();
        threads.push(spawn(format!("{}-resync", self.inner.name), move || {
            drive_resync(&pipeline, &stop)
        })?);
        Ok(())
    }

    /// Stops everything: closes the queue, joins the pool, the resync driver
    /// and every handler thread. Idempotent.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Metrics of the queue, the cache and every handler.
    pub fn metrics(&self) -> InformerMetrics {
        let p = &self.inner.pipeline;
        let handlers: Vec<HandlerStats> =
            p.registrations.load().iter().map(|r| r.stats()).collect();
        InformerMetrics {
            queue_depth: p.fifo.len(),
            deltas_processed: p.counters.deltas.load(Ordering::Relaxed),
            batches: p.counters.batches.load(Ordering::Relaxed),
            unknown_deletes: p.counters.unknown_deletes.load(Ordering::Relaxed),
            handler_panics: handlers.iter().map(|h| h.panics).sum(),
            event_to_cache: p.counters.event_to_cache.snapshot(),
            fifo: p.fifo.stats(),
            indexer: p.indexer.stats(),
            handlers,
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Inner<K> {
    fn shutdown(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        self.pipeline.fifo.close();
        self.stop_tx.lock().take();
        let threads = std::mem::take(&mut *self.threads_running.lock());
        for t in threads {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        let regs = self.pipeline.registrations.swap(Arc::new(Vec::new()));
        for reg in regs.iter() {
            reg.stop();
        }
        self.pipeline.signal.notify();
    }
}

impl<K: Resource + Send + Sync + 'static> Drop for Inner<K> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, InformerError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|e| InformerError::Spawn {
            name,
            reason: e.to_string(),
        })
}

/// Marks the handlers whose resync is due and asks the queue to resync.
fn drive_resync<K: Resource + Send + Sync + 'static>(pipeline: &Pipeline<K>, stop: &Receiver<()>) {
    loop {
        match stop.recv_timeout(RESYNC_CHECK) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let now = Instant::now();
        let regs = pipeline.registrations.load();
        let due: Vec<bool> = regs
            .iter()
            .map(|r| r.resync_period.is_some() && *r.next_resync.lock() <= now)
            .collect();
        if !due.contains(&true) {
            continue;
        }
        for (reg, due) in regs.iter().zip(due) {
            reg.syncing.store(due, Ordering::SeqCst);
            if let (true, Some(period)) = (due, reg.resync_period) {
                *reg.next_resync.lock() = now + period;
            }
        }
        let n = pipeline.fifo.resync();
        tracing::debug!(queued = n, "resync");
    }
}

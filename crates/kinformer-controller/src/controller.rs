//! [`Controller`]: the reconcile loop over a primary informer and the
//! informers whose objects map to it.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use kinformer_core::panic::caught_panic_message;
use kinformer_core::{IndexFn, Indexer, InformerError, ObjectKey, SharedIndexInformer, UID_INDEX};
use kube_core::Resource;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::action::{Action, Next};
use crate::error::ControllerError;
use crate::priority::Priority;
use crate::queue::WorkQueue;
use crate::stats::{ControllerStats, Counters};
use crate::trigger::{self, Installed, Trigger};

/// Reconciles run at once by default.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// How long shutdown waits for the reconciles in flight by default.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// A controller: keys of a primary informer's objects (and of objects that
/// map to them) go through a [`WorkQueue`] to an async reconcile function.
///
/// - One reconcile in flight per key, at most `concurrency` at once; a key
///   changed during its reconcile is reconciled again after it.
/// - The reconcile receives the object from the primary cache (a lock-free
///   read); keys whose object is not cached are skipped and counted.
/// - `Ok(action)` forgets the key's failures and applies the [`Action`]; an
///   error goes to the error policy, whose action is applied (by default
///   [`Action::backoff`], the queue's rate limiter). A panic or a timeout is
///   caught, logged, counted and backed off.
/// - Every reconcile runs in a `reconcile` tracing span with the key.
/// - Reconciles start once every informer of the controller has synced.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
/// use kinformer_controller::{Action, Controller};
/// use kinformer_core::SharedIndexInformer;
///
/// # async fn run(deployments: SharedIndexInformer<Deployment>, replicasets: SharedIndexInformer<ReplicaSet>) {
/// #[derive(Debug, thiserror::Error)]
/// #[error("failed")]
/// struct Error;
///
/// async fn reconcile(deployment: Arc<Deployment>, _ctx: Arc<()>) -> Result<Action, Error> {
///     println!("reconciling {:?}", deployment.metadata.name);
///     Ok(Action::requeue(Duration::from_secs(300)))
/// }
///
/// let controller = Controller::new(&deployments).owns(&replicasets).concurrency(8);
/// let handle = controller.handle();
/// tokio::spawn(async move {
///     let _ = tokio::signal::ctrl_c().await;
///     handle.shutdown();
/// });
/// let stats = controller
///     .run(reconcile, |_, _: &Error, _| Action::backoff(), Arc::new(()))
///     .await;
/// println!("{stats:?}");
/// # }
/// ```
pub struct Controller<K: Resource + Send + Sync + 'static> {
    primary: SharedIndexInformer<K>,
    queue: WorkQueue,
    triggers: Vec<Trigger>,
    wants_uid_index: bool,
    reconcile_all_on: Vec<BoxStream<'static, ()>>,
    shutdown_on: Vec<BoxFuture<'static, ()>>,
    concurrency: usize,
    reconcile_timeout: Option<Duration>,
    shutdown_timeout: Duration,
    handle: ControllerHandle,
}

/// Controls a [`Controller`] from outside its `run`: shutdown, a full
/// reconcile, its counters and its queue. Cheap to clone.
#[derive(Clone)]
pub struct ControllerHandle {
    cancel: CancellationToken,
    pub(crate) name: Arc<str>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) queue: WorkQueue,
    keys: Arc<dyn Fn() -> Vec<ObjectKey> + Send + Sync>,
}

impl ControllerHandle {
    /// Starts a graceful shutdown: no new reconcile starts, the ones in
    /// flight finish (within the shutdown timeout), then `run` returns.
    pub fn shutdown(&self) {
        self.cancel.cancel();
    }

    /// Whether a shutdown has been asked for.
    pub fn is_shutting_down(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Enqueues every object of the primary cache at [`Priority::Low`]:
    /// live changes keep going first.
    pub fn reconcile_all(&self) {
        for key in (self.keys)() {
            self.queue.add_with_priority(key, Priority::Low);
        }
    }

    /// The counters so far.
    pub fn stats(&self) -> ControllerStats {
        self.counters.snapshot()
    }

    /// The controller's work queue (for its metrics, or to add keys).
    pub fn queue(&self) -> &WorkQueue {
        &self.queue
    }

    /// The controller's name (its queue's; the `controller` label of its
    /// metrics, see [`ControllerCollector`](crate::ControllerCollector)).
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Debug for ControllerHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ControllerHandle")
            .field("queue", &self.queue)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<K: Resource + Send + Sync + 'static> Controller<K> {
    /// A controller of `primary`'s objects, with a default [`WorkQueue`]
    /// (client-go's default rate limiter) named after `K` (`pod` for
    /// `Pod`, `partialobjectmeta<pod>` for `PartialObjectMeta<Pod>`).
    pub fn new(primary: &SharedIndexInformer<K>) -> Self {
        let queue = WorkQueue::builder().name(short_type_name::<K>()).build();
        Self::with_queue(primary, queue)
    }

    /// A controller using `queue`, for a rate limiter, a name or a
    /// low-priority bound of one's own ([`WorkQueue::builder`]); its name is
    /// the queue's.
    pub fn with_queue(primary: &SharedIndexInformer<K>, queue: WorkQueue) -> Self {
        let indexer = primary.indexer();
        let handle = ControllerHandle {
            cancel: CancellationToken::new(),
            name: Arc::from(queue.name()),
            counters: Arc::default(),
            queue: queue.clone(),
            keys: Arc::new(move || indexer.list_keys()),
        };
        Self {
            primary: primary.clone(),
            triggers: vec![Trigger::new(primary, trigger::own_keys(), false)],
            queue,
            wants_uid_index: false,
            reconcile_all_on: Vec::new(),
            shutdown_on: Vec::new(),
            concurrency: DEFAULT_CONCURRENCY,
            reconcile_timeout: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            handle,
        }
    }

    /// Reconciles the owners of `owned`'s objects: each owner reference
    /// is looked up by UID in the primary cache (which gets a
    /// [`UID_INDEX`] for it). In the reconcile, the owned objects of a
    /// primary are `owned.indexer().by_index(OWNER_UID_INDEX, uid)`.
    pub fn owns<C: Resource + Send + Sync + 'static>(
        mut self,
        owned: &SharedIndexInformer<C>,
    ) -> Self {
        self.wants_uid_index = true;
        let map = trigger::owners::<K, C>(self.primary.indexer());
        self.triggers.push(Trigger::new(owned, map, true));
        self
    }

    /// Reconciles the keys `mapper` returns for each object of `informer`
    /// (on an update, for the old and the new state). A key of no cached
    /// primary object is skipped when taken (counted in
    /// [`ControllerStats::skipped_missing`]); a panicking mapper drops the
    /// event and is counted in [`ControllerStats::mapper_panics`].
    pub fn watches<C, I>(
        mut self,
        informer: &SharedIndexInformer<C>,
        mapper: impl Fn(&C) -> I + Send + Sync + 'static,
    ) -> Self
    where
        C: Resource + Send + Sync + 'static,
        I: IntoIterator<Item = ObjectKey>,
    {
        let map = Arc::new(move |obj: &C, sink: &mut dyn FnMut(ObjectKey)| {
            mapper(obj).into_iter().for_each(&mut *sink);
        });
        self.triggers.push(Trigger::new(informer, map, true));
        self
    }

    /// Reconciles every cached primary object, at [`Priority::Low`], each
    /// time `stream` yields (a timer, a signal, a configuration change).
    pub fn reconcile_all_on(mut self, stream: impl Stream + Send + 'static) -> Self {
        self.reconcile_all_on.push(stream.map(|_| ()).boxed());
        self
    }

    /// Shuts the controller down gracefully when `signal` completes (see
    /// [`ControllerHandle::shutdown`]).
    pub fn graceful_shutdown_on(mut self, signal: impl Future + Send + 'static) -> Self {
        self.shutdown_on.push(signal.map(|_| ()).boxed());
        self
    }

    /// Reconciles run at once (at least 1; [`DEFAULT_CONCURRENCY`]): the
    /// number of worker tasks, each reconciling one key at a time.
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// Cancels a reconcile that has not finished after `timeout` and retries
    /// its key with backoff. Off by default. A reconcile that blocks its
    /// thread instead of awaiting cannot be cancelled.
    pub fn reconcile_timeout(mut self, timeout: Duration) -> Self {
        self.reconcile_timeout = Some(timeout);
        self
    }

    /// How long a shutdown waits for the reconciles in flight before it
    /// cancels them ([`DEFAULT_SHUTDOWN_TIMEOUT`]).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// A handle to shut the controller down, trigger a full reconcile or
    /// read its counters while it runs.
    pub fn handle(&self) -> ControllerHandle {
        self.handle.clone()
    }

    /// Runs the controller until a shutdown (by [`ControllerHandle::shutdown`]
    /// or a [`graceful_shutdown_on`](Self::graceful_shutdown_on) signal), then
    /// waits for the reconciles in flight (cancelling those still running
    /// after the shutdown timeout), shuts the work queue down (dropping
    /// delayed keys), removes its handlers from the informers and returns
    /// its counters. Shut the informers (or their factory) down after it.
    ///
    /// Fails only if a handler or the UID index cannot be added to an
    /// informer (one that is shut down).
    pub async fn run<Ctx, E, R, Fut, P>(
        self,
        reconcile: R,
        error_policy: P,
        ctx: Arc<Ctx>,
    ) -> Result<ControllerStats, ControllerError>
    where
        Ctx: Send + Sync + 'static,
        E: fmt::Display + Send + 'static,
        R: Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        P: Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
    {
        let Self {
            primary,
            queue,
            triggers,
            wants_uid_index,
            reconcile_all_on,
            shutdown_on,
            concurrency,
            reconcile_timeout,
            shutdown_timeout,
            handle,
        } = self;
        let counters = Arc::clone(&handle.counters);
        counters
            .max_concurrency
            .store(concurrency as u64, Ordering::Relaxed);
        let cancel = handle.cancel.clone();

        if wants_uid_index {
            match primary.add_indexers(vec![(UID_INDEX.to_owned(), IndexFn::uid())]) {
                Ok(()) | Err(InformerError::IndexExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let mut installed: Vec<Installed> = Vec::new();
        let mut synced = Vec::new();
        for t in triggers {
            match t.install(&queue, &counters) {
                Ok((i, s)) => {
                    installed.push(i);
                    synced.push(s);
                }
                Err(e) => {
                    installed.into_iter().for_each(Installed::remove);
                    return Err(e);
                }
            }
        }

        let mut background = JoinSet::new();
        for mut stream in reconcile_all_on {
            let handle = handle.clone();
            background.spawn(async move {
                while stream.next().await.is_some() {
                    handle.reconcile_all();
                }
            });
        }
        for signal in shutdown_on {
            let cancel = cancel.clone();
            background.spawn(async move {
                signal.await;
                cancel.cancel();
            });
        }

        let worker = Arc::new(Worker {
            indexer: primary.indexer(),
            queue: queue.clone(),
            counters: Arc::clone(&counters),
            reconcile,
            error_policy,
            ctx,
            timeout: reconcile_timeout,
            name: Arc::clone(&handle.name),
        });
        // `concurrency` workers, each taking a key, reconciling it and taking
        // the next: no task is spawned per reconcile.
        let mut in_flight = JoinSet::new();
        if wait_synced(synced, &cancel).await {
            for _ in 0..concurrency {
                let worker = Arc::clone(&worker);
                let cancel = cancel.clone();
                in_flight.spawn(async move { worker.work(&cancel).await });
            }
            let workers_ended = async { while in_flight.join_next().await.is_some() {} };
            tokio::select! {
                biased;
                () = cancel.cancelled() => {}
                () = workers_ended => {}
            }
        }

        // Drain: the reconciles in flight finish, up to the timeout.
        let drained = tokio::time::timeout(shutdown_timeout, async {
            while in_flight.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            let left = in_flight.len() as u64;
            tracing::warn!(
                reconciles = left,
                timeout = ?shutdown_timeout,
                "shutdown timeout: cancelling the reconciles still running"
            );
            counters
                .cancelled_at_shutdown
                .fetch_add(left, Ordering::Relaxed);
            in_flight.shutdown().await;
            counters.in_flight.store(0, Ordering::Relaxed);
        }
        background.shutdown().await;
        queue.shutdown();
        installed.into_iter().for_each(Installed::remove);
        Ok(counters.snapshot())
    }
}

impl<K: Resource + Send + Sync + 'static> fmt::Debug for Controller<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("queue", &self.queue)
            .field("triggers", &self.triggers.len())
            .field("concurrency", &self.concurrency)
            .field("reconcile_timeout", &self.reconcile_timeout)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish_non_exhaustive()
    }
}

/// `K`'s type name without module paths, lowercased.
fn short_type_name<K>() -> String {
    let full = std::any::type_name::<K>();
    let mut out = String::with_capacity(full.len());
    for part in full.split_inclusive(['<', '>', ',', ' ']) {
        let (path, sep) = match part.char_indices().last() {
            Some((i, '<' | '>' | ',' | ' ')) => (&part[..i], &part[i..]),
            _ => (part, ""),
        };
        out.push_str(path.rsplit("::").next().unwrap_or(path));
        out.push_str(sep);
    }
    out.to_lowercase()
}

/// Waits until every informer has synced; false if cancelled first.
async fn wait_synced(synced: Vec<BoxFuture<'static, ()>>, cancel: &CancellationToken) -> bool {
    tokio::select! {
        () = cancel.cancelled() => false,
        _ = futures::future::join_all(synced) => true,
    }
}

/// What every reconcile task shares.
struct Worker<K, R, P, Ctx> {
    indexer: Indexer<K>,
    queue: WorkQueue,
    counters: Arc<Counters>,
    reconcile: R,
    error_policy: P,
    ctx: Arc<Ctx>,
    timeout: Option<Duration>,
    name: Arc<str>,
}

/// How one reconcile ended.
enum Outcome<E> {
    Done(Result<Action, E>),
    Panicked(String),
    TimedOut,
}

impl<K, R, P, Ctx, E, Fut> Worker<K, R, P, Ctx>
where
    K: Resource + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    E: fmt::Display + Send + 'static,
    R: Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    P: Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
{
    /// One worker: takes keys until the controller is cancelled or the
    /// queue shuts down, reconciling each before taking the next.
    async fn work(&self, cancel: &CancellationToken) {
        loop {
            if cancel.is_cancelled() {
                return;
            }
            // A ready key is taken without registering for a wake-up.
            let key = match self.queue.try_get() {
                Some(key) => key,
                None => tokio::select! {
                    biased;
                    () = cancel.cancelled() => return,
                    key = self.queue.next() => match key {
                        Some(key) => key,
                        None => return,
                    },
                },
            };
            self.reconcile(key).await;
            // A reconcile that never waits must not keep this worker's
            // thread from the runtime's other tasks.
            tokio::task::consume_budget().await;
        }
    }

    /// Reconciles `key`, applies the outcome and marks it done.
    async fn reconcile(&self, key: ObjectKey) {
        let Some(obj) = self.indexer.get(key.as_str()) else {
            self.counters
                .skipped_missing
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(controller = %self.name, %key, "not in the cache: not reconciled");
            self.queue.forget(&key);
            self.queue.done(&key);
            return;
        };
        // In flight before started, and not in flight until counted: a
        // reader that sees none in flight sees every outcome counted.
        self.counters.in_flight.fetch_add(1, Ordering::SeqCst);
        self.counters.reconciles.fetch_add(1, Ordering::SeqCst);
        let span = tracing::info_span!("reconcile", controller = %self.name, %key);
        let started = std::time::Instant::now();
        let outcome = self
            .run_one(Arc::clone(&obj))
            .instrument(span.clone())
            .await;
        let took = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.counters.reconcile_time.observe_ns(took);
        let _entered = span.enter();
        let next = match outcome {
            Outcome::Done(Ok(action)) => {
                self.counters.succeeded.fetch_add(1, Ordering::Relaxed);
                self.queue.forget(&key);
                action.0
            }
            Outcome::Done(Err(error)) => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "reconcile failed");
                let policy = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    (self.error_policy)(obj, &error, Arc::clone(&self.ctx))
                }));
                match policy {
                    Ok(action) => action.0,
                    Err(panic) => {
                        self.counters
                            .error_policy_panics
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::error!(panic = %caught_panic_message(panic), "error policy panicked; backing off");
                        Next::Backoff
                    }
                }
            }
            Outcome::Panicked(message) => {
                self.counters.panicked.fetch_add(1, Ordering::Relaxed);
                tracing::error!(panic = %message, "reconcile panicked; backing off");
                Next::Backoff
            }
            Outcome::TimedOut => {
                self.counters.timed_out.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(timeout = ?self.timeout, "reconcile timed out and was cancelled; backing off");
                Next::Backoff
            }
        };
        match next {
            Next::Requeue(after) => self.queue.add_after(key.clone(), after),
            Next::AwaitChange => {}
            Next::Backoff => self.queue.add_rate_limited(key.clone()),
        }
        self.counters.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.queue.done(&key);
    }

    async fn run_one(&self, obj: Arc<K>) -> Outcome<E> {
        // Calling the reconcile can panic before its future exists.
        let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| {
            (self.reconcile)(obj, Arc::clone(&self.ctx))
        })) {
            Ok(fut) => fut,
            Err(panic) => return Outcome::Panicked(caught_panic_message(panic)),
        };
        let caught = AssertUnwindSafe(fut).catch_unwind();
        let result = match self.timeout {
            Some(t) => match tokio::time::timeout(t, caught).await {
                Ok(r) => r,
                Err(_) => return Outcome::TimedOut,
            },
            None => caught.await,
        };
        match result {
            Ok(r) => Outcome::Done(r),
            Err(panic) => Outcome::Panicked(caught_panic_message(panic)),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_type_names_drop_module_paths() {
        assert_eq!(
            super::short_type_name::<k8s_openapi::api::core::v1::Pod>(),
            "pod"
        );
        assert_eq!(
            super::short_type_name::<kube_core::PartialObjectMeta<k8s_openapi::api::core::v1::Pod>>(
            ),
            "partialobjectmeta<pod>"
        );
    }
}

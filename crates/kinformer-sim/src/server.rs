//! Building, serving and driving a sim: [`Sim`], [`SimBuilder`], [`RunningSim`], [`SimHandle`],
//! [`BackgroundSim`] for non-async callers, and the periodic fault driver.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post, put};
use axum::serve::ListenerExt;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::churn::{self, ChurnConfig, ChurnTask};
use crate::faults::{Control, FaultAction, FaultConfig, Faults, bump};
use crate::object::StoredObject;
use crate::resource::{Registry, ResourceDef, ResourceId};
use crate::state::{ServeConfig, Shared, SharedRef};
use crate::stats::{Counters, Stats};
use crate::status::ApiError;
use crate::store::{Store, StoreConfig};

/// Everything that configures a sim.
#[derive(Debug, Clone, Default)]
pub struct SimConfig {
    /// Extra resources served besides the built-in pods, configmaps, namespaces and nodes.
    pub extra_resources: Vec<ResourceDef>,
    /// Store tuning.
    pub store: StoreConfig,
    /// Serving knobs.
    pub serve: ServeConfig,
    /// Faults at start.
    pub faults: FaultConfig,
}

/// Builder of a [`Sim`].
#[derive(Debug, Clone, Default)]
pub struct SimBuilder {
    config: SimConfig,
}

impl SimBuilder {
    /// Serve an extra (schemaless JSON) resource, e.g. a CRD.
    pub fn resource(mut self, def: ResourceDef) -> Self {
        self.config.extra_resources.push(def);
        self
    }

    /// Events retained per resource for watch resumption (default 100 000).
    pub fn history(mut self, events: usize) -> Self {
        self.config.store.history = events;
        self
    }

    /// Events buffered per resource before a slow watcher is cut off (default 65 536).
    pub fn broadcast_capacity(mut self, events: usize) -> Self {
        self.config.store.broadcast_capacity = events;
        self
    }

    /// Stamp the commit-time annotation on writes (default on).
    pub fn stamp_commit_time(mut self, on: bool) -> Self {
        self.config.store.stamp_commit_time = on;
        self
    }

    /// Transcode each committed object's metadata to protobuf at commit
    /// (default off: when first asked for); see
    /// [`crate::store::StoreConfig::protobuf_on_commit`].
    pub fn protobuf_on_commit(mut self, on: bool) -> Self {
        self.config.store.protobuf_on_commit = on;
        self
    }

    /// Apply `shardSelector` as a server with the `ShardedListAndWatch`
    /// gate does (default on); off, it is ignored, as by a server without it.
    pub fn sharded_list_and_watch(mut self, on: bool) -> Self {
        self.config.serve.sharded_list_and_watch = on;
        self
    }

    /// Interval of periodic watch bookmarks (default 60 s).
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.config.serve.bookmark_interval = every;
        self
    }

    /// How watch events are cut into HTTP chunks (default: as kube-apiserver does).
    pub fn watch_chunks(mut self, chunks: crate::state::WatchChunks) -> Self {
        self.config.serve.watch_chunks = chunks;
        self
    }

    /// Watch duration when the client sends no `timeoutSeconds` (default 30 min).
    pub fn default_watch_timeout(mut self, d: Duration) -> Self {
        self.config.serve.default_watch_timeout = d;
        self
    }

    /// Faults at start.
    pub fn faults(mut self, faults: FaultConfig) -> Self {
        self.config.faults = faults;
        self
    }

    /// The whole configuration at once.
    pub fn config(mut self, config: SimConfig) -> Self {
        self.config = config;
        self
    }

    /// Build the (not yet serving) sim.
    pub fn build(self) -> Sim {
        let c = self.config;
        let mut defs = ResourceDef::builtins();
        defs.extend(c.extra_resources);
        let shared = Arc::new(Shared {
            store: Store::new(Registry::new(defs), c.store),
            faults: Faults::new(c.faults),
            counters: Counters::default(),
            config: c.serve,
        });
        Sim {
            handle: SimHandle { shared, addr: None },
        }
    }
}

/// A sim that is built but not serving yet; fill it in process, then [`Sim::serve`].
#[derive(Debug, Clone)]
pub struct Sim {
    handle: SimHandle,
}

impl Sim {
    /// A builder with defaults.
    pub fn builder() -> SimBuilder {
        SimBuilder::default()
    }

    /// In-process access (writes, faults, stats) before serving.
    pub fn handle(&self) -> &SimHandle {
        &self.handle
    }

    /// Bind `addr` (e.g. `127.0.0.1:0`) and serve on the current tokio runtime.
    pub async fn serve(self, addr: SocketAddr) -> std::io::Result<RunningSim> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        // Go's net package (so kube-apiserver) sets TCP_NODELAY on every
        // connection; without it a watch event written alone waits for the
        // client's delayed ACK (Nagle), tens of milliseconds on loopback.
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::warn!(error = %e, "could not set TCP_NODELAY");
            }
        });
        let shared = self.handle.shared.clone();
        let app = router(shared.clone());
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let shutdown = async {
                let _ = stop_rx.await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
            {
                tracing::error!(error = %e, "sim server failed");
            }
        });
        let driver = tokio::spawn(fault_driver(shared.clone()));
        tracing::info!(%local, "kinformer-sim listening");
        Ok(RunningSim {
            handle: SimHandle {
                shared,
                addr: Some(local),
            },
            stop: Some(stop_tx),
            server,
            driver,
        })
    }
}

fn router(shared: SharedRef) -> Router {
    use crate::{admin, discovery, routes};
    Router::new()
        .route(
            "/__sim/faults",
            get(admin::get_faults).put(admin::put_faults),
        )
        .route("/__sim/faults/actions", post(admin::post_action))
        .route("/__sim/faults/{schedule}", put(admin::put_schedule))
        .route("/__sim/stats", get(admin::get_stats))
        .route("/__sim/fill", post(admin::post_fill))
        .route("/__sim/churn", post(admin::post_churn))
        .route("/version", get(discovery::version))
        .route("/readyz", get(discovery::ok))
        .route("/livez", get(discovery::ok))
        .route("/healthz", get(discovery::ok))
        .fallback(routes::api)
        .with_state(shared)
}

/// Apply a one-shot fault action.
pub fn apply_action(shared: &Shared, action: &FaultAction) {
    match *action {
        FaultAction::CloseWatches { fraction } => shared.faults.broadcast(Control::Close(fraction)),
        FaultAction::ExpireWatches { fraction } => {
            shared.faults.broadcast(Control::Expire(fraction))
        }
        FaultAction::ExpireNextWatches { count } => shared.faults.expire_next_watches(count),
        FaultAction::Restart => {
            bump(&shared.faults.counters.restarts);
            shared.store.restart();
        }
        FaultAction::HoldWatches => shared.faults.set_hold(true),
        FaultAction::ReleaseWatches => shared.faults.set_hold(false),
    }
}

/// Periodic faults from the configuration (close, expire, restart every N ms).
async fn fault_driver(shared: SharedRef) {
    let mut tick = tokio::time::interval(crate::faults::DRIVER_TICK);
    let now = tokio::time::Instant::now();
    let (mut last_close, mut last_expire, mut last_restart) = (now, now, now);
    let due = |last: &mut tokio::time::Instant, every_ms: u64| {
        let now = tokio::time::Instant::now();
        if every_ms > 0 && now.duration_since(*last) >= Duration::from_millis(every_ms) {
            *last = now;
            true
        } else {
            if every_ms == 0 {
                *last = now;
            }
            false
        }
    };
    loop {
        tick.tick().await;
        let cfg = shared.faults.config();
        if due(&mut last_close, cfg.close_watches_every_ms) {
            apply_action(
                &shared,
                &FaultAction::CloseWatches {
                    fraction: cfg.close_watches_fraction,
                },
            );
        }
        if due(&mut last_expire, cfg.expire_watches_every_ms) {
            apply_action(&shared, &FaultAction::ExpireWatches { fraction: 1.0 });
        }
        if due(&mut last_restart, cfg.restart_every_ms) {
            apply_action(&shared, &FaultAction::Restart);
        }
    }
}

/// A serving sim. Dropping it stops the server.
#[derive(Debug)]
pub struct RunningSim {
    handle: SimHandle,
    stop: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
    driver: tokio::task::JoinHandle<()>,
}

impl RunningSim {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.handle
            .addr
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// In-process access.
    pub fn handle(&self) -> &SimHandle {
        &self.handle
    }

    /// Stop serving (open watches are cut) and wait for the server task.
    pub async fn shutdown(mut self) {
        self.driver.abort();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Graceful shutdown waits for open watches; cut them by restarting the store's channels.
        self.handle.shared.store.restart();
        let _ = tokio::time::timeout(Duration::from_secs(5), &mut self.server).await;
        self.server.abort();
    }

    /// Start a sim on its own thread and tokio runtime (for non-async callers such as a load-test
    /// driver). Blocks until it is listening.
    pub fn start_in_background(sim: Sim, addr: SocketAddr) -> std::io::Result<BackgroundSim> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<std::io::Result<SimHandle>>();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("kinformer-sim".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    match sim.serve(addr).await {
                        Ok(running) => {
                            let _ = ready_tx.send(Ok(running.handle().clone()));
                            let _ = stop_rx.await;
                            running.shutdown().await;
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
            })?;
        let handle = ready_rx
            .recv()
            .map_err(|_| std::io::Error::other("sim thread exited before listening"))??;
        Ok(BackgroundSim {
            handle,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            self.handle.shared.store.restart();
        }
        self.driver.abort();
    }
}

/// A sim serving on its own thread; dropping it (or [`BackgroundSim::shutdown`]) stops it.
#[derive(Debug)]
pub struct BackgroundSim {
    handle: SimHandle,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BackgroundSim {
    /// In-process access.
    pub fn handle(&self) -> &SimHandle {
        &self.handle
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.handle
            .addr
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// Stop and join the server thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for BackgroundSim {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// In-process access to a sim: bulk writes, faults, stats. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SimHandle {
    shared: SharedRef,
    addr: Option<SocketAddr>,
}

impl SimHandle {
    /// The bound address, once serving.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, once serving.
    pub fn base_url(&self) -> Option<String> {
        self.addr.map(|a| format!("http://{a}"))
    }

    /// The shared state (store, faults, counters).
    pub fn shared(&self) -> &SharedRef {
        &self.shared
    }

    /// Counters, store figures and fault counts.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// Fault state: `config()`, `set_config()`, `counts()`.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Replace the fault configuration.
    pub fn set_faults(&self, cfg: FaultConfig) {
        self.shared.faults.set_config(cfg);
    }

    /// Trigger a one-shot fault.
    pub fn trigger(&self, action: FaultAction) {
        apply_action(&self.shared, &action);
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.shared.store.current_rv()
    }

    /// Resolve a resource by plural or kind (`pods`, `Pod`).
    pub fn resource(&self, kind: &str) -> Result<ResourceId, ApiError> {
        self.shared
            .store
            .registry()
            .find_by_name(kind)
            .ok_or_else(ApiError::unknown_resource)
    }

    /// Create one object (namespace from its metadata).
    pub fn create(&self, kind: &str, obj: Value) -> Result<Arc<StoredObject>, ApiError> {
        let r = self.shared.store.create(self.resource(kind)?, None, obj)?;
        self.shared.count_write();
        Ok(r)
    }

    /// Create many objects; returns how many were created (failures are skipped).
    pub fn create_many(&self, kind: &str, objs: Vec<Value>) -> Result<usize, ApiError> {
        let (n, _errors) = self.shared.store.create_many(self.resource(kind)?, objs);
        self.shared
            .counters
            .writes
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }

    /// Replace an object (a non-empty `metadata.resourceVersion` is a precondition).
    pub fn update(&self, kind: &str, obj: Value) -> Result<Arc<StoredObject>, ApiError> {
        let r = self
            .shared
            .store
            .update(self.resource(kind)?, None, None, obj)?;
        self.shared.count_write();
        Ok(r)
    }

    /// Merge-patch an object.
    pub fn patch(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let r = self
            .shared
            .store
            .patch(self.resource(kind)?, namespace, name, patch)?;
        self.shared.count_write();
        Ok(r)
    }

    /// Delete an object.
    pub fn delete(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let r = self
            .shared
            .store
            .delete(self.resource(kind)?, namespace, name, None)?;
        self.shared.count_write();
        Ok(r)
    }

    /// One object.
    pub fn get(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Arc<StoredObject>>, ApiError> {
        Ok(self.shared.store.get(self.resource(kind)?, namespace, name))
    }

    /// Every object of a resource as (`namespace/name` key, resourceVersion), sorted by key, and the
    /// resourceVersion of that view: what a synced cache must equal.
    pub fn keys_and_versions(&self, kind: &str) -> Result<(u64, Vec<(String, u64)>), ApiError> {
        let snap = self.shared.store.snapshot(self.resource(kind)?);
        Ok((
            snap.rv,
            snap.objects
                .iter()
                .map(|(k, o)| (k.to_string(), o.meta.rv))
                .collect(),
        ))
    }

    /// Number of objects of a resource.
    pub fn len(&self, kind: &str) -> Result<usize, ApiError> {
        Ok(self.shared.store.len(self.resource(kind)?))
    }

    /// Fill a resource with `objects` template objects over `namespaces` namespaces (blocking; uses
    /// all cores). Returns how many were created.
    pub fn fill(&self, kind: &str, objects: usize, namespaces: usize) -> Result<usize, ApiError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(churn::fill(
            &self.shared,
            self.resource(kind)?,
            objects,
            namespaces,
            threads,
        ))
    }

    /// Start churning on a thread of its own.
    pub fn churn(&self, cfg: ChurnConfig) -> Result<ChurnTask, ApiError> {
        let res = self.resource(&cfg.kind)?;
        churn::start(self.shared.clone(), res, cfg).map_err(|e| ApiError::internal(e.to_string()))
    }
}

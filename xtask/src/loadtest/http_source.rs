//! The load test over HTTP: the simulator in a child process (or a real
//! cluster) as the source, and kinformer (its own reflector and shared
//! informer factory), kube-rs (kube-runtime's watcher + reflector Store) or
//! client-go (its shared informer, in a Go child process) as the cache
//! under test, all measured the same way.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use kinformer::compact::{Compact, CompactInformer, CompactLister};
use kinformer::{
    DirectWatch, SharedIndexInformer, SharedInformerFactory, Tuning, strip_managed_fields,
};
use kube::api::{Api, PartialObjectMeta};
use kube::core::NamespaceResourceScope;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher::{self, Event};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::admin::SimAdmin;
use super::client_go::ClientGo;
use super::cluster::{self, ClusterDriver};
use super::host;
use super::measure::{LagHandler, LagStats, Readers, compare, wait_for};
use super::process::Proc;
use super::sim_process::SimProcess;
use super::{Impl, LoadtestArgs, Report, TransformArg, WatchTransport};

type WatchStream<K> = BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// What the list/watch pump saw.
#[derive(Default)]
struct Feed {
    max_rv: AtomicU64,
    inits: AtomicU64,
    errors: AtomicU64,
}

impl Feed {
    fn saw<K: Resource>(&self, obj: &K) {
        if let Some(rv) = obj
            .meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse().ok())
        {
            self.max_rv.fetch_max(rv, Ordering::Relaxed);
        }
    }
}

/// The server side: the simulator child, or a real cluster.
pub(crate) enum Server {
    /// The child process (when this process started it) is kept alive,
    /// and killed on drop, by the variant.
    Sim(#[allow(dead_code)] Option<SimProcess>, SimAdmin),
    Cluster(ClusterDriver),
}

impl Server {
    fn source(&self) -> &'static str {
        match self {
            Self::Sim(..) => "sim",
            Self::Cluster(_) => "kubeconfig",
        }
    }

    /// The simulator's URL (`None` for a real cluster).
    pub(crate) fn sim_url(&self, args: &LoadtestArgs) -> Option<String> {
        match self {
            Self::Sim(Some(sim), _) => Some(sim.url.clone()),
            Self::Sim(None, _) => args.sim_url.clone(),
            Self::Cluster(_) => None,
        }
    }

    pub(crate) fn namespace(&self) -> Option<&'static str> {
        match self {
            Self::Sim(..) => None,
            Self::Cluster(_) => Some(cluster::NAMESPACE),
        }
    }

    /// With `--burst N`: holds the watches and commits N updates; the
    /// caller releases them with [`Server::release`]. Without it: the live
    /// churn.
    pub(crate) async fn churn(&self, args: &LoadtestArgs) -> anyhow::Result<u64> {
        if let (Some(n), Self::Sim(_, admin)) = (args.burst, self) {
            admin.hold_watches(true).await?;
            eprintln!("burst: {n} updates committed while the watches are held ...");
            return admin.update_each_once(n).await;
        }
        match self {
            Self::Sim(_, admin) => {
                admin
                    .churn(args.churn, args.churn_duration(), super::pods::NAMESPACES)
                    .await
            }
            Self::Cluster(d) => {
                d.churn(args.objects, args.churn, args.churn_duration())
                    .await
            }
        }
    }

    /// Ends the hold of `--burst`.
    async fn release(&self) -> anyhow::Result<()> {
        match self {
            Self::Sim(_, admin) => admin.hold_watches(false).await,
            Self::Cluster(_) => Ok(()),
        }
    }

    /// The resourceVersion the cache must reach to have seen every write.
    pub(crate) async fn target_rv(&self) -> anyhow::Result<u64> {
        match self {
            Self::Sim(_, admin) => Ok(admin.stats().await?.resource_version),
            Self::Cluster(d) => Ok(d.newest_rv()),
        }
    }

    pub(crate) async fn truth(&self) -> anyhow::Result<HashMap<String, String>> {
        match self {
            Self::Sim(_, admin) => admin.truth().await,
            Self::Cluster(d) => d.truth().await,
        }
    }

    /// Makes every watch of the source end with 410 so that clients relist;
    /// false when the source cannot (a real cluster).
    async fn force_relist(&self) -> anyhow::Result<bool> {
        match self {
            Self::Sim(_, admin) => admin.expire_watches().await.map(|()| true),
            Self::Cluster(_) => Ok(false),
        }
    }

    async fn faults_injected(&self) -> anyhow::Result<u64> {
        match self {
            Self::Sim(_, admin) => Ok(admin.stats().await?.faults_injected),
            Self::Cluster(_) => Ok(0),
        }
    }
}

/// The load test's tokio runtime: two workers, so that the reflectors and
/// the admin requests do not starve each other.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Runs the load test against the simulator (default) or `--kubeconfig`.
pub fn run(args: &LoadtestArgs) -> anyhow::Result<Report> {
    let rt = runtime()?;
    let (server, client) = connect(args, &rt)?;
    let strip = args.transform != TransformArg::None;
    let ns = server.namespace();
    // Explicit options replace the factory's defaults: the namespace too.
    let mut options = kinformer::InformerOptions::default();
    if let Some(ns) = ns {
        options = options.namespace(ns);
    }
    if let Some(shard) = &args.shard_of {
        options = options.shard(parse_shard(shard)?);
    }
    if args.metadata_only {
        if args.compact {
            bail!("--compact caches whole objects: it does not go with --metadata-only");
        }
        let stream = move |c: Client| kube_rs_stream::<PartialObjectMeta<Pod>>(c, ns, strip);
        drive(
            args,
            &rt,
            &client,
            &server,
            |f| Made::Plain(f.metadata_informer_with::<Pod>(options.clone())),
            stream,
        )
    } else {
        let stream = move |c: Client| kube_rs_stream::<Pod>(c, ns, strip);
        let informer = |f: &SharedInformerFactory| match args.compact {
            true => Made::Compact(f.compact_informer_with::<Pod>(options.clone())),
            false => Made::Plain(f.informer_with::<Pod>(options.clone())),
        };
        drive(args, &rt, &client, &server, informer, stream)
    }
}

/// Starts the source (the simulator child filled with `--objects` Pods, or
/// a real cluster filled through the API) and connects to it.
pub(crate) fn connect(
    args: &LoadtestArgs,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<(Server, Connection)> {
    let (server, client, direct) = match &args.kubeconfig {
        Some(path) => rt.block_on(async {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).context("reading the kubeconfig")?;
            let config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
            let direct = direct_watch(args, &config)?;
            let client = Client::try_from(config).context("kube client")?;
            let driver = ClusterDriver::new(client.clone()).await?;
            eprintln!(
                "creating {} Pods in namespace {}",
                args.objects,
                cluster::NAMESPACE
            );
            driver.fill(args.objects).await?;
            anyhow::Ok((Server::Cluster(driver), client, direct))
        })?,
        None => {
            let (sim, url) = match &args.sim_url {
                Some(url) => (None, url.clone()),
                None => {
                    let sim = SimProcess::start(args)?;
                    let url = sim.url.clone();
                    (Some(sim), url)
                }
            };
            let (client, direct) = rt.block_on(async {
                let config = kube::Config::new(url.parse().context("simulator URL")?);
                let direct = direct_watch(args, &config)?;
                anyhow::Ok((Client::try_from(config).context("kube client")?, direct))
            })?;
            let admin = SimAdmin {
                client: client.clone(),
            };
            (Server::Sim(sim, admin), client, direct)
        }
    };
    Ok((server, Connection { client, direct }))
}

/// `I/N`: shard I of N equal ranges of the UID hash.
fn parse_shard(s: &str) -> anyhow::Result<kinformer::ShardSelector> {
    let (i, n) = s.split_once('/').context("--shard-of I/N")?;
    Ok(kinformer::ShardSelector::uid_shard(i.parse()?, n.parse()?))
}

/// kinformer's direct watches, unless `--watch-transport client`.
fn direct_watch(args: &LoadtestArgs, config: &kube::Config) -> anyhow::Result<Option<DirectWatch>> {
    if args.implementation != Impl::Kinformer || args.watch_transport != WatchTransport::Direct {
        return Ok(None);
    }
    Ok(Some(
        DirectWatch::from_config(config).context("direct watches")?,
    ))
}

/// How the caches under test reach the server: kube's client, and for
/// kinformer the direct watches of `--watch-transport direct`.
pub(crate) struct Connection {
    /// kube's client for the source.
    pub(crate) client: Client,
    /// kinformer's direct watches (`--watch-transport direct`).
    pub(crate) direct: Option<DirectWatch>,
}

/// kube-runtime's watcher over `K` (in `ns`, or all namespaces), with
/// kube's default backoff, optionally dropping managedFields.
fn kube_rs_stream<K>(client: Client, ns: Option<&str>, strip: bool) -> WatchStream<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<K> = match ns {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let s = watcher::watcher(api, watcher::Config::default()).default_backoff();
    if strip {
        s.modify(|o| o.managed_fields_mut().clear()).boxed()
    } else {
        s.boxed()
    }
}

/// A kinformer informer of the load test: the plain store, or the compact
/// one (`--compact`).
pub(crate) enum Made<K: Resource + Send + Sync + 'static> {
    Plain(SharedIndexInformer<K>),
    Compact(CompactInformer<K>),
}

/// Gets sampled for [`Cache::get_latency`].
const GET_SAMPLE: usize = 20_000;
/// Keys read again and again for the hot figure, and the rounds.
const HOT_KEYS: usize = 100;
const HOT_ROUNDS: usize = 2_000;

/// Lister `get` latency, nanoseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GetLatency {
    /// A get of an object not read lately (for the compact store: one that
    /// decoded), median and 99th percentile of single gets.
    pub cold_p50_ns: u64,
    pub cold_p99_ns: u64,
    /// Gets of a few objects read again and again: the median over rounds
    /// of the mean get in a round (a single get is too short to time).
    pub hot_p50_ns: u64,
}

/// Times `get` over `keys`: each first read singly (for the compact store,
/// only those that decoded, by its `decodes` counter), then rounds over the
/// first [`HOT_KEYS`].
fn time_gets(
    keys: &[String],
    get: impl Fn(&str) -> bool,
    decodes: Option<&dyn Fn() -> u64>,
) -> GetLatency {
    let mut singles = Vec::with_capacity(keys.len());
    for k in keys {
        let before = decodes.map(|d| d());
        let t = Instant::now();
        let found = std::hint::black_box(get(k));
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let decoded = match (decodes, before) {
            (Some(d), Some(before)) => d() > before,
            _ => true,
        };
        if found && decoded {
            singles.push(ns);
        }
    }
    let hot = &keys[..keys.len().min(HOT_KEYS)];
    let mut rounds = Vec::with_capacity(HOT_ROUNDS);
    for _ in 0..HOT_ROUNDS {
        let t = Instant::now();
        for k in hot {
            std::hint::black_box(get(k));
        }
        rounds.push(
            u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX) / hot.len().max(1) as u64,
        );
    }
    let pct = |v: &mut Vec<u64>, p: f64| {
        v.sort_unstable();
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    GetLatency {
        cold_p50_ns: pct(&mut singles, 0.50),
        cold_p99_ns: pct(&mut singles, 0.99),
        hot_p50_ns: pct(&mut rounds, 0.50),
    }
}

/// The cache under test, behind one interface.
trait Cache<K>: Send + Sync + 'static {
    /// Lister `get` latency over `keys` (`None`: not measured for this
    /// implementation).
    fn get_latency(&self, keys: &[String]) -> Option<GetLatency> {
        let _ = keys;
        None
    }
    fn synced(&self) -> bool;
    fn drained(&self) -> bool;
    fn contains(&self, key: &str) -> bool;
    /// Objects cached (`None`: not cheap to count).
    fn len(&self) -> Option<usize>;
    fn keys_and_versions(&self) -> Vec<(String, Option<String>)>;
    /// Up to `n` of the cached keys (what the reader threads look up).
    fn keys(&self, n: usize) -> Vec<String>;
    fn handler_panics(&self) -> u64;
    /// The newest resourceVersion the list/watch client has seen.
    fn seen_rv(&self) -> u64;
    fn relists(&self) -> u64;
    fn watch_restarts(&self) -> u64;
    /// Deltas applied and batches published so far (`None`: not counted).
    fn batches(&self) -> Option<(u64, u64)>;
    fn shutdown(&self);
}

struct KinformerCache<K: Resource + Send + Sync + 'static> {
    factory: SharedInformerFactory,
    informer: SharedIndexInformer<K>,
    registrations: Vec<kinformer_core::HandlerRegistration<K>>,
}

impl<K: Resource + Send + Sync + 'static> KinformerCache<K> {
    fn reflector(&self) -> Option<kinformer::ReflectorMetrics> {
        self.factory
            .reflector_metrics()
            .into_iter()
            .next()
            .map(|(_, m)| m)
    }
}

impl<K: Resource + Send + Sync + 'static> Cache<K> for KinformerCache<K> {
    fn get_latency(&self, keys: &[String]) -> Option<GetLatency> {
        let indexer = self.informer.indexer();
        // Every first read of the sample is cold: the sample is 20k of the
        // cache's objects, read once.
        Some(time_gets(keys, |k| indexer.get(k).is_some(), None))
    }
    fn synced(&self) -> bool {
        self.informer.has_synced() && self.registrations.iter().all(|r| r.has_synced())
    }
    fn drained(&self) -> bool {
        let m = self.informer.metrics();
        m.queue_depth == 0
            && self.informer.queue().tracked_keys() == 0
            && m.handlers.iter().all(|h| h.backlog == 0)
    }
    fn contains(&self, key: &str) -> bool {
        self.informer.indexer().get(key).is_some()
    }
    fn len(&self) -> Option<usize> {
        Some(self.informer.indexer().len())
    }
    fn keys_and_versions(&self) -> Vec<(String, Option<String>)> {
        let snapshot = self.informer.indexer().snapshot();
        snapshot
            .iter()
            .map(|(k, o)| (k.to_string(), o.meta().resource_version.clone()))
            .collect()
    }
    fn keys(&self, n: usize) -> Vec<String> {
        let snapshot = self.informer.indexer().snapshot();
        snapshot
            .iter()
            .take(n)
            .map(|(k, _)| k.to_string())
            .collect()
    }
    fn handler_panics(&self) -> u64 {
        self.informer.metrics().handler_panics
    }
    fn seen_rv(&self) -> u64 {
        self.reflector()
            .and_then(|m| m.last_resource_version.parse().ok())
            .unwrap_or(0)
    }
    fn relists(&self) -> u64 {
        self.reflector().map_or(0, |m| m.relists)
    }
    fn watch_restarts(&self) -> u64 {
        self.reflector().map_or(0, |m| m.watch_restarts)
    }
    fn batches(&self) -> Option<(u64, u64)> {
        let m = self.informer.metrics();
        Some((m.deltas_processed, m.batches))
    }
    fn shutdown(&self) {
        self.factory.shutdown_blocking();
    }
}

/// A compact informer: the common figures from its underlying informer,
/// reads through its lister (which decode).
struct CompactCache<K: Resource + Send + Sync + 'static> {
    inner: KinformerCache<Compact<K>>,
    lister: CompactLister<K>,
}

impl<K> Cache<K> for CompactCache<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn get_latency(&self, keys: &[String]) -> Option<GetLatency> {
        let hot = self.lister.hot();
        Some(time_gets(
            keys,
            |k| self.lister.get(k).is_some(),
            Some(&|| hot.stats().decodes),
        ))
    }
    fn synced(&self) -> bool {
        self.inner.synced()
    }
    fn drained(&self) -> bool {
        self.inner.drained()
    }
    fn contains(&self, key: &str) -> bool {
        self.lister.get(key).is_some()
    }
    fn len(&self) -> Option<usize> {
        Some(self.lister.len())
    }
    fn keys_and_versions(&self) -> Vec<(String, Option<String>)> {
        self.inner.keys_and_versions()
    }
    fn keys(&self, n: usize) -> Vec<String> {
        self.inner.keys(n)
    }
    fn handler_panics(&self) -> u64 {
        self.inner.handler_panics()
    }
    fn seen_rv(&self) -> u64 {
        self.inner.seen_rv()
    }
    fn relists(&self) -> u64 {
        self.inner.relists()
    }
    fn watch_restarts(&self) -> u64 {
        self.inner.watch_restarts()
    }
    fn batches(&self) -> Option<(u64, u64)> {
        self.inner.batches()
    }
    fn shutdown(&self) {
        self.inner.shutdown();
    }
}

struct KubeRsCache<K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static> {
    store: reflector::Store<K>,
    ready: Arc<AtomicU64>,
    feed: Arc<Feed>,
    task: tokio::task::JoinHandle<()>,
}

/// The kinformer key of an object in kube-rs's store (`namespace/name`, or
/// `name`), so both caches are compared key for key.
fn store_key<K: Resource>(o: &K) -> String {
    let m = o.meta();
    kinformer::ObjectKey::new(
        m.namespace.as_deref(),
        m.name.as_deref().unwrap_or_default(),
    )
    .to_string()
}

impl<K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static> Cache<K> for KubeRsCache<K> {
    fn synced(&self) -> bool {
        self.ready.load(Ordering::SeqCst) > 0
    }
    fn drained(&self) -> bool {
        // The consumer runs inline in the stream: what it saw is applied.
        true
    }
    fn len(&self) -> Option<usize> {
        // Its store's `state()` copies every entry.
        None
    }
    fn contains(&self, key: &str) -> bool {
        let (ns, name) = key.split_once('/').unwrap_or(("", key));
        self.store.get(&ObjectRef::new(name).within(ns)).is_some()
    }
    fn keys_and_versions(&self) -> Vec<(String, Option<String>)> {
        self.store
            .state()
            .iter()
            .map(|o| (store_key(&**o), o.meta().resource_version.clone()))
            .collect()
    }
    fn keys(&self, n: usize) -> Vec<String> {
        self.store
            .state()
            .iter()
            .take(n)
            .map(|o| store_key(&**o))
            .collect()
    }
    fn handler_panics(&self) -> u64 {
        0
    }
    fn seen_rv(&self) -> u64 {
        self.feed.max_rv.load(Ordering::Relaxed)
    }
    fn relists(&self) -> u64 {
        self.feed.inits.load(Ordering::Relaxed).saturating_sub(1)
    }
    fn watch_restarts(&self) -> u64 {
        self.feed.errors.load(Ordering::Relaxed)
    }
    fn batches(&self) -> Option<(u64, u64)> {
        None
    }
    fn shutdown(&self) {
        self.task.abort();
    }
}

impl<K: 'static> Cache<K> for ClientGo {
    fn synced(&self) -> bool {
        self.status().synced
    }
    fn drained(&self) -> bool {
        // What the handlers were called with is what `seen_rv` says.
        true
    }
    fn contains(&self, _: &str) -> bool {
        // Its readers run in the harness (`ClientGo::start_readers`).
        false
    }
    fn len(&self) -> Option<usize> {
        Some(self.status_with_len().len)
    }
    fn keys_and_versions(&self) -> Vec<(String, Option<String>)> {
        self.keys_and_versions().unwrap_or_else(|e| {
            tracing::error!(error = %e, "client-go's keys");
            Vec::new()
        })
    }
    fn keys(&self, _: usize) -> Vec<String> {
        Vec::new()
    }
    fn handler_panics(&self) -> u64 {
        0
    }
    fn seen_rv(&self) -> u64 {
        self.status().seen_rv
    }
    fn relists(&self) -> u64 {
        self.status().expired
    }
    fn watch_restarts(&self) -> u64 {
        self.status().watch_errors
    }
    fn batches(&self) -> Option<(u64, u64)> {
        None
    }
    fn shutdown(&self) {
        ClientGo::shutdown(self);
    }
}

fn drive<K>(
    args: &LoadtestArgs,
    rt: &tokio::runtime::Runtime,
    client: &Connection,
    server: &Server,
    informer: impl Fn(&SharedInformerFactory) -> Made<K>,
    stream: impl Fn(Client) -> WatchStream<K>,
) -> anyhow::Result<Report>
where
    K: Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    // client-go's harness is started first and measured from outside; its
    // informer waits for the clock.
    let client_go = match args.implementation {
        Impl::ClientGo => {
            if args.informers > 1 || args.relist {
                bail!("--impl client-go runs one informer and no --relist");
            }
            let url = server.sim_url(args);
            Some(Arc::new(ClientGo::spawn(
                args,
                url.as_deref(),
                server.namespace(),
                &[],
            )?))
        }
        _ => None,
    };
    let process = client_go.as_ref().map_or(Proc::This, |c| c.process());
    let settled = host::settle(args.settle_max());
    let rss_before = process.rss_bytes();
    let cpu_before = process.cpu_seconds();
    let mut caches: Vec<Arc<dyn Cache<K>>> = Vec::new();
    let mut stats: Vec<Arc<LagStats>> = Vec::new();
    // kinformer's reflectors on a runtime of their own: each run of watch
    // chunks crosses from the body's reading task to the reflector (and,
    // with `--watch-transport client`, each chunk from hyper's connection
    // task to that reader), and on one worker that is a local wake instead
    // of a futex between two threads.
    let reflector_rt = match (args.implementation, args.reflector_workers) {
        (Impl::Kinformer, n) if n > 0 => Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .thread_name("kinformer-rt")
                .enable_all()
                .build()?,
        ),
        _ => None,
    };
    let t0 = Instant::now();
    let sync_steal = host::StealMeter::start();
    for _ in 0..args.informers.max(1) {
        let cache = match args.implementation {
            Impl::Kinformer => {
                let on = reflector_rt.as_ref().unwrap_or(rt);
                start_kinformer(args, on, client, server, &informer, &mut stats)?
            }
            Impl::KubeRs => start_kube_rs(rt, stream(client.client.clone()), &mut stats)?,
            Impl::ClientGo => {
                let Some(c) = client_go.clone() else {
                    bail!("the client-go harness is not running");
                };
                c.start()?;
                stats.push(LagStats::new()?);
                c as Arc<dyn Cache<K>>
            }
        };
        caches.push(cache);
    }
    let sync = super::progress::bar(args.quiet, args.objects as u64, "sync");
    let mut polls = 0u64;
    let synced = wait_for(Duration::from_secs(900), || {
        polls += 1;
        // Counting is not free everywhere (client-go copies its keys):
        // only for a bar that is shown.
        if !args.quiet
            && polls.is_multiple_of(20)
            && let Some(n) = caches[0].len()
        {
            sync.set_position(n as u64);
        }
        caches.iter().all(|c| c.synced())
    });
    let initial_sync_seconds = t0.elapsed().as_secs_f64();
    sync.finish();
    let stolen_sync_seconds = sync_steal.seconds();
    if !synced {
        caches.iter().for_each(|c| c.shutdown());
        bail!("initial sync did not finish within 900 s");
    }
    let steady_rss = process.rss_bytes();

    if args.burst.is_some() && !matches!(server, Server::Sim(..)) {
        bail!("--burst needs the sim source");
    }
    let record = || {
        for s in &stats {
            s.start_recording(args.lag_warmup());
        }
        client_go
            .as_ref()
            .map_or(Ok(()), |c| c.record(Some(args.lag_warmup())))
    };
    // A burst's updates are committed before the clock starts.
    let burst_made = match args.burst {
        Some(_) => Some(rt.block_on(server.churn(args))?),
        None => {
            record()?;
            None
        }
    };
    // Only what the readers look up: collecting every key and version of a
    // million objects here took CPU and some 70-100 MB just before the
    // clock starts.
    let keys = match args.readers {
        0 => Vec::new(),
        _ => caches[0].keys(100_000),
    };
    let reader_cache = Arc::clone(&caches[0]);
    let readers = match &client_go {
        Some(c) => {
            c.start_readers(args.readers)?;
            Readers::start(0, keys, |_| false)
        }
        None => Readers::start(args.readers, keys, move |k| reader_cache.contains(k)),
    };
    let batches_before = caches[0].batches();
    let start = Instant::now();
    let churn_steal = host::StealMeter::start();
    let changes = match burst_made {
        Some(n) => {
            // Counted, not timed: the lag would include the hold.
            for s in &stats {
                s.start_counting();
            }
            if let Some(c) = &client_go {
                c.record(None)?;
            }
            // Scripts that measure the burst alone open their window here
            // (benches/scripts/burstcpu.sh).
            eprintln!("released: the held watch events flow");
            rt.block_on(server.release())?;
            n
        }
        None => {
            let churn = super::progress::bar(
                args.quiet,
                u64::try_from(args.churn_duration().as_millis()).unwrap_or(u64::MAX),
                "churn ms",
            );
            let _ticker = super::progress::Ticker::start(churn);
            rt.block_on(server.churn(args))?
        }
    };
    let target = rt.block_on(server.target_rv())?;
    let mut polls = 0u64;
    let caught_up = wait_for(Duration::from_secs(120), || {
        polls += 1;
        if polls.is_multiple_of(400) {
            let seen: Vec<u64> = caches.iter().map(|c| c.seen_rv()).collect();
            tracing::info!(target, ?seen, "waiting for the cache to catch up");
        }
        caches.iter().all(|c| c.seen_rv() >= target && c.drained())
    });
    let churn_seconds = start.elapsed().as_secs_f64();
    let stolen_churn_seconds = churn_steal.seconds();
    let deltas_per_batch = caches[0]
        .batches()
        .zip(batches_before)
        .and_then(|((d1, b1), (d0, b0))| (b1 > b0).then(|| (d1 - d0) as f64 / (b1 - b0) as f64));
    let reads = readers.stop()
        + match &client_go {
            Some(c) => c.finish(&stats[0])?,
            None => 0,
        };
    if !caught_up {
        tracing::warn!("the cache did not reach the source's resourceVersion within 120 s");
    }

    let peak_before_relist = process.peak_rss_bytes();
    let relist = if args.relist {
        measure_relist(rt, server, &caches)?
    } else {
        None
    };

    // The harness's own comparison (the truth map, every cache's key list)
    // is left out of the informer's peak, and reported apart.
    let peak_rss = process.peak_rss_bytes().max(peak_before_relist);
    // After the peak is taken: the decoded objects a compact cache keeps
    // while it is read are bounded, but not the informer's own memory.
    let get_latency = caches[0].get_latency(&caches[0].keys(GET_SAMPLE));
    if let Some(path) = &args.keys_out {
        let mut out = String::new();
        for (k, v) in caches[0].keys_and_versions() {
            out.push_str(&format!("{k} {}\n", v.unwrap_or_default()));
        }
        std::fs::write(path, out).context("writing the cache's keys")?;
    }
    let truth = match args.keys_out {
        // A replica's cache is one shard: the parent compares the union.
        Some(_) => HashMap::new(),
        None => rt.block_on(server.truth())?,
    };
    let mut mismatches = usize::MAX;
    for attempt in 0..if args.keys_out.is_some() { 0 } else { 10 } {
        mismatches = caches
            .iter()
            .map(|c| {
                let pairs = c.keys_and_versions();
                compare(
                    pairs.iter().map(|(k, v)| (k.as_str(), v.as_deref())),
                    &truth,
                )
            })
            .sum();
        if mismatches == 0 {
            break;
        }
        tracing::info!(attempt, mismatches, "cache not yet converged");
        std::thread::sleep(Duration::from_secs(1));
    }
    let faults_injected = rt.block_on(server.faults_injected())?;
    let lag = stats[0].lag.lock().figures();
    let report = Report {
        source: server.source().into(),
        implementation: args.implementation.as_str().into(),
        object_arenas: args.object_arenas && args.implementation == Impl::Kinformer,
        kind: args.kind.clone(),
        objects: args.objects,
        sim_history: matches!(server, Server::Sim(..)).then_some(args.sim_history),
        sim_watch_chunks: matches!(server, Server::Sim(..))
            .then(|| args.sim_watch_chunks.as_str().to_string()),
        encoding: Some(if args.protobuf() { "protobuf" } else { "json" }.into()),
        watch_transport: (args.implementation == Impl::Kinformer)
            .then(|| args.watch_transport.as_str().to_string()),
        informers: caches.len(),
        handlers: args.handlers,
        settle_seconds: settled.waited.as_secs_f64(),
        settled: settled.quiet,
        stolen_sync_seconds,
        stolen_churn_seconds,
        initial_sync_seconds,
        changes_made: changes,
        burst: args.burst.is_some(),
        updates_per_second: stats[0].recorded.load(Ordering::Relaxed) as f64 / churn_seconds,
        lag_p50_us: lag.p50_us,
        lag_p99_us: lag.p99_us,
        lag_warmup_seconds: args.lag_warmup().as_secs_f64(),
        lag_worst_per_tick_us: lag.worst_per_tick_us,
        reads_per_second: reads as f64 / churn_seconds,
        peak_rss_bytes: peak_rss,
        peak_rss_with_check_bytes: process.peak_rss_bytes().max(peak_rss),
        rss_before_bytes: rss_before,
        steady_rss_bytes: steady_rss,
        relist_rss_before_bytes: relist.map(|r| r.0),
        relist_peak_rss_bytes: relist.map(|r| r.1),
        relist_peak_ratio: relist.map(|r| r.1 as f64 / r.0.max(1) as f64),
        bytes_per_object: steady_rss.saturating_sub(rss_before)
            / (args.objects.max(1) * caches.len()) as u64,
        cpu_seconds: process.cpu_seconds() - cpu_before,
        relists: caches.iter().map(|c| c.relists()).sum(),
        watch_restarts: caches.iter().map(|c| c.watch_restarts()).sum(),
        faults_injected,
        handler_panics: caches.iter().map(|c| c.handler_panics()).sum(),
        deltas_per_batch,
        cache_matches_source: mismatches == 0,
        compact: args.compact,
        get_cold_p50_ns: get_latency.map(|g| g.cold_p50_ns),
        get_cold_p99_ns: get_latency.map(|g| g.cold_p99_ns),
        get_hot_p50_ns: get_latency.map(|g| g.hot_p50_ns),
    };
    caches.iter().for_each(|c| c.shutdown());
    Ok(report)
}

/// One kinformer informer: its own factory (so `--informers N` opens N
/// watches), its reflector, `--handlers` lag-recording handlers.
fn start_kinformer<K>(
    args: &LoadtestArgs,
    rt: &tokio::runtime::Runtime,
    client: &Connection,
    server: &Server,
    informer: &impl Fn(&SharedInformerFactory) -> Made<K>,
    stats: &mut Vec<Arc<LagStats>>,
) -> anyhow::Result<Arc<dyn Cache<K>>>
where
    K: Resource<DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let factory = kinformer_factory(args, rt, client, server);
    match informer(&factory) {
        Made::Plain(informer) => {
            let registrations = lag_handlers(args, stats, |h| informer.add_event_handler(h))?;
            factory.start()?;
            Ok(Arc::new(KinformerCache {
                factory,
                informer,
                registrations,
            }))
        }
        Made::Compact(compact) => {
            let registrations = lag_handlers(args, stats, |h| compact.add_event_handler(h))?;
            factory.start()?;
            Ok(Arc::new(CompactCache {
                lister: compact.lister(),
                inner: KinformerCache {
                    factory,
                    informer: compact.informer().clone(),
                    registrations,
                },
            }))
        }
    }
}

/// `--handlers` lag-recording handlers, each registered by `add`.
fn lag_handlers<R>(
    args: &LoadtestArgs,
    stats: &mut Vec<Arc<LagStats>>,
    add: impl Fn(LagHandler) -> Result<R, kinformer::InformerError>,
) -> anyhow::Result<Vec<R>> {
    (0..args.handlers.max(1))
        .map(|_| {
            let s = LagStats::new()?;
            let registration = add(LagHandler(Arc::clone(&s)))?;
            stats.push(s);
            Ok(registration)
        })
        .collect()
}

/// The factory of a kinformer informer under test, configured from the
/// load test's options (reflectors on `rt`), not started.
pub(crate) fn kinformer_factory(
    args: &LoadtestArgs,
    rt: &tokio::runtime::Runtime,
    client: &Connection,
    server: &Server,
) -> SharedInformerFactory {
    let mut tuning = Tuning::default().runtime(rt.handle().clone());
    if let Some(t) = args.threads {
        tuning = tuning.threads_per_informer(t);
    }
    if let Some(t) = args.decode_threads {
        tuning = tuning.decode_threads(t);
    }
    let mut b = SharedInformerFactory::builder(client.client.clone())
        .tuning(tuning)
        .builtin_indexes(!args.no_builtin_indexes);
    if let Some(ns) = server.namespace() {
        b = b.namespace(ns);
    }
    if args.transform == TransformArg::StripManagedFields {
        b = b.transform_meta(strip_managed_fields);
    }
    if let Some(direct) = &client.direct {
        b = b.direct_watches(direct.clone());
    }
    if args.whole_release {
        // The load test's informers hold `Pod`s or `PartialObjectMeta<Pod>`s.
        b = b
            .release_objects_whole::<k8s_openapi::api::core::v1::Pod>()
            .release_objects_whole::<kube::core::PartialObjectMeta<k8s_openapi::api::core::v1::Pod>>();
    }
    b = b.reflector_config(
        kinformer::ReflectorConfig::default()
            .watch_list(!args.no_watch_list)
            .protobuf(args.protobuf())
            .skip_managed_fields(args.transform == TransformArg::SkipManagedFields),
    );
    b.build()
}

/// Forces one relist (every watch answered 410) once the caches are idle
/// and returns (RSS before, peak RSS during the relist), or `None` when the
/// source cannot force one or the kernel does not let the peak be reset.
fn measure_relist<K: 'static>(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    caches: &[Arc<dyn Cache<K>>],
) -> anyhow::Result<Option<(u64, u64)>> {
    let before = Proc::This.rss_bytes();
    if !Proc::This.reset_peak_rss() {
        tracing::warn!(
            "cannot reset the peak RSS (/proc/self/clear_refs); relist peak not measured"
        );
        return Ok(None);
    }
    let relists: Vec<u64> = caches.iter().map(|c| c.relists()).collect();
    if !rt.block_on(server.force_relist())? {
        return Ok(None);
    }
    let done = wait_for(Duration::from_secs(300), || {
        caches
            .iter()
            .zip(&relists)
            .all(|(c, r)| c.relists() > *r && c.drained())
    });
    if !done {
        bail!("the relist did not finish within 300 s");
    }
    Ok(Some((before, Proc::This.peak_rss_bytes())))
}

/// One kube-rs reflector Store fed by kube's watcher; its "handler" is the
/// stream consumer, as in a kube-rs controller.
fn start_kube_rs<K>(
    rt: &tokio::runtime::Runtime,
    events: WatchStream<K>,
    stats: &mut Vec<Arc<LagStats>>,
) -> anyhow::Result<Arc<dyn Cache<K>>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let ready = Arc::new(AtomicU64::new(0));
    let feed = Arc::new(Feed::default());
    let s = LagStats::new()?;
    let handler = LagHandler(Arc::clone(&s));
    stats.push(s);
    let mut events = events.reflect(writer).boxed();
    let (r, f) = (Arc::clone(&ready), Arc::clone(&feed));
    let task = rt.spawn(async move {
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => {}
                Ok(Event::InitDone) => {
                    // Counted when a (re)list has completed, as kinformer's
                    // reflector counts it.
                    f.inits.fetch_add(1, Ordering::Relaxed);
                    r.store(1, Ordering::SeqCst);
                }
                Ok(Event::InitApply(o) | Event::Apply(o) | Event::Delete(o)) => {
                    f.saw(&o);
                    handler.observe(&o);
                }
                Err(e) => {
                    f.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(error = %e, "watch error");
                }
            }
        }
    });
    Ok(Arc::new(KubeRsCache {
        store,
        ready,
        feed,
        task,
    }))
}

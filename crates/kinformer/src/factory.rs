//! [`SharedInformerFactory`]: one shared informer per (type, namespace,
//! selectors), started, synced and shut down together.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kinformer_compact::{Compact, CompactInformer, DEFAULT_HOT_CAPACITY, HotSet};
use kinformer_core::{SharedIndexInformer, Transform, builtin_indexers};
use kinformer_reflector::{
    CancellationToken, DecodePool, Decoders, DirectWatch, ListWatchTarget, OwnsPartsAlone,
    Reflector, ReflectorConfig, ReflectorError, ReflectorMetrics, ReflectorStatus, ShardSelector,
    WatchErrorHandler,
};
use kube::Client;
use kube::core::{ApiResource, DynamicObject, PartialObjectMeta};
use kube_core::Resource;
use parking_lot::Mutex;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;

use crate::error::FactoryError;
use crate::health::{DEFAULT_STALE_AFTER, FactoryHealth, InformerHealth};
use crate::managed::{Managed, ManagedInformer};
use crate::metrics::FactoryCollector;
use crate::options::{InformerOptions, MetaTransform};
use crate::tuning::Tuning;

/// Configures a [`SharedInformerFactory`].
pub struct FactoryBuilder {
    client: Client,
    defaults: InformerOptions,
    resync: Option<Duration>,
    meta_transform: Option<MetaTransform>,
    reflector: ReflectorConfig,
    drop_managed_fields: bool,
    on_watch_error: Option<WatchErrorHandler>,
    direct: Option<DirectWatch>,
    tuning: Tuning,
    builtin_indexes: bool,
    release_whole: WholeTypes,
    stale_after: Duration,
}

/// Installs the whole-releasing reclaimer in an informer of one type.
type ReleaseWhole<K> = fn(&DecodePool, &SharedIndexInformer<K>) -> bool;

/// The types [`FactoryBuilder::release_objects_whole`] was called with, each
/// with its [`ReleaseWhole`] (a `ReleaseWhole<K>` behind `Any`).
type WholeTypes = HashMap<TypeId, Arc<dyn std::any::Any + Send + Sync>>;

impl FactoryBuilder {
    /// A builder for `config`'s cluster, the fast way: LISTs through a
    /// [`Client`] built from `config`, watches on connections of their own
    /// ([`direct_watches`](Self::direct_watches) with
    /// [`DirectWatch::from_config`]). Where `config` rules direct watches
    /// out (a proxy; `https` without this crate's default `rustls-tls`
    /// feature) watches go through the client, and a log line says why.
    pub fn from_config(config: kube::Config) -> Result<Self, FactoryError> {
        let direct = match DirectWatch::from_config(&config) {
            Ok(direct) => Some(direct),
            Err(e) => {
                tracing::warn!(error = %e, "watches go through kube's client");
                None
            }
        };
        let client = Client::try_from(config).map_err(FactoryError::Client)?;
        let mut builder = SharedInformerFactory::builder(client);
        builder.direct = direct;
        Ok(builder)
    }

    /// Only this namespace, for informers created without options.
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.defaults.namespace = Some(ns.into());
        self
    }

    /// A label selector for informers created without options (client-go's
    /// list tweak).
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.defaults = self.defaults.labels(selector);
        self
    }

    /// A field selector for informers created without options.
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.defaults = self.defaults.fields(selector);
        self
    }

    /// The resync period of handlers registered without one (zero: none).
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// Drop `metadata.managedFields` from every object the factory's
    /// informers cache (default off): usually the largest part of an
    /// object's metadata, and rarely read by controllers. They are skipped
    /// while decoding (JSON and protobuf), so they cost neither decode time
    /// nor memory; this is the way to drop them.
    pub fn drop_managed_fields(mut self) -> Self {
        self.drop_managed_fields = true;
        self
    }

    /// A metadata transform applied to every object of every informer
    /// before it is cached. Must be idempotent. (To drop `managedFields`,
    /// use [`drop_managed_fields`](Self::drop_managed_fields), which skips
    /// them while decoding instead of decoding and then dropping them.)
    pub fn transform_meta(
        mut self,
        f: impl Fn(&mut kube_core::ObjectMeta) + Send + Sync + 'static,
    ) -> Self {
        self.meta_transform = Some(Arc::new(f));
        self
    }

    /// Reflector settings (page size, WatchList, timeouts, backoff).
    pub fn reflector_config(mut self, config: ReflectorConfig) -> Self {
        self.reflector = config;
        self
    }

    /// The reflectors send their watches through `direct` (connections of
    /// their own, read without hyper's client; see
    /// [`kinformer_reflector::direct`]); LISTs stay on the client.
    pub fn direct_watches(mut self, direct: DirectWatch) -> Self {
        self.direct = Some(direct);
        self
    }

    /// Called with every list/watch error the reflectors recover from.
    pub fn on_watch_error(mut self, f: impl Fn(&ReflectorError) + Send + Sync + 'static) -> Self {
        self.on_watch_error = Some(Arc::new(f));
        self
    }

    /// Threads, runtime and object layout (see [`Tuning`]; the defaults
    /// are what the load test measures).
    pub fn tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = tuning;
        self
    }

    /// Lets the factory's informers of `K` release a replaced object whole
    /// (default off; call once per type): when the object arenas are the
    /// global allocator (`kinformer_alloc::ObjectArenas`) and an object's
    /// parts all sit in one chunk, the drop job that holds its last
    /// reference gives the chunk back at once and forgets the object,
    /// instead of walking its tree to free each part (see
    /// `kinformer_alloc::whole`; 1.16× per typed Pod replaced in
    /// `--bench replace`).
    ///
    /// Safe: `K` promises to own its parts alone ([`OwnsPartsAlone`],
    /// implemented for k8s-openapi's common types, `DynamicObject` and
    /// `PartialObjectMeta`), and an informer releases whole only while
    /// every object of its cache came straight from the reflector's
    /// decoders (an object given to its queue or indexer by other code, or
    /// changed by a transform, turns it off for that informer; see
    /// `kinformer_core::provenance`). Informers with a transform (compact
    /// informers among them) never do.
    pub fn release_objects_whole<K>(mut self) -> Self
    where
        K: Resource + OwnsPartsAlone + Send + Sync + 'static,
    {
        let install: ReleaseWhole<K> = DecodePool::release_whole_into::<K>;
        self.release_whole
            .insert(TypeId::of::<K>(), Arc::new(install));
        self
    }

    /// Register the namespace, label and owner-UID indexes on every informer
    /// (default on; the namespaced lister and label lists use them).
    pub fn builtin_indexes(mut self, on: bool) -> Self {
        self.builtin_indexes = on;
        self
    }

    /// How long an informer's reflector may go without watching (listing,
    /// backing off, failing) before [`SharedInformerFactory::health`] calls
    /// its cache stale and the factory not ready (default
    /// [`DEFAULT_STALE_AFTER`], 5 minutes: past the reflector's longest
    /// backoff and idle timeout).
    pub fn stale_after(mut self, d: Duration) -> Self {
        self.stale_after = d;
        self
    }

    /// Builds the factory.
    pub fn build(self) -> SharedInformerFactory {
        SharedInformerFactory {
            inner: Arc::new(Inner {
                client: self.client,
                defaults: self.defaults,
                resync: self.resync,
                meta_transform: self.meta_transform,
                reflector: {
                    let skip = self.reflector.skip_managed_fields || self.drop_managed_fields;
                    self.reflector.skip_managed_fields(skip)
                },
                on_watch_error: self.on_watch_error,
                direct: self.direct,
                runtime: Mutex::new(self.tuning.runtime.clone()),
                tuning: self.tuning,
                decode_pool: Mutex::new(None),
                builtin_indexes: self.builtin_indexes,
                release_whole: self.release_whole,
                stale_after: self.stale_after,
                owned_runtime: Mutex::new(None),
                informers: Mutex::new(Vec::new()),
                transforms: Mutex::new(HashMap::new()),
                hot_sets: Mutex::new(Vec::new()),
                started: AtomicBool::new(false),
                stopped: AtomicBool::new(false),
                token: CancellationToken::new(),
                tasks: Mutex::new(Vec::new()),
            }),
        }
    }
}

type Key = (TypeId, ListWatchTarget);

/// One informer's health and counters at one moment.
pub(crate) struct Observation {
    pub(crate) health: InformerHealth,
    pub(crate) reflector: ReflectorMetrics,
    pub(crate) informer: kinformer_core::InformerMetrics,
    pub(crate) cached: usize,
}

struct Inner {
    client: Client,
    defaults: InformerOptions,
    resync: Option<Duration>,
    meta_transform: Option<MetaTransform>,
    reflector: ReflectorConfig,
    on_watch_error: Option<WatchErrorHandler>,
    direct: Option<DirectWatch>,
    tuning: Tuning,
    decode_pool: Mutex<Option<Arc<DecodePool>>>,
    builtin_indexes: bool,
    release_whole: WholeTypes,
    stale_after: Duration,
    runtime: Mutex<Option<Handle>>,
    owned_runtime: Mutex<Option<Runtime>>,
    informers: Mutex<Vec<(Key, Arc<dyn Managed>)>>,
    transforms: Mutex<HashMap<TypeId, Box<dyn std::any::Any + Send + Sync>>>,
    /// The hot set of each compact informer.
    hot_sets: Mutex<Vec<(Key, Arc<dyn Any + Send + Sync>)>>,
    started: AtomicBool,
    stopped: AtomicBool,
    token: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.token.cancel();
        if let Some(rt) = self.owned_runtime.get_mut().take() {
            rt.shutdown_background();
        }
    }
}

/// Creates and shares informers: asking twice for the same type, namespace
/// and selectors returns the same informer (one cache, one watch). Cheap
/// to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::{ConfigMap, Pod};
/// use kinformer::{FactoryBuilder, InformerOptions};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let factory = FactoryBuilder::from_config(kube::Config::infer().await?)?
///     .namespace("prod")
///     .default_resync(Duration::from_secs(300))
///     .drop_managed_fields()
///     .build();
/// let pods = factory.informer::<Pod>();
/// assert!(factory.informer::<Pod>().indexer().is_empty()); // the same informer
/// let web = factory.informer_with::<ConfigMap>(InformerOptions::default().labels("app=web"));
/// factory.start()?;
/// factory.wait_for_cache_sync(Duration::from_secs(30)).await?;
/// println!("{} pods, {} web configmaps", pods.indexer().len(), web.indexer().len());
/// factory.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SharedInformerFactory {
    inner: Arc<Inner>,
}

fn is_cluster_scoped<K: Resource>() -> bool
where
    K::Scope: 'static,
{
    TypeId::of::<K::Scope>() == TypeId::of::<k8s_openapi::ClusterResourceScope>()
}

fn informer_name(target: &ListWatchTarget) -> String {
    let mut name = target.url_path().to_string();
    let mut sep = '?';
    let shard = target.shard_selector().map(ToString::to_string);
    for (k, v) in [
        ("labels", target.label_selector()),
        ("fields", target.field_selector()),
        ("shard", shard.as_deref()),
    ] {
        if let Some(v) = v {
            name.push(sep);
            name.push_str(&format!("{k}={v}"));
            sep = '&';
        }
    }
    if target.is_metadata_only() {
        name.push_str(" (metadata)");
    }
    name
}

fn thread_prefix(target: &ListWatchTarget) -> String {
    let plural = target.url_path().rsplit('/').next().unwrap_or("informer");
    plural.chars().take(8).collect()
}

impl SharedInformerFactory {
    /// A factory for the cluster [`kube::Config::infer`] finds (in-cluster,
    /// else the kubeconfig), with default options and direct watches: see
    /// [`FactoryBuilder::from_config`].
    pub async fn try_default() -> Result<Self, FactoryError> {
        let config = kube::Config::infer().await.map_err(FactoryError::Config)?;
        Ok(FactoryBuilder::from_config(config)?.build())
    }

    /// A factory with default options (all namespaces, no selectors, no
    /// resync) whose watches go through `client`. Where the
    /// [`kube::Config`] is at hand, [`try_default`](Self::try_default) and
    /// [`FactoryBuilder::from_config`] also watch on connections of their
    /// own, which is faster.
    pub fn new(client: Client) -> Self {
        Self::builder(client).build()
    }

    /// A builder for a factory with options.
    pub fn builder(client: Client) -> FactoryBuilder {
        FactoryBuilder {
            client,
            defaults: InformerOptions::default(),
            resync: None,
            meta_transform: None,
            reflector: ReflectorConfig::default(),
            drop_managed_fields: false,
            on_watch_error: None,
            direct: None,
            tuning: Tuning::default(),
            builtin_indexes: true,
            release_whole: HashMap::new(),
            stale_after: DEFAULT_STALE_AFTER,
        }
    }

    /// The shared informer of `K` with the factory's options, created on
    /// first request. Informers created after [`start`](Self::start) are
    /// started at once.
    pub fn informer<K>(&self) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Send + Sync + 'static,
        K::Scope: 'static,
    {
        self.informer_with::<K>(self.inner.defaults.clone())
    }

    /// The shared informer of `K` for explicit options.
    pub fn informer_with<K>(&self, options: InformerOptions) -> SharedIndexInformer<K>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Send + Sync + 'static,
        K::Scope: 'static,
    {
        let ns = options
            .namespace
            .as_deref()
            .filter(|_| !is_cluster_scoped::<K>());
        self.get_or_create::<K>(
            Self::target::<K>(&(), ns, &options),
            Decoders::serde(),
            None,
        )
    }

    /// The shared informer of a dynamic resource (e.g. a CRD found through
    /// discovery) with the factory's options. For a cluster-scoped
    /// resource use [`dynamic_informer_with`](Self::dynamic_informer_with)
    /// without a namespace.
    pub fn dynamic_informer(&self, resource: &ApiResource) -> SharedIndexInformer<DynamicObject> {
        self.dynamic_informer_with(resource, self.inner.defaults.clone())
    }

    /// The shared informer of a dynamic resource for explicit options.
    pub fn dynamic_informer_with(
        &self,
        resource: &ApiResource,
        options: InformerOptions,
    ) -> SharedIndexInformer<DynamicObject> {
        let target =
            Self::target::<DynamicObject>(resource, options.namespace.as_deref(), &options);
        self.get_or_create::<DynamicObject>(target, Decoders::dynamic_object(), None)
    }

    /// The shared metadata-only informer of `K` (`PartialObjectMeta<K>`):
    /// the server sends only metadata, the cache holds a fraction of the
    /// memory of full objects. It lists and watches in Kubernetes' protobuf
    /// encoding unless [`ReflectorConfig::protobuf`] is turned off (a
    /// server that answers in JSON is read as JSON).
    pub fn metadata_informer<K>(&self) -> SharedIndexInformer<PartialObjectMeta<K>>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
        K::Scope: 'static,
    {
        self.metadata_informer_with::<K>(self.inner.defaults.clone())
    }

    /// The shared metadata-only informer of `K` for explicit options.
    pub fn metadata_informer_with<K>(
        &self,
        options: InformerOptions,
    ) -> SharedIndexInformer<PartialObjectMeta<K>>
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
        K::Scope: 'static,
    {
        let ns = options
            .namespace
            .as_deref()
            .filter(|_| !is_cluster_scoped::<K>());
        let target = Self::target::<K>(&(), ns, &options).metadata_only(true);
        self.get_or_create::<PartialObjectMeta<K>>(target, Decoders::partial_object_meta(), None)
    }

    /// The shared compact informer of `K` with the factory's options: its
    /// cache keeps each object packed (metadata decoded, the rest
    /// compressed; see [`kinformer_compact`](crate::compact)), handlers
    /// receive whole objects and listers decode on demand. The factory's
    /// metadata transform and the transform set for `K`
    /// ([`set_transform`](Self::set_transform)) run before packing.
    pub fn compact_informer<K>(&self) -> CompactInformer<K>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + Serialize
            + DeserializeOwned
            + Send
            + Sync
            + 'static,
        K::Scope: 'static,
    {
        self.compact_informer_with::<K>(self.inner.defaults.clone())
    }

    /// The shared compact informer of `K` for explicit options.
    pub fn compact_informer_with<K>(&self, options: InformerOptions) -> CompactInformer<K>
    where
        K: Resource<DynamicType = ()>
            + Clone
            + Serialize
            + DeserializeOwned
            + Send
            + Sync
            + 'static,
        K::Scope: 'static,
    {
        let ns = options
            .namespace
            .as_deref()
            .filter(|_| !is_cluster_scoped::<K>());
        self.get_or_create_compact::<K>(Self::target::<K>(&(), ns, &options), Decoders::serde())
    }

    /// The shared compact informer of a dynamic resource for explicit
    /// options (see [`compact_informer`](Self::compact_informer)).
    pub fn dynamic_compact_informer_with(
        &self,
        resource: &ApiResource,
        options: InformerOptions,
    ) -> CompactInformer<DynamicObject> {
        let target =
            Self::target::<DynamicObject>(resource, options.namespace.as_deref(), &options);
        self.get_or_create_compact::<DynamicObject>(target, Decoders::serde())
    }

    fn get_or_create_compact<K>(
        &self,
        target: ListWatchTarget,
        decoders: Decoders<Compact<K>>,
    ) -> CompactInformer<K>
    where
        K: Resource + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        let key: Key = (TypeId::of::<Compact<K>>(), target.clone());
        // Held while the informer is found or made: one hot set per informer.
        let mut hot_sets = self.inner.hot_sets.lock();
        let existing = hot_sets
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, h)| Arc::clone(h).downcast::<HotSet<K>>().ok());
        if let Some(hot) = existing {
            let informer = self.get_or_create::<Compact<K>>(target, decoders, None);
            return CompactInformer::new(informer, hot);
        }
        let hot = Arc::new(HotSet::new(DEFAULT_HOT_CAPACITY));
        let typed: Option<Transform<K>> = self
            .inner
            .transforms
            .lock()
            .get(&TypeId::of::<K>())
            .and_then(|t| t.downcast_ref::<Transform<K>>())
            .cloned();
        let packer: Transform<Compact<K>> =
            Arc::new(CompactInformer::packer(Arc::clone(&hot), typed));
        let informer = self.get_or_create::<Compact<K>>(target, decoders, Some(packer));
        hot_sets.push((key, Arc::clone(&hot) as Arc<dyn Any + Send + Sync>));
        CompactInformer::new(informer, hot)
    }

    /// Registers a transform for informers of `K` created after this call
    /// (applied after the factory's metadata transform). Must be idempotent.
    pub fn set_transform<K: 'static>(&self, f: impl Fn(K) -> K + Send + Sync + 'static) {
        let t: Transform<K> = Arc::new(f);
        self.inner
            .transforms
            .lock()
            .insert(TypeId::of::<K>(), Box::new(t));
    }

    fn target<K: Resource>(
        dt: &K::DynamicType,
        ns: Option<&str>,
        options: &InformerOptions,
    ) -> ListWatchTarget {
        let mut t = ListWatchTarget::of::<K>(dt, ns);
        if let Some(l) = &options.label_selector {
            t = t.labels(l.clone());
        }
        if let Some(s) = &options.shard {
            t = t.shard(s.clone());
        }
        if let Some(f) = &options.field_selector {
            t = t.fields(f.clone());
        }
        t
    }

    /// The informer of `K` on `target`, made on first request. `finish`, if
    /// given, replaces the transform registered for `K` (the compact
    /// informer's packer, which runs that of the object's type itself).
    fn get_or_create<K>(
        &self,
        target: ListWatchTarget,
        decoders: Decoders<K>,
        finish: Option<Transform<K>>,
    ) -> SharedIndexInformer<K>
    where
        K: Resource + Clone + DeserializeOwned + Send + Sync + 'static,
    {
        let key: Key = (TypeId::of::<K>(), target.clone());
        let inner = &self.inner;
        let mut informers = inner.informers.lock();
        if let Some((_, m)) = informers.iter().find(|(k, _)| *k == key)
            && let Some(m) = m.as_any().downcast_ref::<ManagedInformer<K>>()
        {
            return m.informer().clone();
        }
        let mut name = informer_name(&target);
        // Two types on one target (say typed Pods and dynamic ones) would
        // share a name, and their metric series would collide: the later
        // one is told apart by its type.
        if informers.iter().any(|(_, m)| m.name() == name) {
            name.push_str(&format!(" [{}]", std::any::type_name::<K>()));
        }
        let mut builder = SharedIndexInformer::<K>::builder()
            .name(thread_prefix(&target))
            .threads(inner.tuning.threads)
            .default_resync(inner.resync);
        if inner.builtin_indexes {
            builder = builder.indexers(builtin_indexers());
        }
        let typed: Option<Transform<K>> = finish.or_else(|| {
            inner
                .transforms
                .lock()
                .get(&TypeId::of::<K>())
                .and_then(|t| t.downcast_ref::<Transform<K>>())
                .cloned()
        });
        let meta = inner.meta_transform.clone();
        let transformed = typed.is_some() || meta.is_some();
        if transformed {
            builder = builder.transform(move |mut obj: K| {
                if let Some(m) = &meta {
                    m(obj.meta_mut());
                }
                let obj = match &typed {
                    Some(t) => t(obj),
                    None => obj,
                };
                // Under the object arenas, what the transform kept is
                // packed into a chunk of its size, so the object does not
                // pin the chunk it was decoded into.
                let part = obj
                    .meta()
                    .name
                    .as_deref()
                    .map_or(std::ptr::null(), str::as_ptr);
                kinformer_alloc::scope::rehome(obj, part)
            });
        }
        let informer = builder.build();
        let mut reflector =
            Reflector::new(inner.client.clone(), target, Arc::clone(informer.queue()))
                .name(name.clone())
                .config(inner.reflector.clone())
                .decoders(decoders)
                .on_watch_error_shared(inner.on_watch_error.clone());
        if let Some(direct) = &inner.direct {
            reflector = reflector.direct_watches(direct.clone());
        }
        if let Some(pool) = self.decode_pool() {
            // Replaced objects go back to the decode thread that built them.
            let whole = inner
                .release_whole
                .get(&TypeId::of::<K>())
                .and_then(|f| f.downcast_ref::<ReleaseWhole<K>>())
                .filter(|_| !transformed);
            match whole {
                Some(install) => {
                    install(&pool, &informer);
                }
                None => {
                    informer.set_reclaimer(pool.reclaimer());
                }
            }
            reflector = reflector.decode_pool(pool);
        }
        let managed: Arc<dyn Managed> = Arc::new(ManagedInformer::new(
            name.clone(),
            informer.clone(),
            reflector,
        ));
        informers.push((key, Arc::clone(&managed)));
        drop(informers);
        tracing::debug!(informer = %name, "informer created");
        if inner.started.load(Ordering::SeqCst)
            && !inner.stopped.load(Ordering::SeqCst)
            && let Err(e) = self.start_one(&managed)
        {
            tracing::error!(informer = %name, error = %e, "could not start a late informer");
        }
        informer
    }

    /// The shared decode pool, started on first use (`None`: decode inline).
    fn decode_pool(&self) -> Option<Arc<DecodePool>> {
        if self.inner.tuning.decode_threads == 0 {
            return None;
        }
        let mut pool = self.inner.decode_pool.lock();
        if pool.is_none() {
            match DecodePool::new(self.inner.tuning.decode_threads, "kinformer-decode") {
                Ok(p) => *pool = Some(p),
                Err(e) => {
                    tracing::warn!(error = %e, "could not start decode threads; decoding inline");
                }
            }
        }
        pool.clone()
    }

    fn runtime(&self) -> Result<Handle, FactoryError> {
        let mut rt = self.inner.runtime.lock();
        if let Some(h) = rt.as_ref() {
            return Ok(h.clone());
        }
        let handle = match Handle::try_current() {
            Ok(h) => h,
            Err(_) => {
                let owned = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("kinformer-rt")
                    .enable_all()
                    .build()
                    .map_err(|e| FactoryError::Runtime(e.to_string()))?;
                let h = owned.handle().clone();
                *self.inner.owned_runtime.lock() = Some(owned);
                h
            }
        };
        *rt = Some(handle.clone());
        Ok(handle)
    }

    fn start_one(&self, managed: &Arc<dyn Managed>) -> Result<(), FactoryError> {
        let handle = self.runtime()?;
        if let Some(task) = managed.start(&handle, &self.inner.token)? {
            self.inner.tasks.lock().push(task);
        }
        Ok(())
    }

    /// Starts every informer created so far (threads and reflectors).
    /// Idempotent: informers already running are left alone.
    pub fn start(&self) -> Result<(), FactoryError> {
        if self.inner.stopped.load(Ordering::SeqCst) {
            return Err(FactoryError::ShutDown);
        }
        self.inner.started.store(true, Ordering::SeqCst);
        let informers = self.managed();
        for m in &informers {
            self.start_one(m)?;
        }
        Ok(())
    }

    /// Names of the informers whose cache has not synced yet.
    pub fn unsynced(&self) -> Vec<String> {
        self.inner
            .informers
            .lock()
            .iter()
            .filter(|(_, m)| !m.has_synced())
            .map(|(_, m)| m.name().to_string())
            .collect()
    }

    /// Whether every informer's cache has synced.
    pub fn has_synced(&self) -> bool {
        self.unsynced().is_empty()
    }

    /// What a wait ends with: shut down, synced, or still waiting for some.
    fn sync_result(&self, timeout: Duration) -> Result<(), FactoryError> {
        if self.inner.stopped.load(Ordering::SeqCst) {
            return Err(FactoryError::ShutDown);
        }
        let unsynced = self.unsynced();
        if unsynced.is_empty() {
            Ok(())
        } else {
            Err(FactoryError::SyncTimeout { timeout, unsynced })
        }
    }

    /// Waits until every informer created so far has synced and every
    /// handler registered on them has been handed its initial objects;
    /// after `timeout` fails naming the informers still unsynced. Each
    /// informer's pool and handler threads notify the wait (no polling).
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> Result<(), FactoryError> {
        let managed = self.managed();
        let all = async {
            for m in &managed {
                m.synced().await;
            }
        };
        // A timeout is told apart by what is still unsynced.
        let _ = tokio::time::timeout(timeout, all).await;
        self.sync_result(timeout)
    }

    /// Blocking form of [`wait_for_cache_sync`](Self::wait_for_cache_sync)
    /// (do not call it on an async runtime's thread).
    pub fn wait_for_cache_sync_blocking(&self, timeout: Duration) -> Result<(), FactoryError> {
        let start = Instant::now();
        for m in self.managed() {
            m.wait_synced_blocking(timeout.saturating_sub(start.elapsed()));
        }
        self.sync_result(timeout)
    }

    /// Names of every informer created.
    pub fn informer_names(&self) -> Vec<String> {
        self.inner
            .informers
            .lock()
            .iter()
            .map(|(_, m)| m.name().to_string())
            .collect()
    }

    /// The reflector counters of every informer, by name.
    pub fn reflector_metrics(&self) -> Vec<(String, ReflectorMetrics)> {
        self.inner
            .informers
            .lock()
            .iter()
            .map(|(_, m)| (m.name().to_string(), m.reflector_metrics()))
            .collect()
    }

    /// The reflector counters of `informer`, one of this factory's (`None`
    /// for an informer it did not create).
    pub fn reflector_metrics_of<K>(
        &self,
        informer: &SharedIndexInformer<K>,
    ) -> Option<ReflectorMetrics>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
    {
        self.find(informer).map(|m| m.reflector_metrics())
    }

    /// Moves `informer`, one of this factory's, to another shard while it
    /// runs (`None`: the whole collection), e.g. when this replica takes
    /// over a dead peer's range. Its reflector lists the new shard at once;
    /// the cache is not cleared, and handlers hear the objects that left the
    /// shard as deletes, those that entered it as adds, and the unchanged
    /// ones as resyncs. Before [`start`](Self::start), it sets the shard the
    /// informer starts with. `None` for an informer this factory did not
    /// create; otherwise whether the shard changed.
    pub fn reshard<K>(
        &self,
        informer: &SharedIndexInformer<K>,
        shard: Option<ShardSelector>,
    ) -> Option<bool>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
    {
        self.find(informer).map(|m| m.shard_control().set(shard))
    }

    /// The shard `informer`, one of this factory's, caches now (`None` for
    /// the whole collection, or an informer it did not create).
    pub fn shard_of<K>(&self, informer: &SharedIndexInformer<K>) -> Option<ShardSelector>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
    {
        self.find(informer)
            .and_then(|m| m.shard_control().current())
    }

    /// The reflector status of `informer` (phase, errors, relists), one of
    /// this factory's (`None` for an informer it did not create).
    pub fn reflector_status_of<K>(
        &self,
        informer: &SharedIndexInformer<K>,
    ) -> Option<ReflectorStatus>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
    {
        self.find(informer).map(|m| m.reflector_status())
    }

    /// The managed informer whose queue is `informer`'s.
    fn find<K>(&self, informer: &SharedIndexInformer<K>) -> Option<Arc<dyn Managed>>
    where
        K: Resource + DeserializeOwned + Send + Sync + 'static,
    {
        self.managed().into_iter().find(|m| {
            m.as_any()
                .downcast_ref::<ManagedInformer<K>>()
                .is_some_and(|mi| Arc::ptr_eq(mi.informer().queue(), informer.queue()))
        })
    }

    /// Every informer's health, and the answers to readiness and liveness
    /// probes (see [`crate::health`]). Cheap: a few counters per informer.
    pub fn health(&self) -> FactoryHealth {
        let informers = self.observe().into_iter().map(|o| o.health).collect();
        FactoryHealth {
            started: self.inner.started.load(Ordering::SeqCst),
            shut_down: self.inner.stopped.load(Ordering::SeqCst),
            informers,
        }
    }

    /// Registers this factory's collector with `registry`: each scrape
    /// then reads every informer's counters (see [`crate::metrics`]).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register_collector(Box::new(FactoryCollector::new(self.clone())));
    }

    /// Every informer created so far (a copy of the list, so that none is
    /// driven under its lock).
    fn managed(&self) -> Vec<Arc<dyn Managed>> {
        self.inner
            .informers
            .lock()
            .iter()
            .map(|(_, m)| Arc::clone(m))
            .collect()
    }

    /// Every informer's health and counters, read now.
    pub(crate) fn observe(&self) -> Vec<Observation> {
        let informers = self.managed();
        informers
            .iter()
            .map(|m| {
                let informer = m.informer_metrics();
                let health = InformerHealth::new(
                    m.name().to_string(),
                    m.has_synced(),
                    m.reflector_status(),
                    &informer,
                    self.inner.stale_after,
                );
                Observation {
                    health,
                    reflector: m.reflector_metrics(),
                    informer,
                    cached: m.cached_objects(),
                }
            })
            .collect()
    }

    fn begin_shutdown(&self) -> (Vec<JoinHandle<()>>, Vec<Arc<dyn Managed>>) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        self.inner.token.cancel();
        let tasks = std::mem::take(&mut *self.inner.tasks.lock());
        (tasks, self.managed())
    }

    fn finish_shutdown(&self, informers: Vec<Arc<dyn Managed>>) {
        for m in informers {
            m.shutdown();
        }
        // The reflectors have stopped: this is the pool's last handle, and
        // dropping it joins the decode threads.
        self.inner.decode_pool.lock().take();
        if let Some(rt) = self.inner.owned_runtime.lock().take() {
            // Dropping a runtime inside another one panics: do it on a thread.
            let _ = std::thread::spawn(move || rt.shutdown_timeout(Duration::from_secs(5))).join();
        }
        tracing::debug!("informer factory shut down");
    }

    /// Stops every reflector (closing its watch), waits for their tasks,
    /// then stops and joins every informer thread. Idempotent.
    pub async fn shutdown(&self) {
        let (tasks, informers) = self.begin_shutdown();
        for t in tasks {
            let _ = t.await;
        }
        self.finish_shutdown(informers);
    }

    /// Blocking form of [`shutdown`](Self::shutdown) (do not call it on an
    /// async runtime's thread).
    pub fn shutdown_blocking(&self) {
        let (tasks, informers) = self.begin_shutdown();
        for t in tasks {
            let _ = futures::executor::block_on(t);
        }
        self.finish_shutdown(informers);
    }
}

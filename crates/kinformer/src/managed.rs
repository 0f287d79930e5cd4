//! One informer and its reflector as the factory keeps them, behind a
//! type-erased [`Managed`] so informers of different types share one map.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use kinformer_core::{InformerMetrics, SharedIndexInformer};
use kinformer_reflector::{
    CancellationToken, MetricsHandle, Reflector, ReflectorMetrics, ReflectorStatus, ShardControl,
};
use kube_core::Resource;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::runtime::Handle;
use tokio::task::JoinHandle;

use crate::error::FactoryError;

/// What the factory needs to drive an informer of any type.
pub trait Managed: Send + Sync {
    /// The informer's name (resource path and selectors).
    fn name(&self) -> &str;
    /// Whether its cache has synced and every registered handler has been
    /// handed the initial list.
    fn has_synced(&self) -> bool;
    /// Resolves once [`has_synced`](Self::has_synced) is true or the
    /// informer shut down (notified, not polled).
    fn synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
    /// Blocks until [`has_synced`](Self::has_synced), shutdown or
    /// `timeout`; whether it has synced.
    fn wait_synced_blocking(&self, timeout: Duration) -> bool;
    /// Starts its threads and spawns its reflector on `runtime` (once).
    fn start(
        &self,
        runtime: &Handle,
        token: &CancellationToken,
    ) -> Result<Option<JoinHandle<()>>, FactoryError>;
    /// Stops its threads (the reflector must have stopped already).
    fn shutdown(&self);
    /// The reflector's counters.
    fn reflector_metrics(&self) -> ReflectorMetrics;
    /// The handle that changes the reflector's shard.
    fn shard_control(&self) -> ShardControl;
    /// The reflector's status.
    fn reflector_status(&self) -> ReflectorStatus;
    /// The informer's counters.
    fn informer_metrics(&self) -> InformerMetrics;
    /// How many objects its cache holds.
    fn cached_objects(&self) -> usize;
    /// The informer, as `&SharedIndexInformer<K>`.
    fn as_any(&self) -> &dyn Any;
}

/// An informer of `K` and the reflector that will feed it.
pub struct ManagedInformer<K: Resource + Send + Sync + 'static> {
    name: String,
    informer: SharedIndexInformer<K>,
    reflector: Mutex<Option<Reflector<K>>>,
    metrics: MetricsHandle,
    shard: ShardControl,
}

impl<K> ManagedInformer<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    /// Pairs an informer with the reflector feeding its queue.
    pub fn new(name: String, informer: SharedIndexInformer<K>, reflector: Reflector<K>) -> Self {
        Self {
            name,
            informer,
            metrics: reflector.metrics(),
            shard: reflector.shard_control(),
            reflector: Mutex::new(Some(reflector)),
        }
    }

    /// The informer.
    pub fn informer(&self) -> &SharedIndexInformer<K> {
        &self.informer
    }
}

impl<K> Managed for ManagedInformer<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn has_synced(&self) -> bool {
        self.informer.has_synced_with_handlers()
    }

    fn synced(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.informer.synced_with_handlers())
    }

    fn wait_synced_blocking(&self, timeout: Duration) -> bool {
        self.informer.wait_synced_with_handlers_blocking(timeout)
    }

    fn start(
        &self,
        runtime: &Handle,
        token: &CancellationToken,
    ) -> Result<Option<JoinHandle<()>>, FactoryError> {
        let Some(reflector) = self.reflector.lock().take() else {
            return Ok(None);
        };
        self.informer.start()?;
        tracing::debug!(informer = %self.name, "starting reflector");
        Ok(Some(runtime.spawn(reflector.run(token.child_token()))))
    }

    fn shutdown(&self) {
        self.reflector.lock().take();
        self.informer.shutdown();
    }

    fn reflector_metrics(&self) -> ReflectorMetrics {
        self.metrics.get()
    }

    fn shard_control(&self) -> ShardControl {
        self.shard.clone()
    }

    fn reflector_status(&self) -> ReflectorStatus {
        self.metrics.status()
    }

    fn informer_metrics(&self) -> InformerMetrics {
        self.informer.metrics()
    }

    fn cached_objects(&self) -> usize {
        self.informer.indexer().len()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

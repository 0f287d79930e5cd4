//! A controller that reads one kind and writes another: every Namespace
//! labelled `kinformer.example/settings=enabled` gets a ConfigMap
//! `settings` naming it; the ConfigMap is owned by its Namespace, so an edit
//! or a delete of it is undone, and it is deleted when the label goes.
//!
//! It shows the pieces of `kinformer::controller` together: a primary
//! informer (Namespaces), an owned one (the managed ConfigMaps, found back
//! through the owner UID), reads from the caches, writes through
//! `kube::Api`, and read-your-writes with a [`VersionWaiter`], so that the
//! next reconcile of the key never sees the cache from before its own write.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kinformer::controller::{Action, Controller, ControllerHandle, ControllerStats, VersionWaiter};
use kinformer::{InformerOptions, ObjectKey, SharedIndexInformer, SharedInformerFactory};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

/// The label that asks for a settings ConfigMap.
pub const LABEL: &str = "kinformer.example/settings";
/// The label value that asks for it.
pub const ENABLED: &str = "enabled";
/// The managed ConfigMap's name in each namespace.
pub const CONFIGMAP: &str = "settings";
/// The label on every managed ConfigMap (the ConfigMap informer watches
/// only these).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by=kinformer-example";

/// How long a reconcile waits for the cache to show its own write.
const READ_YOUR_WRITES: Duration = Duration::from_secs(10);

/// What every reconcile needs: the writer, the cache of ConfigMaps and the
/// waiter for its own writes.
pub struct Context {
    client: kube::Client,
    configmaps: SharedIndexInformer<ConfigMap>,
    waiter: VersionWaiter<ConfigMap>,
}

/// A reconcile's failure: a write the server refused, or a cache that did
/// not catch up with it.
#[derive(Debug)]
pub enum Error {
    /// The apiserver refused a write.
    Kube(kube::Error),
    /// The cache did not show a write in time.
    Stale(kinformer::controller::ControllerError),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kube(e) => write!(f, "write refused: {e}"),
            Self::Stale(e) => write!(f, "cache behind its own write: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// The ConfigMap a labelled namespace should have.
pub fn desired(ns: &Namespace) -> Option<ConfigMap> {
    let name = ns.metadata.name.clone()?;
    let uid = ns.metadata.uid.clone()?;
    let (key, value) = MANAGED_BY.split_once('=')?;
    Some(ConfigMap {
        metadata: ObjectMeta {
            name: Some(CONFIGMAP.to_owned()),
            namespace: Some(name.clone()),
            labels: Some([(key.to_owned(), value.to_owned())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".to_owned(),
                kind: "Namespace".to_owned(),
                name: name.clone(),
                uid,
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        data: Some([("namespace".to_owned(), name)].into()),
        ..ConfigMap::default()
    })
}

fn enabled(ns: &Namespace) -> bool {
    ns.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL))
        .is_some_and(|v| v == ENABLED)
}

/// Brings one namespace's ConfigMap to what its label asks for.
pub async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Context>) -> Result<Action, Error> {
    let Some(name) = ns.metadata.name.clone() else {
        return Ok(Action::await_change());
    };
    let key = ObjectKey::new(Some(&name), CONFIGMAP);
    let cached = ctx.configmaps.indexer().get(key.as_str());
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &name);
    let terminating = ns.metadata.deletion_timestamp.is_some();
    let written = match (enabled(&ns) && !terminating, cached) {
        (true, None) => {
            let Some(want) = desired(&ns) else {
                return Ok(Action::await_change());
            };
            Some(
                api.create(&PostParams::default(), &want)
                    .await
                    .map_err(Error::Kube)?,
            )
        }
        (true, Some(have)) => {
            let Some(want) = desired(&ns) else {
                return Ok(Action::await_change());
            };
            if have.data == want.data
                && have.metadata.owner_references == want.metadata.owner_references
            {
                return Ok(Action::await_change());
            }
            let patch = Patch::Merge(serde_json::json!({
                "metadata": {"ownerReferences": want.metadata.owner_references},
                "data": want.data,
            }));
            Some(
                api.patch(CONFIGMAP, &PatchParams::default(), &patch)
                    .await
                    .map_err(Error::Kube)?,
            )
        }
        (false, Some(_)) => {
            match api.delete(CONFIGMAP, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(Error::Kube(e)),
            }
            None
        }
        (false, None) => None,
    };
    if let Some(rv) = written.and_then(|cm| cm.metadata.resource_version) {
        ctx.waiter
            .wait_for(&key, &rv, READ_YOUR_WRITES)
            .await
            .map_err(Error::Stale)?;
    }
    Ok(Action::await_change())
}

/// Logs a failed reconcile and backs its key off.
pub fn error_policy(ns: Arc<Namespace>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(namespace = ?ns.metadata.name, %error, "reconcile failed");
    Action::backoff()
}

/// The controller, built on `factory`'s informers (the factory is not
/// started here).
pub struct SettingsController {
    controller: Controller<Namespace>,
    context: Arc<Context>,
}

impl SettingsController {
    /// Wires the controller to `factory` (Namespaces, and the ConfigMaps
    /// labelled [`MANAGED_BY`]); `client` writes.
    pub fn new(
        factory: &SharedInformerFactory,
        client: kube::Client,
    ) -> Result<Self, kinformer::controller::ControllerError> {
        let namespaces = factory.informer::<Namespace>();
        let configmaps =
            factory.informer_with::<ConfigMap>(InformerOptions::default().labels(MANAGED_BY));
        let waiter = VersionWaiter::new(&configmaps)?;
        let controller = Controller::new(&namespaces)
            .owns(&configmaps)
            .concurrency(4);
        Ok(Self {
            controller,
            context: Arc::new(Context {
                client,
                configmaps,
                waiter,
            }),
        })
    }

    /// A handle to stop the controller or read its counters.
    pub fn handle(&self) -> ControllerHandle {
        self.controller.handle()
    }

    /// Runs until the handle's shutdown.
    pub async fn run(self) -> Result<ControllerStats, kinformer::controller::ControllerError> {
        self.controller
            .run(reconcile, error_policy, self.context)
            .await
    }
}

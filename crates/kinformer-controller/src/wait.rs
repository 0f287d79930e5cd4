//! Read-your-writes: waiting until an informer's cache holds an object at
//! (or past) the resource version a write returned.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kinformer_core::{
    DeletedObject, HandlerRegistration, Indexer, ObjectKey, ResourceEventHandler,
    SharedIndexInformer,
};
use kube_core::Resource;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::error::ControllerError;

/// What the cache holds once it has caught up with a resource version.
#[derive(Debug)]
pub enum Observed<K> {
    /// The object, at the awaited resource version or a later one.
    Present(Arc<K>),
    /// The object was deleted at or after the awaited resource version.
    Deleted,
}

/// Waits for an informer's cache to reach the resource versions its caller
/// wrote, so that a reconcile never acts on its own stale state.
///
/// One handler on the informer serves every waiter; while nobody waits it
/// costs one atomic load per event. Resource versions are compared as
/// integers of any length, as Kubernetes documents them to be comparable
/// since 1.35 (KEP-5504); a version that is not a well-formed integer must
/// match exactly.
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kinformer_controller::{Observed, VersionWaiter};
/// use kinformer_core::{ObjectKey, SharedIndexInformer};
///
/// # async fn run(configmaps: SharedIndexInformer<ConfigMap>, api: kube::Api<ConfigMap>, cm: ConfigMap) -> Result<(), Box<dyn std::error::Error>> {
/// let waiter = VersionWaiter::new(&configmaps)?;
/// let written = api.replace("settings", &Default::default(), &cm).await?;
/// let rv = written.metadata.resource_version.clone().unwrap_or_default();
/// let key = ObjectKey::new(Some("default"), "settings");
/// match waiter.wait_for(&key, &rv, Duration::from_secs(10)).await? {
///     Observed::Present(cached) => assert!(cached.metadata.resource_version.is_some()),
///     Observed::Deleted => {}
/// }
/// # Ok(()) }
/// ```
pub struct VersionWaiter<K: Resource + Send + Sync + 'static> {
    waiters: Arc<Waiters<K>>,
    registration: HandlerRegistration<K>,
    informer: SharedIndexInformer<K>,
    indexer: Indexer<K>,
}

struct Waiters<K> {
    pending: AtomicUsize,
    by_key: Mutex<HashMap<ObjectKey, Vec<Waiter<K>>>>,
}

struct Waiter<K> {
    id: u64,
    resource_version: String,
    tx: oneshot::Sender<Observed<K>>,
}

impl<K: Resource + Send + Sync + 'static> VersionWaiter<K> {
    /// A waiter on `informer`'s cache (registers one handler; dropping the
    /// waiter removes it).
    pub fn new(informer: &SharedIndexInformer<K>) -> Result<Self, ControllerError> {
        let waiters = Arc::new(Waiters {
            pending: AtomicUsize::new(0),
            by_key: Mutex::new(HashMap::new()),
        });
        let registration = informer.add_event_handler(Resolve {
            waiters: Arc::clone(&waiters),
        })?;
        Ok(Self {
            waiters,
            registration,
            informer: informer.clone(),
            indexer: informer.indexer(),
        })
    }

    /// Waits until the cache holds `key` at `resource_version` or later, or
    /// has seen it deleted at or after it; fails with
    /// [`ControllerError::WaitTimeout`] after `timeout`.
    pub async fn wait_for(
        &self,
        key: &ObjectKey,
        resource_version: &str,
        timeout: Duration,
    ) -> Result<Observed<K>, ControllerError> {
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        // Registered before the cache is read: a commit after the read
        // reaches the handler, which then finds this waiter.
        {
            let mut by_key = self.waiters.by_key.lock();
            by_key.entry(key.clone()).or_default().push(Waiter {
                id,
                resource_version: resource_version.to_owned(),
                tx,
            });
            self.waiters.pending.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(cached) = self.indexer.get(key.as_str())
            && reached(cached.meta().resource_version.as_deref(), resource_version)
        {
            self.waiters.remove(key, id);
            return Ok(Observed::Present(cached));
        }
        let outcome = tokio::time::timeout(timeout, rx).await;
        match outcome {
            Ok(Ok(observed)) => Ok(observed),
            // The sender went with the handler: treat as not reached.
            Ok(Err(_)) | Err(_) => {
                self.waiters.remove(key, id);
                Err(ControllerError::WaitTimeout {
                    key: key.clone(),
                    resource_version: resource_version.to_owned(),
                    waited: timeout,
                })
            }
        }
    }

    /// Callers waiting now.
    pub fn waiting(&self) -> usize {
        self.waiters.pending.load(Ordering::SeqCst)
    }
}

impl<K> Waiters<K> {
    fn remove(&self, key: &ObjectKey, id: u64) {
        let mut by_key = self.by_key.lock();
        if let Some(list) = by_key.get_mut(key) {
            let before = list.len();
            list.retain(|w| w.id != id);
            self.pending
                .fetch_sub(before - list.len(), Ordering::SeqCst);
            if list.is_empty() {
                by_key.remove(key);
            }
        }
    }

    /// Resolves the waiters of `key` that `resource_version` satisfies.
    fn resolve(
        &self,
        key: &ObjectKey,
        resource_version: Option<&str>,
        observed: impl Fn() -> Observed<K>,
    ) {
        if self.pending.load(Ordering::SeqCst) == 0 {
            return;
        }
        let mut by_key = self.by_key.lock();
        let Some(list) = by_key.get_mut(key) else {
            return;
        };
        let before = list.len();
        let mut kept = Vec::with_capacity(before);
        for w in list.drain(..) {
            if reached(resource_version, &w.resource_version) {
                let _ = w.tx.send(observed());
            } else {
                kept.push(w);
            }
        }
        self.pending
            .fetch_sub(before - kept.len(), Ordering::SeqCst);
        if kept.is_empty() {
            by_key.remove(key);
        } else {
            *list = kept;
        }
    }
}

/// Whether `cached` is at or past `wanted`: as integers of any length when
/// both are well formed (digits, no leading zero: KEP-5504's rule), by
/// equality otherwise.
fn reached(cached: Option<&str>, wanted: &str) -> bool {
    let Some(cached) = cached else {
        return false;
    };
    let integer =
        |v: &str| !v.is_empty() && !v.starts_with('0') && v.bytes().all(|b| b.is_ascii_digit());
    if integer(cached) && integer(wanted) {
        (cached.len(), cached.as_bytes()) >= (wanted.len(), wanted.as_bytes())
    } else {
        cached == wanted
    }
}

impl<K: Resource + Send + Sync + 'static> Drop for VersionWaiter<K> {
    fn drop(&mut self) {
        self.informer.remove_event_handler(&self.registration);
    }
}

impl<K: Resource + Send + Sync + 'static> fmt::Debug for VersionWaiter<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VersionWaiter")
            .field("waiting", &self.waiting())
            .finish_non_exhaustive()
    }
}

/// The handler behind a [`VersionWaiter`].
struct Resolve<K> {
    waiters: Arc<Waiters<K>>,
}

impl<K: Resource + Send + Sync + 'static> Resolve<K> {
    fn seen(&self, obj: &Arc<K>) {
        if self.waiters.pending.load(Ordering::SeqCst) == 0 {
            return;
        }
        if let Ok(key) = ObjectKey::of(obj.as_ref()) {
            let rv = obj.meta().resource_version.as_deref();
            self.waiters
                .resolve(&key, rv, || Observed::Present(Arc::clone(obj)));
        }
    }
}

impl<K: Resource + Send + Sync + 'static> ResourceEventHandler<K> for Resolve<K> {
    fn on_add(&mut self, obj: &Arc<K>, _is_in_initial_list: bool) {
        self.seen(obj);
    }

    fn on_update(&mut self, _old: &Arc<K>, new: &Arc<K>) {
        self.seen(new);
    }

    fn on_delete(&mut self, obj: &DeletedObject<K>) {
        if self.waiters.pending.load(Ordering::SeqCst) == 0 {
            return;
        }
        let last = obj.object();
        if let Ok(key) = ObjectKey::of(last.as_ref()) {
            let rv = last.meta().resource_version.as_deref();
            self.waiters.resolve(&key, rv, || Observed::Deleted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reached;

    #[test]
    fn versions_compare_as_integers_of_any_length_or_by_equality() {
        assert!(reached(Some("10"), "9"));
        assert!(reached(Some("10"), "10"));
        assert!(!reached(Some("9"), "10"));
        let long = "123456789012345678901234567890";
        assert!(reached(Some(long), "18446744073709551615"));
        assert!(!reached(Some("18446744073709551615"), long));
        assert!(
            !reached(Some("011"), "10"),
            "a leading zero is not an integer"
        );
        assert!(reached(Some("abc"), "abc"));
        assert!(!reached(Some("abd"), "abc"));
        assert!(!reached(None, "1"));
    }
}

//! Whole release, safely: which types may have a replaced object's chunk
//! given back at once, and the one way to turn it on for an informer.
//!
//! Releasing an object whole (see [`kinformer_alloc::whole`]) is sound when
//! (1) its type owns every part alone and its decode builds every part, and
//! (2) the object is as its decode built it. [`OwnsPartsAlone`] is the
//! type's promise for (1). [`DecodePool::release_whole_into`] gives (2): it
//! installs the whole-releasing reclaimer inside the informer, where only
//! objects of its cache reach it, and the reclaimer releases whole only
//! while the cache's [`Provenance`] says every object came straight from
//! the wire crate's own decoders (an object put in by `DeltaFifo::add`,
//! `replace` or `Indexer::write`, or changed by a transform, turns it off
//! for good).
#![allow(unsafe_code)] // the marker trait and its implementations

use std::sync::Arc;

use k8s_openapi::api::{apps, batch, coordination, core, discovery, networking, policy, rbac};
use kinformer_core::{Provenance, SharedIndexInformer};
use kube_core::{DynamicObject, PartialObjectMeta, Resource};

use crate::decode::{DecodePool, ShardReclaimer};

/// A type whose objects may be released whole.
///
/// # Safety
/// Every heap part a value points to is owned by that value alone (no
/// `Arc`, `Rc`, `Bytes` or other buffer shared with owners that could
/// outlive it), its `Drop` only frees memory, and its `Deserialize` builds
/// every part it returns during the call (none taken from elsewhere). True
/// of k8s-openapi's types, kube's [`DynamicObject`] and
/// [`PartialObjectMeta`], and structs made only of `String`, `Vec`,
/// `BTreeMap`, `Option`, `Box`, `serde_json::Value` and such types with
/// derived `Deserialize`.
pub unsafe trait OwnsPartsAlone {}

// SAFETY: type metadata, `ObjectMeta` and a `serde_json::Value`, all plain
// owned data, deserialized by kube's derive and this crate's decoder.
unsafe impl OwnsPartsAlone for DynamicObject {}
// SAFETY: type metadata and `ObjectMeta` (the `K` is a marker only).
unsafe impl<K> OwnsPartsAlone for PartialObjectMeta<K> {}

/// k8s-openapi's types: generated structs of `String`, `Vec`, `BTreeMap`,
/// `Option`, `Box`, `ByteString`, `Quantity`, `Time` and `serde_json::Value`
/// with generated `Deserialize` impls.
macro_rules! k8s_openapi_types {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: see the macro's doc: plain owned data, generated decode.
            unsafe impl OwnsPartsAlone for $t {}
        )*
    };
}

k8s_openapi_types!(
    core::v1::Pod,
    core::v1::ConfigMap,
    core::v1::Secret,
    core::v1::Service,
    core::v1::Endpoints,
    core::v1::Namespace,
    core::v1::Node,
    core::v1::PersistentVolume,
    core::v1::PersistentVolumeClaim,
    core::v1::ServiceAccount,
    core::v1::Event,
    core::v1::ReplicationController,
    core::v1::LimitRange,
    core::v1::ResourceQuota,
    apps::v1::Deployment,
    apps::v1::ReplicaSet,
    apps::v1::StatefulSet,
    apps::v1::DaemonSet,
    apps::v1::ControllerRevision,
    batch::v1::Job,
    batch::v1::CronJob,
    coordination::v1::Lease,
    discovery::v1::EndpointSlice,
    networking::v1::Ingress,
    networking::v1::NetworkPolicy,
    policy::v1::PodDisruptionBudget,
    rbac::v1::Role,
    rbac::v1::RoleBinding,
    rbac::v1::ClusterRole,
    rbac::v1::ClusterRoleBinding,
);

impl DecodePool {
    /// Makes `informer` hand the objects it lets go of back to this pool,
    /// releasing each whole when its parts all sit in one object-arena
    /// chunk and the informer's cache holds only objects straight from
    /// the wire crate's decoders (its [`Provenance`]); others are dropped
    /// on their decode thread, as with [`DecodePool::reclaimer`].
    ///
    /// Returns false, changing nothing, if the informer already has a
    /// reclaimer.
    pub fn release_whole_into<K>(&self, informer: &SharedIndexInformer<K>) -> bool
    where
        K: Resource + OwnsPartsAlone + Send + Sync + 'static,
    {
        let provenance: Provenance = informer.indexer().provenance();
        informer.set_reclaimer(Arc::new(ShardReclaimer::new(self, Some(provenance))))
    }
}

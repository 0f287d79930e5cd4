//! The parts of Kubernetes' protobuf messages a metadata-only informer
//! reads, as `prost` messages with the field numbers of the upstream
//! `generated.proto` files (k8s.io/apimachinery `runtime` and `meta/v1`).
//!
//! Fields left out here are skipped by `prost` as unknown fields, by length,
//! without being parsed: that is how `metadata.managedFields` (field 17) is
//! left out when the informer does not keep it. [`ManagedFieldsOnly`] reads
//! it when the informer does.

use std::collections::BTreeMap;

use bytes::Bytes;

/// `runtime.Unknown`: the envelope after the `k8s\0` magic.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Unknown {
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<TypeMeta>,
    #[prost(bytes = "bytes", tag = "2")]
    pub raw: Bytes,
}

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TypeMeta {
    #[prost(string, tag = "1")]
    pub api_version: String,
    #[prost(string, tag = "2")]
    pub kind: String,
}

/// `meta/v1.WatchEvent`, written raw (no envelope) in each watch frame.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WatchEvent {
    /// A string on the wire, read as bytes: a slice of the frame, not a
    /// copy (it is only compared with the event types).
    #[prost(bytes = "bytes", tag = "1")]
    pub r#type: Bytes,
    #[prost(message, optional, tag = "2")]
    pub object: Option<RawExtension>,
}

/// `runtime.RawExtension`: an enveloped object.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RawExtension {
    #[prost(bytes = "bytes", tag = "1")]
    pub raw: Bytes,
}

/// `meta/v1.PartialObjectMetadata`, its `metadata` left as bytes (read
/// once as [`ObjectMeta`], and again as [`ManagedFieldsOnly`] when kept).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PartialObjectMetadataBytes {
    #[prost(bytes = "bytes", optional, tag = "1")]
    pub metadata: Option<Bytes>,
}

/// `meta/v1.PartialObjectMetadataList`, its items left as bytes so that
/// each can be decoded on its own (on the decode threads).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct PartialObjectMetadataList {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ListMeta>,
    #[prost(bytes = "bytes", repeated, tag = "2")]
    pub items: Vec<Bytes>,
}

/// `meta/v1.ListMeta`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ListMeta {
    #[prost(string, tag = "2")]
    pub resource_version: String,
    #[prost(string, tag = "3")]
    pub r#continue: String,
    #[prost(int64, optional, tag = "4")]
    pub remaining_item_count: Option<i64>,
}

/// `meta/v1.ObjectMeta` without `managedFields` (17) and `selfLink` (4).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ObjectMeta {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub generate_name: String,
    #[prost(string, tag = "3")]
    pub namespace: String,
    #[prost(string, tag = "5")]
    pub uid: String,
    #[prost(string, tag = "6")]
    pub resource_version: String,
    #[prost(int64, tag = "7")]
    pub generation: i64,
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    #[prost(int64, optional, tag = "10")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    pub finalizers: Vec<String>,
}

/// [`ObjectMeta`] as the decoders read it: without its two maps, which
/// are read from their entries (see [`super::meta_layout`]).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ObjectMetaWithoutMaps {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub generate_name: String,
    #[prost(string, tag = "3")]
    pub namespace: String,
    #[prost(string, tag = "5")]
    pub uid: String,
    #[prost(string, tag = "6")]
    pub resource_version: String,
    #[prost(int64, tag = "7")]
    pub generation: i64,
    #[prost(message, optional, tag = "8")]
    pub creation_timestamp: Option<Time>,
    #[prost(message, optional, tag = "9")]
    pub deletion_timestamp: Option<Time>,
    #[prost(int64, optional, tag = "10")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[prost(message, repeated, tag = "13")]
    pub owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    pub finalizers: Vec<String>,
}

/// `meta/v1.ObjectMeta`'s lists alone, as slices of its bytes: read before
/// the object is decoded into its arena chunk when the walk of
/// [`super::meta_layout`] does not read the message, so that the lists of
/// [`ObjectMetaWithoutMaps`] can be made at their exact length first (a
/// vector grown element by element is left at up to four times its length,
/// and the chunk keeps the space of every buffer it outgrew).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ObjectMetaLists {
    #[prost(bytes = "bytes", repeated, tag = "13")]
    pub owner_references: Vec<Bytes>,
    #[prost(bytes = "bytes", repeated, tag = "14")]
    pub finalizers: Vec<Bytes>,
}

/// `meta/v1.ObjectMeta`'s two maps alone, as `prost` reads them (the slow
/// path of [`super::meta_layout`]).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ObjectMetaMaps {
    #[prost(btree_map = "string, string", tag = "11")]
    pub labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    pub annotations: BTreeMap<String, String>,
}

/// One entry of a `map<string, string>` field, as `prost` reads it (the
/// slow path of [`super::meta_layout`]).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StringEntry {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `meta/v1.ObjectMeta`'s `managedFields` alone.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ManagedFieldsOnly {
    #[prost(message, repeated, tag = "17")]
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// `meta/v1.ManagedFieldsEntry`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ManagedFieldsEntry {
    #[prost(string, tag = "1")]
    pub manager: String,
    #[prost(string, tag = "2")]
    pub operation: String,
    #[prost(string, tag = "3")]
    pub api_version: String,
    #[prost(message, optional, tag = "4")]
    pub time: Option<Time>,
    #[prost(string, tag = "6")]
    pub fields_type: String,
    #[prost(message, optional, tag = "7")]
    pub fields_v1: Option<FieldsV1>,
    #[prost(string, tag = "8")]
    pub subresource: String,
}

/// `meta/v1.FieldsV1`: the field set as raw JSON.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct FieldsV1 {
    #[prost(bytes = "vec", tag = "1")]
    pub raw: Vec<u8>,
}

/// `meta/v1.Time` (and `MicroTime`): seconds and nanoseconds since the epoch.
#[derive(Clone, Copy, PartialEq, prost::Message)]
pub(crate) struct Time {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `meta/v1.OwnerReference`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct OwnerReference {
    #[prost(string, tag = "1")]
    pub kind: String,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub uid: String,
    #[prost(string, tag = "5")]
    pub api_version: String,
    #[prost(bool, optional, tag = "6")]
    pub controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    pub block_owner_deletion: Option<bool>,
}

/// `meta/v1.Status`, as a watch `ERROR` event or an error response carries it.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Status {
    #[prost(string, tag = "3")]
    pub message: String,
    #[prost(string, tag = "4")]
    pub reason: String,
    #[prost(message, optional, tag = "5")]
    pub details: Option<StatusDetails>,
    #[prost(int32, tag = "6")]
    pub code: i32,
}

/// `meta/v1.StatusDetails`: only `retryAfterSeconds` is read.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StatusDetails {
    #[prost(int32, tag = "5")]
    pub retry_after_seconds: i32,
}

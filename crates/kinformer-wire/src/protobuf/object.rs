//! One enveloped object (`k8s\0` + `runtime.Unknown`) into kube's
//! [`PartialObjectMeta`], with the JSON form's meaning: a field the JSON
//! encoding leaves out when empty (`omitempty`) is `None` here too, so an
//! object decodes to the same value from either encoding.

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube_core::{PartialObjectMeta, TypeMeta};
use prost::Message;

use super::messages;
use super::meta_layout::{Layout, Maps, maps_by_prost};
use crate::error::WireError;

/// The four bytes before every enveloped object.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Opens the envelope of one object: its `apiVersion` and `kind` (when the
/// envelope has them) and the object's own bytes.
pub(crate) fn open_envelope(
    mut enveloped: Bytes,
) -> Result<(Option<messages::TypeMeta>, Bytes), WireError> {
    if !enveloped.starts_with(MAGIC) {
        return Err(WireError::DecodeObject(
            "protobuf object without the k8s envelope".into(),
        ));
    }
    let unknown = messages::Unknown::decode(enveloped.split_off(MAGIC.len()))
        .map_err(|e| WireError::DecodeObject(format!("protobuf envelope: {e}")))?;
    Ok((unknown.type_meta, unknown.raw))
}

/// Decodes one enveloped `PartialObjectMetadata`, leaving out
/// `metadata.managedFields` when `skip_managed_fields` is set (its bytes are
/// skipped by length, not parsed).
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_wire::protobuf::decode_partial_object_meta;
///
/// // A bare object: the envelope's type and an object with `metadata.name` "a".
/// let mut bytes = b"k8s\0".to_vec();
/// bytes.extend_from_slice(&[0x12, 0x05, 0x0a, 0x03, 0x0a, 0x01, b'a']);
/// let meta = decode_partial_object_meta::<Pod>(bytes.into(), true).unwrap();
/// assert_eq!(meta.metadata.name.as_deref(), Some("a"));
/// ```
pub fn decode_partial_object_meta<K>(
    enveloped: Bytes,
    skip_managed_fields: bool,
) -> Result<PartialObjectMeta<K>, WireError> {
    // The object's parts are bumped into its arena chunks (when the process
    // uses `kinformer_alloc::ObjectArenas`), as the JSON decoders do; what
    // is not kept is read before the scope opens (see `Unopened`).
    let len = enveloped.len();
    let unopened = Unopened::read(enveloped)?;
    kinformer_alloc::with_object_arena(len, || unopened.decode(skip_managed_fields))
}

/// [`decode_partial_object_meta`] outside any arena scope: for what is not
/// kept (a bookmark's resourceVersion), so that it does not teach the
/// arenas' size estimate.
pub(crate) fn decode_outside_arena<K>(
    enveloped: Bytes,
    skip_managed_fields: bool,
) -> Result<PartialObjectMeta<K>, WireError> {
    Unopened::read(enveloped)?.decode(skip_managed_fields)
}

/// A `PartialObjectMetadata` opened down to its `metadata` message and the
/// lengths of that message's lists: done before the object's arena scope
/// opens, since nothing of it is kept (the envelope's type is copied into
/// the scope).
pub(crate) struct Unopened {
    types: Option<TypeMeta>,
    metadata: Bytes,
    /// The lengths of its lists and, when walked, where its maps lie.
    lists: Lists,
}

/// What is read of an object's metadata before its scope opens.
// The walked layout is the usual case and lives on the stack for one
// decode; boxing it would cost an allocation per object.
#[allow(clippy::large_enum_variant)]
enum Lists {
    /// Walked here (the usual case).
    Walked(Layout),
    /// Read by `prost` (maps then read by `prost` too).
    ByProst(messages::ObjectMetaLists),
}

impl Unopened {
    /// Opens an enveloped object.
    fn read(enveloped: Bytes) -> Result<Self, WireError> {
        let (types, raw) = open_envelope(enveloped)?;
        Self::read_bare(raw, types.map(type_meta))
    }

    /// Opens a `PartialObjectMetadata` message without its envelope (a
    /// list item), whose `apiVersion` and `kind` are `types`.
    pub(crate) fn read_bare(raw: Bytes, types: Option<TypeMeta>) -> Result<Self, WireError> {
        let metadata = messages::PartialObjectMetadataBytes::decode(raw)
            .map_err(decode_error)?
            .metadata
            .unwrap_or_default();
        let lists = match Layout::of(&metadata) {
            Some(layout) => Lists::Walked(layout),
            None => Lists::ByProst(
                messages::ObjectMetaLists::decode(metadata.clone()).map_err(decode_error)?,
            ),
        };
        Ok(Self {
            types,
            metadata,
            lists,
        })
    }

    /// Decodes the object: everything it keeps is allocated here (in the
    /// caller's arena scope, if any), its lists at their exact length.
    pub(crate) fn decode<K>(
        self,
        skip_managed_fields: bool,
    ) -> Result<PartialObjectMeta<K>, WireError> {
        let managed = if skip_managed_fields {
            None
        } else {
            Some(
                messages::ManagedFieldsOnly::decode(self.metadata.clone())
                    .map_err(decode_error)?
                    .managed_fields,
            )
        };
        let (owner_references, finalizers) = match &self.lists {
            Lists::Walked(l) => (l.owner_references, l.finalizers),
            Lists::ByProst(l) => (l.owner_references.len(), l.finalizers.len()),
        };
        let mut fields = messages::ObjectMetaWithoutMaps {
            owner_references: Vec::with_capacity(owner_references),
            finalizers: Vec::with_capacity(finalizers),
            ..messages::ObjectMetaWithoutMaps::default()
        };
        fields.merge(&self.metadata[..]).map_err(decode_error)?;
        let maps = match &self.lists {
            Lists::Walked(layout) => layout.maps(&self.metadata),
            Lists::ByProst(_) => maps_by_prost(&self.metadata),
        }
        .map_err(decode_error)?;
        Ok(PartialObjectMeta {
            types: self.types.as_ref().map(|t| TypeMeta {
                api_version: t.api_version.clone(),
                kind: t.kind.clone(),
            }),
            metadata: object_meta(fields, maps, managed)?,
            _phantom: std::marker::PhantomData,
        })
    }
}

fn decode_error(e: prost::DecodeError) -> WireError {
    WireError::DecodeObject(format!("protobuf: {e}"))
}

pub(crate) fn type_meta(t: messages::TypeMeta) -> TypeMeta {
    TypeMeta {
        api_version: t.api_version,
        kind: t.kind,
    }
}

/// `Some` unless empty (the JSON encoding's `omitempty`).
fn text(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn map(m: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

fn list<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

/// An empty `Time` message is Go's zero time, which JSON writes as `null`.
fn time(t: Option<messages::Time>) -> Result<Option<meta::Time>, WireError> {
    match t {
        None
        | Some(messages::Time {
            seconds: 0,
            nanos: 0,
        }) => Ok(None),
        Some(t) => jiff::Timestamp::new(t.seconds, t.nanos)
            .map(|ts| Some(meta::Time(ts)))
            .map_err(|e| WireError::DecodeObject(format!("protobuf time: {e}"))),
    }
}

fn object_meta(
    m: messages::ObjectMetaWithoutMaps,
    maps: Maps,
    managed: Option<Vec<messages::ManagedFieldsEntry>>,
) -> Result<meta::ObjectMeta, WireError> {
    let owner_references = m
        .owner_references
        .into_iter()
        .map(|o| meta::OwnerReference {
            api_version: o.api_version,
            block_owner_deletion: o.block_owner_deletion,
            controller: o.controller,
            kind: o.kind,
            name: o.name,
            uid: o.uid,
        })
        .collect();
    let managed_fields = match managed {
        Some(entries) => list(
            entries
                .into_iter()
                .map(managed_fields_entry)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        None => None,
    };
    Ok(meta::ObjectMeta {
        annotations: map(maps.annotations),
        creation_timestamp: time(m.creation_timestamp)?,
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        deletion_timestamp: time(m.deletion_timestamp)?,
        finalizers: list(m.finalizers),
        generate_name: text(m.generate_name),
        generation: (m.generation != 0).then_some(m.generation),
        labels: map(maps.labels),
        managed_fields,
        name: text(m.name),
        namespace: text(m.namespace),
        owner_references: list(owner_references),
        resource_version: text(m.resource_version),
        self_link: None,
        uid: text(m.uid),
    })
}

fn managed_fields_entry(
    e: messages::ManagedFieldsEntry,
) -> Result<meta::ManagedFieldsEntry, WireError> {
    let fields_v1 = match e.fields_v1 {
        Some(f) if !f.raw.is_empty() => Some(meta::FieldsV1(
            serde_json::from_slice(&f.raw)
                .map_err(|e| WireError::DecodeObject(format!("protobuf fieldsV1: {e}")))?,
        )),
        _ => None,
    };
    Ok(meta::ManagedFieldsEntry {
        api_version: text(e.api_version),
        fields_type: text(e.fields_type),
        fields_v1,
        manager: text(e.manager),
        operation: text(e.operation),
        subresource: text(e.subresource),
        time: time(e.time)?,
    })
}

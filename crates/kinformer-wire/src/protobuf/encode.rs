//! The other direction: metadata-only objects, `Status` errors and watch
//! frames written in the protobuf encoding, for servers in tests (the
//! simulator answers protobuf watches with these) and for round-trip checks
//! of the decoders. What JSON leaves out when empty is left out here too.

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube_core::TypeMeta;
use prost::Message;

use super::messages;
use super::object::MAGIC;

pub(super) fn time(t: Option<&meta::Time>) -> Option<messages::Time> {
    t.map(|t| messages::Time {
        seconds: t.0.as_second(),
        nanos: t.0.subsec_nanosecond(),
    })
}

fn text(s: Option<&String>) -> String {
    s.cloned().unwrap_or_default()
}

pub(super) fn envelope(types: Option<&TypeMeta>, raw: impl Into<Bytes>) -> Vec<u8> {
    let unknown = messages::Unknown {
        type_meta: types.map(|t| messages::TypeMeta {
            api_version: t.api_version.clone(),
            kind: t.kind.clone(),
        }),
        raw: raw.into(),
    };
    let mut out = MAGIC.to_vec();
    unknown.encode(&mut out).unwrap_or_default();
    out
}

/// `metadata` (with its `managedFields`, if any) as an enveloped
/// `PartialObjectMetadata` of type `types`.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use kinformer_wire::protobuf::{decode_partial_object_meta, encode_partial_object_meta};
///
/// let meta = ObjectMeta { name: Some("a".into()), ..ObjectMeta::default() };
/// let bytes = encode_partial_object_meta(None, &meta);
/// let back = decode_partial_object_meta::<Pod>(bytes.into(), false).unwrap();
/// assert_eq!(back.metadata, meta);
/// ```
pub fn encode_partial_object_meta(
    types: Option<&TypeMeta>,
    metadata: &meta::ObjectMeta,
) -> Vec<u8> {
    envelope(types, partial_object_meta(metadata))
}

/// A LIST page of metadata-only objects: an enveloped
/// `PartialObjectMetadataList` (`meta.k8s.io/v1`) with `list`'s
/// resourceVersion, continue token and remaining item count, and `items`'
/// metadata.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
/// use kinformer_wire::protobuf::{decode_list, decode_list_item, encode_partial_object_meta_list};
///
/// let list = ListMeta { resource_version: Some("9".into()), ..ListMeta::default() };
/// let item = ObjectMeta { name: Some("a".into()), ..ObjectMeta::default() };
/// let page = decode_list(encode_partial_object_meta_list(&list, [&item]).into()).unwrap();
/// assert_eq!(page.resource_version, "9");
/// let back = decode_list_item::<Pod>(page.items[0].clone(), page.item_types, true).unwrap();
/// assert_eq!(back.metadata, item);
/// ```
pub fn encode_partial_object_meta_list<'a>(
    list: &meta::ListMeta,
    items: impl IntoIterator<Item = &'a meta::ObjectMeta>,
) -> Vec<u8> {
    let items = items
        .into_iter()
        .map(|m| Bytes::from(partial_object_meta(m)))
        .collect();
    list_envelope(list, items)
}

/// An enveloped `PartialObjectMetadataList` of `list`'s members and the
/// bare `PartialObjectMetadata` messages `items`.
pub(super) fn list_envelope(list: &meta::ListMeta, items: Vec<Bytes>) -> Vec<u8> {
    let page = messages::PartialObjectMetadataList {
        metadata: Some(messages::ListMeta {
            resource_version: text(list.resource_version.as_ref()),
            r#continue: text(list.continue_.as_ref()),
            remaining_item_count: list.remaining_item_count,
        }),
        items,
    };
    let types = TypeMeta {
        api_version: "meta.k8s.io/v1".into(),
        kind: "PartialObjectMetadataList".into(),
    };
    envelope(Some(&types), page.encode_to_vec())
}

/// `metadata` as a bare `PartialObjectMetadata` message.
fn partial_object_meta(metadata: &meta::ObjectMeta) -> Vec<u8> {
    let fields = messages::ObjectMeta {
        name: text(metadata.name.as_ref()),
        generate_name: text(metadata.generate_name.as_ref()),
        namespace: text(metadata.namespace.as_ref()),
        uid: text(metadata.uid.as_ref()),
        resource_version: text(metadata.resource_version.as_ref()),
        generation: metadata.generation.unwrap_or_default(),
        creation_timestamp: time(metadata.creation_timestamp.as_ref()),
        deletion_timestamp: time(metadata.deletion_timestamp.as_ref()),
        deletion_grace_period_seconds: metadata.deletion_grace_period_seconds,
        labels: metadata.labels.clone().unwrap_or_default(),
        annotations: metadata.annotations.clone().unwrap_or_default(),
        owner_references: metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| messages::OwnerReference {
                kind: o.kind.clone(),
                name: o.name.clone(),
                uid: o.uid.clone(),
                api_version: o.api_version.clone(),
                controller: o.controller,
                block_owner_deletion: o.block_owner_deletion,
            })
            .collect(),
        finalizers: metadata.finalizers.clone().unwrap_or_default(),
    };
    let mut meta_bytes = fields.encode_to_vec();
    // Field 17 appended: a message's fields may come in any order.
    messages::ManagedFieldsOnly {
        managed_fields: metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|e| messages::ManagedFieldsEntry {
                manager: text(e.manager.as_ref()),
                operation: text(e.operation.as_ref()),
                api_version: text(e.api_version.as_ref()),
                time: time(e.time.as_ref()),
                fields_type: text(e.fields_type.as_ref()),
                fields_v1: e.fields_v1.as_ref().map(|f| messages::FieldsV1 {
                    raw: serde_json::to_vec(&f.0).unwrap_or_default(),
                }),
                subresource: text(e.subresource.as_ref()),
            })
            .collect(),
    }
    .encode(&mut meta_bytes)
    .unwrap_or_default();
    messages::PartialObjectMetadataBytes {
        metadata: Some(Bytes::from(meta_bytes)),
    }
    .encode_to_vec()
}

/// An enveloped `Status` (`v1`, `Status`) with these members.
pub fn encode_status(code: u16, reason: &str, message: &str, retry_after_seconds: u32) -> Vec<u8> {
    let status = messages::Status {
        message: message.to_string(),
        reason: reason.to_string(),
        details: (retry_after_seconds > 0).then(|| messages::StatusDetails {
            retry_after_seconds: i32::try_from(retry_after_seconds).unwrap_or(i32::MAX),
        }),
        code: i32::from(code),
    };
    let types = TypeMeta {
        api_version: "v1".into(),
        kind: "Status".into(),
    };
    envelope(Some(&types), status.encode_to_vec())
}

/// One watch frame, length prefix included: an event of `event_type`
/// (`ADDED`, `BOOKMARK`, `ERROR`, ...) carrying `enveloped_object`.
pub fn encode_watch_frame(event_type: &str, enveloped_object: &[u8]) -> Vec<u8> {
    let event = messages::WatchEvent {
        r#type: Bytes::copy_from_slice(event_type.as_bytes()),
        object: Some(messages::RawExtension {
            raw: Bytes::copy_from_slice(enveloped_object),
        }),
    };
    let body = event.encode_to_vec();
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

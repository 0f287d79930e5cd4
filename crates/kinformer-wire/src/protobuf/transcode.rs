//! An object's JSON `metadata` written straight into the protobuf encoding,
//! for test servers that store JSON (the simulator answers protobuf LISTs and
//! watches with it). Going through k8s-openapi's `ObjectMeta` (its
//! `managedFields`' `FieldsV1` parsed into `serde_json::Value` maps and
//! written back, every string copied again into the message) took 10.9 µs
//! per Pod, this 5.2 µs (`--bench protobuf -- sim_protobuf`):
//! each string is read once and moved into the message, and `FieldsV1` is
//! copied as the raw JSON it is (what kube-apiserver stores in its `Raw`).

use std::collections::BTreeMap;

use bytes::Bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube_core::TypeMeta;
use prost::Message;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::encode::{envelope, list_envelope, time};
use super::messages;

/// `metadata` as kube-apiserver writes it in JSON, each member as the
/// message wants it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectMetaJson<'a> {
    name: Option<String>,
    generate_name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<meta::Time>,
    deletion_timestamp: Option<meta::Time>,
    deletion_grace_period_seconds: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReferenceJson>>,
    finalizers: Option<Vec<String>>,
    #[serde(borrow)]
    managed_fields: Option<Vec<ManagedFieldsEntryJson<'a>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerReferenceJson {
    api_version: String,
    kind: String,
    name: String,
    uid: String,
    controller: Option<bool>,
    block_owner_deletion: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManagedFieldsEntryJson<'a> {
    manager: Option<String>,
    operation: Option<String>,
    api_version: Option<String>,
    time: Option<meta::Time>,
    fields_type: Option<String>,
    #[serde(borrow)]
    fields_v1: Option<&'a RawValue>,
    subresource: Option<String>,
}

/// `metadata_json` (an object's `metadata` member in JSON) as a bare
/// `PartialObjectMetadata` message: the unit
/// [`envelope_partial_object_meta`] and
/// [`encode_partial_object_meta_list_messages`] take, with the bytes
/// [`encode_partial_object_meta`](super::encode_partial_object_meta) writes
/// for the same metadata inside its envelope (`FieldsV1` as its JSON bytes
/// are).
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_wire::protobuf::{
///     decode_partial_object_meta, envelope_partial_object_meta, partial_object_meta_message,
/// };
///
/// let message = partial_object_meta_message(br#"{"name":"a","labels":{"k":"v"}}"#).unwrap();
/// let bytes = envelope_partial_object_meta(None, message);
/// let back = decode_partial_object_meta::<Pod>(bytes.into(), false).unwrap();
/// assert_eq!(back.metadata.name.as_deref(), Some("a"));
/// assert_eq!(back.metadata.labels.unwrap()["k"], "v");
/// ```
pub fn partial_object_meta_message(metadata_json: &[u8]) -> Result<Bytes, serde_json::Error> {
    let m: ObjectMetaJson<'_> = serde_json::from_slice(metadata_json)?;
    let fields = messages::ObjectMeta {
        name: m.name.unwrap_or_default(),
        generate_name: m.generate_name.unwrap_or_default(),
        namespace: m.namespace.unwrap_or_default(),
        uid: m.uid.unwrap_or_default(),
        resource_version: m.resource_version.unwrap_or_default(),
        generation: m.generation.unwrap_or_default(),
        creation_timestamp: time(m.creation_timestamp.as_ref()),
        deletion_timestamp: time(m.deletion_timestamp.as_ref()),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: m.labels.unwrap_or_default(),
        annotations: m.annotations.unwrap_or_default(),
        owner_references: m
            .owner_references
            .into_iter()
            .flatten()
            .map(|o| messages::OwnerReference {
                kind: o.kind,
                name: o.name,
                uid: o.uid,
                api_version: o.api_version,
                controller: o.controller,
                block_owner_deletion: o.block_owner_deletion,
            })
            .collect(),
        finalizers: m.finalizers.unwrap_or_default(),
    };
    let managed = messages::ManagedFieldsOnly {
        managed_fields: m
            .managed_fields
            .into_iter()
            .flatten()
            .map(|e| messages::ManagedFieldsEntry {
                manager: e.manager.unwrap_or_default(),
                operation: e.operation.unwrap_or_default(),
                api_version: e.api_version.unwrap_or_default(),
                time: time(e.time.as_ref()),
                fields_type: e.fields_type.unwrap_or_default(),
                fields_v1: e.fields_v1.map(|f| messages::FieldsV1 {
                    raw: f.get().as_bytes().to_vec(),
                }),
                subresource: e.subresource.unwrap_or_default(),
            })
            .collect(),
    };
    let mut meta_bytes = Vec::with_capacity(fields.encoded_len() + managed.encoded_len());
    fields.encode_raw(&mut meta_bytes);
    managed.encode_raw(&mut meta_bytes);
    Ok(Bytes::from(
        messages::PartialObjectMetadataBytes {
            metadata: Some(Bytes::from(meta_bytes)),
        }
        .encode_to_vec(),
    ))
}

/// A bare `PartialObjectMetadata` `message` (see
/// [`partial_object_meta_message`]) as an enveloped object of type `types`.
/// The message is the envelope's last field, so it ends the returned bytes
/// (and a watch frame built from them).
pub fn envelope_partial_object_meta(types: Option<&TypeMeta>, message: Bytes) -> Vec<u8> {
    envelope(types, message)
}

/// A LIST page of metadata-only objects from bare `PartialObjectMetadata`
/// messages (see [`partial_object_meta_message`]): what
/// [`encode_partial_object_meta_list`](super::encode_partial_object_meta_list)
/// writes for the same list and items.
pub fn encode_partial_object_meta_list_messages(
    list: &meta::ListMeta,
    messages: Vec<Bytes>,
) -> Vec<u8> {
    list_envelope(list, messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protobuf::{encode_partial_object_meta, encode_partial_object_meta_list};

    const WATCH_JSON: &[u8] =
        include_bytes!("../../tests/fixtures/protobuf/pod-metadata-watch.json");

    /// The fixture's `metadata` member, as JSON bytes and parsed.
    fn fixture() -> (Vec<u8>, meta::ObjectMeta) {
        let line: serde_json::Value = serde_json::from_slice(WATCH_JSON).unwrap();
        let md = &line["object"]["metadata"];
        (
            serde_json::to_vec(md).unwrap(),
            serde_json::from_value(md.clone()).unwrap(),
        )
    }

    #[test]
    fn writes_what_the_object_meta_encoder_writes() {
        let (json, parsed) = fixture();
        assert!(
            parsed.managed_fields.is_some(),
            "the fixture keeps managedFields"
        );
        let types = TypeMeta {
            api_version: "meta.k8s.io/v1".into(),
            kind: "PartialObjectMetadata".into(),
        };
        let message = partial_object_meta_message(&json).unwrap();
        assert_eq!(
            envelope_partial_object_meta(Some(&types), message.clone()),
            encode_partial_object_meta(Some(&types), &parsed)
        );
        let list = meta::ListMeta {
            resource_version: Some("7".into()),
            continue_: Some("next".into()),
            remaining_item_count: Some(3),
            ..meta::ListMeta::default()
        };
        let empty = partial_object_meta_message(b"{}").unwrap();
        assert_eq!(
            encode_partial_object_meta_list_messages(&list, vec![message, empty]),
            encode_partial_object_meta_list(&list, [&parsed, &meta::ObjectMeta::default()])
        );
    }

    #[test]
    fn nulls_and_absent_members_are_empty() {
        let json = br#"{"name":"a","labels":null,"ownerReferences":null,"managedFields":null,"generation":null}"#;
        let name_only = meta::ObjectMeta {
            name: Some("a".into()),
            ..meta::ObjectMeta::default()
        };
        assert_eq!(
            envelope_partial_object_meta(None, partial_object_meta_message(json).unwrap()),
            encode_partial_object_meta(None, &name_only)
        );
    }

    #[test]
    fn malformed_metadata_is_an_error() {
        for bad in [&b"[]"[..], b"{\"name\":1}", b"{\"name\":\"a\"", b"not json"] {
            assert!(partial_object_meta_message(bad).is_err());
        }
    }
}

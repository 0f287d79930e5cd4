//! Properties of the protobuf codec of metadata-only objects over arbitrary
//! metadata: an object decodes to what was encoded (from k8s-openapi's
//! `ObjectMeta` or transcoded from its JSON, which write the same bytes),
//! as a watch event and as a LIST item, with its lists at their exact
//! length.

#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta, OwnerReference};
use kinformer_wire::WatchEvent;
use kinformer_wire::protobuf::{
    decode_list, decode_list_item, decode_watch_frame, encode_partial_object_meta,
    encode_partial_object_meta_list, encode_partial_object_meta_list_messages, encode_watch_frame,
    envelope_partial_object_meta, next_frame, partial_object_meta_message,
};
use kube_core::TypeMeta;
use proptest::prelude::*;

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9./-]{1,12}|[^\\x00]{1,4}"
}

fn map() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    prop::option::of(prop::collection::btree_map(text(), "[ -~]{0,8}", 1..6))
}

fn owner() -> impl Strategy<Value = OwnerReference> {
    (
        text(),
        text(),
        text(),
        text(),
        any::<Option<bool>>(),
        any::<Option<bool>>(),
    )
        .prop_map(
            |(api_version, kind, name, uid, controller, block_owner_deletion)| OwnerReference {
                api_version,
                kind,
                name,
                uid,
                controller,
                block_owner_deletion,
            },
        )
}

fn metadata() -> impl Strategy<Value = ObjectMeta> {
    (
        (
            text(),
            prop::option::of(text()),
            text(),
            text(),
            1u64..1 << 40,
        ),
        (prop::option::of(1i64..1_000), map(), map()),
        (
            prop::option::of(prop::collection::vec(owner(), 1..5)),
            prop::option::of(prop::collection::vec(text(), 1..7)),
        ),
    )
        .prop_map(
            |(
                (name, generate_name, namespace, uid, rv),
                (generation, labels, annotations),
                (owners, finalizers),
            )| {
                ObjectMeta {
                    name: Some(name),
                    generate_name,
                    namespace: Some(namespace),
                    uid: Some(uid),
                    resource_version: Some(rv.to_string()),
                    generation,
                    labels,
                    annotations,
                    owner_references: owners,
                    finalizers,
                    ..ObjectMeta::default()
                }
            },
        )
}

fn types() -> TypeMeta {
    TypeMeta {
        api_version: "meta.k8s.io/v1".into(),
        kind: "PartialObjectMetadata".into(),
    }
}

/// Every list of `m` at its exact length.
fn exact(m: &ObjectMeta) -> bool {
    m.owner_references
        .as_ref()
        .is_none_or(|v| v.capacity() == v.len())
        && m.finalizers
            .as_ref()
            .is_none_or(|v| v.capacity() == v.len())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn metadata_decodes_to_what_was_encoded(m in metadata()) {
        let enveloped = encode_partial_object_meta(Some(&types()), &m);
        let json = serde_json::to_vec(&m).unwrap();
        let message = partial_object_meta_message(&json).unwrap();
        prop_assert_eq!(&envelope_partial_object_meta(Some(&types()), message.clone()), &enveloped);

        let frame = encode_watch_frame("MODIFIED", &enveloped);
        let frame = next_frame(&mut BytesMut::from(&frame[..])).unwrap().unwrap();
        let WatchEvent::Modified(event) = decode_watch_frame::<Pod>(frame, true).unwrap() else {
            panic!("not MODIFIED");
        };
        prop_assert_eq!(&event.metadata, &m);
        prop_assert!(exact(&event.metadata));

        let list = ListMeta { resource_version: Some("3".into()), ..ListMeta::default() };
        let body = encode_partial_object_meta_list(&list, [&m]);
        prop_assert_eq!(&encode_partial_object_meta_list_messages(&list, vec![message]), &body);
        let page = decode_list(Bytes::from(body)).unwrap();
        let item = decode_list_item::<Pod>(page.items[0].clone(), page.item_types.clone(), true).unwrap();
        prop_assert_eq!(&item.metadata, &m);
        prop_assert!(exact(&item.metadata));
        prop_assert_eq!(item.types.unwrap().kind, "PartialObjectMetadata");
    }
}

//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`)
//! for metadata-only objects, the encoding client-go's metadata informers
//! ask for: no text to scan, and `metadata.managedFields` skipped by its
//! length instead of parsed or scanned.
//!
//! Module map:
//! - `messages`: the upstream messages' fields read here, as `prost` messages;
//! - [`object`]: one enveloped object into [`kube_core::PartialObjectMeta`],
//!   equal to what the JSON encoding of the same object decodes to;
//! - [`watch`]: watch frames and events;
//! - [`list`]: LIST pages, their items decoded one by one;
//! - `meta_layout`: one walk of an object's metadata for its lists' lengths
//!   and its maps' entries;
//! - [`encode`]: the other direction, for test servers (the simulator);
//! - [`transcode`]: the same from an object's JSON `metadata`, without
//!   k8s-openapi's types (what the simulator pays per object).
//!
//! Checked against bytes kube-apiserver v1.37.2 wrote
//! (`tests/fixtures/protobuf/`).

pub mod encode;
pub mod list;
mod messages;
mod meta_layout;
pub mod object;
pub mod transcode;
pub mod watch;

pub use encode::{
    encode_partial_object_meta, encode_partial_object_meta_list, encode_status, encode_watch_frame,
};
pub use list::{ListPage, decode_list, decode_list_item};
pub use object::{MAGIC, decode_partial_object_meta};
pub use transcode::{
    encode_partial_object_meta_list_messages, envelope_partial_object_meta,
    partial_object_meta_message,
};
pub use watch::{MAX_FRAME, decode_watch_frame, next_frame};

/// The media type of the protobuf encoding.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The `Accept` header of a metadata-only LIST in protobuf.
pub const ACCEPT_METADATA_LIST: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// The `Accept` header of a metadata-only WATCH in protobuf.
pub const ACCEPT_METADATA: &str =
    "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use k8s_openapi::api::core::v1::Pod;
    use kube_core::PartialObjectMeta;

    use super::*;
    use crate::WatchEvent;

    const LIST_PB: &[u8] = include_bytes!("../../tests/fixtures/protobuf/pod-metadata-list.pb");
    const LIST_JSON: &[u8] = include_bytes!("../../tests/fixtures/protobuf/pod-metadata-list.json");
    const WATCH_PB: &[u8] =
        include_bytes!("../../tests/fixtures/protobuf/pod-metadata-watchlist.pb");

    fn json_item(skip_managed_fields: bool) -> PartialObjectMeta<Pod> {
        let v: serde_json::Value = serde_json::from_slice(LIST_JSON).unwrap();
        let mut item = v["items"][0].clone();
        if skip_managed_fields {
            item["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("managedFields");
        }
        serde_json::from_value(item).unwrap()
    }

    fn frames() -> Vec<bytes::Bytes> {
        let mut buf = BytesMut::from(WATCH_PB);
        let mut out = Vec::new();
        while let Some(f) = next_frame(&mut buf).unwrap() {
            out.push(f);
        }
        assert!(buf.is_empty(), "a partial frame left over");
        out
    }

    #[test]
    fn a_list_item_decodes_as_its_json_form_does() {
        for skip in [false, true] {
            let page = decode_list(LIST_PB.into()).unwrap();
            assert_eq!(page.resource_version, "72");
            assert_eq!(page.continue_token, None);
            assert_eq!(page.items.len(), 1);
            let item: PartialObjectMeta<Pod> =
                decode_list_item(page.items[0].clone(), page.item_types.clone(), skip).unwrap();
            let json = json_item(skip);
            assert_eq!(item.types, json.types);
            assert_eq!(item.metadata, json.metadata, "skip_managed_fields {skip}");
            assert_eq!(item.metadata.managed_fields.is_some(), !skip);
        }
    }

    #[test]
    fn a_watch_list_stream_decodes_to_events_and_its_end_bookmark() {
        let events: Vec<WatchEvent<PartialObjectMeta<Pod>>> = frames()
            .into_iter()
            .map(|f| decode_watch_frame(f, true).unwrap())
            .collect();
        let [added, end, modified, bookmark] = &events[..] else {
            panic!("{events:?}");
        };
        match added {
            WatchEvent::Added(m) => assert_eq!(m.metadata, json_item(true).metadata),
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(end, WatchEvent::Bookmark { initial_events_end: true, resource_version } if resource_version == "74"),
            "{end:?}"
        );
        match modified {
            WatchEvent::Modified(m) => {
                let a = m.metadata.annotations.as_ref().unwrap();
                assert_eq!(a["kinformer.dev/seq"], "1");
                assert_eq!(m.metadata.resource_version.as_deref(), Some("75"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            bookmark,
            WatchEvent::Bookmark {
                initial_events_end: false,
                ..
            }
        ));
    }

    #[test]
    fn what_is_encoded_decodes_back_to_the_same_object() {
        let page = decode_list(LIST_PB.into()).unwrap();
        let item: PartialObjectMeta<Pod> =
            decode_list_item(page.items[0].clone(), page.item_types.clone(), false).unwrap();
        assert!(item.metadata.managed_fields.is_some());
        let bytes = encode_partial_object_meta(item.types.as_ref(), &item.metadata);
        let frame = encode_watch_frame("MODIFIED", &bytes);
        let mut buf = BytesMut::from(&frame[..]);
        let frame = next_frame(&mut buf).unwrap().unwrap();
        match decode_watch_frame::<Pod>(frame, false).unwrap() {
            WatchEvent::Modified(back) => {
                assert_eq!(back.metadata, item.metadata);
                assert_eq!(back.types, item.types);
            }
            other => panic!("{other:?}"),
        }
        let status = encode_watch_frame(
            "ERROR",
            &encode_status(429, "TooManyRequests", "slow down", 3),
        );
        let mut buf = BytesMut::from(&status[..]);
        match decode_watch_frame::<Pod>(next_frame(&mut buf).unwrap().unwrap(), true).unwrap() {
            WatchEvent::Error(crate::ApiStatus {
                code,
                reason,
                retry_after,
                ..
            }) => {
                assert_eq!((code, reason.as_str()), (429, "TooManyRequests"));
                assert_eq!(retry_after, Some(std::time::Duration::from_secs(3)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_frames_are_typed_errors() {
        let frame = frames().remove(0);
        // Cut short: a protobuf decode error, not a panic.
        let cut = decode_watch_frame::<Pod>(frame.slice(..frame.len() / 2), true);
        assert!(
            matches!(
                cut,
                Err(crate::WireError::MalformedEvent(_) | crate::WireError::DecodeObject(_))
            ),
            "{cut:?}"
        );
        // An object without the envelope's magic.
        let bare = decode_partial_object_meta::<Pod>(bytes::Bytes::from_static(b"{}"), true);
        assert!(matches!(bare, Err(crate::WireError::DecodeObject(_))));
        // An unknown event type.
        let unknown = decode_watch_frame::<Pod>(bytes::Bytes::from_static(b"\x0a\x04NOPE"), true);
        assert!(matches!(unknown, Err(crate::WireError::UnknownEventType(t)) if t == "NOPE"));
        // A type that is not UTF-8: unknown too, shown as best it can be.
        let garbled = decode_watch_frame::<Pod>(bytes::Bytes::from_static(b"\x0a\x02\xffA"), true);
        assert!(
            matches!(&garbled, Err(crate::WireError::UnknownEventType(t)) if t == "\u{fffd}A"),
            "{garbled:?}"
        );
        // An ADDED event without an object.
        let empty = decode_watch_frame::<Pod>(bytes::Bytes::from_static(b"\x0a\x05ADDED"), true);
        assert!(matches!(empty, Err(crate::WireError::MissingObject(_))));
        // A length above the limit.
        let mut huge = BytesMut::from(&[0xff, 0xff, 0xff, 0xff, 0][..]);
        assert!(next_frame(&mut huge).is_err());
    }

    #[test]
    fn an_error_event_carries_its_status() {
        // Status{message "too old", reason "Expired", code 410}, enveloped.
        let mut status = vec![0x1a, 0x07];
        status.extend_from_slice(b"too old");
        status.extend_from_slice(&[0x22, 0x07]);
        status.extend_from_slice(b"Expired");
        status.extend_from_slice(&[0x30, 0x9a, 0x03]);
        let mut object = MAGIC.to_vec();
        object.extend_from_slice(&[0x12, status.len() as u8]);
        object.extend_from_slice(&status);
        let mut frame = vec![0x0a, 0x05];
        frame.extend_from_slice(b"ERROR");
        frame.extend_from_slice(&[0x12, object.len() as u8 + 2, 0x0a, object.len() as u8]);
        frame.extend_from_slice(&object);
        match decode_watch_frame::<Pod>(frame.into(), true) {
            Ok(WatchEvent::Error(e)) => assert!(e.is_expired(), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}

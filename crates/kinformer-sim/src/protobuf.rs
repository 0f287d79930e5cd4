//! Metadata-only LISTs and watches in Kubernetes' protobuf encoding
//! (`application/vnd.kubernetes.protobuf`, `...;stream=watch` for watches),
//! as kube-apiserver answers a request whose `Accept` puts
//! `application/vnd.kubernetes.protobuf;as=PartialObjectMetadata[List];...`
//! first.
//!
//! The sim writes every watch line in JSON; a protobuf watch sends each line
//! converted to a frame (an event's frame is built once and shared by every
//! watcher, like its JSON line), and a protobuf LIST page is built from each
//! item's stored metadata. Both are written with
//! `kinformer_reflector::protobuf`'s encoder, whose decoder is checked against
//! kube-apiserver's own bytes. Full objects stay JSON (allowed: clients list
//! the JSON type after it).

use bytes::Bytes;
use http::HeaderMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use kinformer_reflector::protobuf::{
    encode_partial_object_meta, encode_partial_object_meta_list, encode_status, encode_watch_frame,
};
use kube_core::TypeMeta;
use serde::Deserialize;

use crate::history::Event;

/// The content type of a protobuf watch body.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// The content type of a protobuf LIST body.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Whether `Accept` asks for the protobuf encoding before JSON.
pub fn wants_protobuf(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|first| {
            first
                .trim()
                .starts_with("application/vnd.kubernetes.protobuf")
        })
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    ty: String,
    object: Object,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Object {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    metadata: Option<ObjectMeta>,
    #[serde(default)]
    code: u16,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    details: Option<Details>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Details {
    #[serde(default)]
    retry_after_seconds: u32,
}

/// A frame no client can decode (the protobuf form of a malformed line).
pub fn malformed_frame() -> Bytes {
    Bytes::from_static(&[0, 0, 0, 3, 0xff, 0xff, 0xff])
}

/// The protobuf frame of one JSON watch line (metadata-only or `Status`);
/// a line that is not one becomes [`malformed_frame`].
pub fn frame_of_line(line: &[u8]) -> Bytes {
    let Ok(Line { ty, object }) = serde_json::from_slice::<Line>(line) else {
        return malformed_frame();
    };
    let enveloped = if object.kind == "Status" {
        let retry = object.details.map_or(0, |d| d.retry_after_seconds);
        encode_status(object.code, &object.reason, &object.message, retry)
    } else {
        let types = TypeMeta {
            api_version: object.api_version,
            kind: object.kind,
        };
        encode_partial_object_meta(Some(&types), &object.metadata.unwrap_or_default())
    };
    Bytes::from(encode_watch_frame(&ty, &enveloped))
}

/// A metadata-only LIST page in protobuf: an enveloped
/// `PartialObjectMetadataList` of the page's items' metadata.
pub fn list_body(page: &crate::list::Page) -> Bytes {
    let metas: Vec<ObjectMeta> = page.items.iter().map(|o| stored_metadata(o)).collect();
    let list = ListMeta {
        resource_version: Some(page.rv.to_string()),
        continue_: page.continue_token.clone(),
        remaining_item_count: page.remaining.map(|r| i64::try_from(r).unwrap_or(i64::MAX)),
        ..ListMeta::default()
    };
    Bytes::from(encode_partial_object_meta_list(&list, &metas))
}

/// A stored object's `metadata` (empty, logged, when it cannot be read: the
/// sim stores only objects it could read).
fn stored_metadata(obj: &crate::object::StoredObject) -> ObjectMeta {
    let json = obj.metadata_at.clone().and_then(|r| obj.bytes.get(r));
    match json.map(serde_json::from_slice::<ObjectMeta>) {
        Some(Ok(m)) => m,
        other => {
            tracing::warn!(key = %obj.meta.key(), error = ?other.map(|r| r.err()), "stored object without readable metadata");
            ObjectMeta::default()
        }
    }
}

/// The frame of a committed event's metadata-only line, built once (the JSON line it is
/// built from is not kept unless a JSON watcher asked for it: a million held events would
/// hold both).
pub fn event_frame(ev: &Event) -> Bytes {
    ev.meta_frame
        .get_or_init(|| frame_of_line(&crate::metadata::uncached_event_line(ev)))
        .clone()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_reflector::WatchEvent;
    use kinformer_reflector::protobuf::{decode_watch_frame, next_frame};

    use super::*;

    fn decode(frame: &Bytes) -> WatchEvent<kube_core::PartialObjectMeta<Pod>> {
        let mut buf = bytes::BytesMut::from(&frame[..]);
        let f = next_frame(&mut buf).unwrap().unwrap();
        assert!(buf.is_empty());
        decode_watch_frame(f, false).unwrap()
    }

    #[test]
    fn a_metadata_line_and_its_frame_carry_the_same_object() {
        let pod = crate::template::pod("ns-1", "web-1", 7);
        let bytes = serde_json::to_vec(&pod).unwrap();
        let line = crate::history::watch_line(
            crate::history::EventType::Modified,
            &crate::metadata::partial(&bytes),
        );
        let json: serde_json::Value = serde_json::from_slice(&line).unwrap();
        let expected: ObjectMeta =
            serde_json::from_value(json["object"]["metadata"].clone()).unwrap();
        match decode(&frame_of_line(&line)) {
            WatchEvent::Modified(m) => {
                assert_eq!(m.metadata, expected);
                assert_eq!(m.types.unwrap().kind, "PartialObjectMetadata");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_and_bookmarks_become_frames_too() {
        let line = crate::status::ApiError::expired("too old").to_watch_line();
        assert!(matches!(decode(&frame_of_line(&line)), WatchEvent::Error(e) if e.is_expired()));
        let def = crate::resource::ResourceDef::builtins().remove(0);
        let line =
            crate::watch::bookmark_line(&def, crate::metadata::Representation::Metadata, 9, true);
        assert!(matches!(
            decode(&frame_of_line(&line)),
            WatchEvent::Bookmark { resource_version, initial_events_end: true } if resource_version == "9"
        ));
        assert_eq!(frame_of_line(b"{not json"), malformed_frame());
    }

    #[test]
    fn protobuf_is_chosen_only_when_asked_first() {
        let mut h = HeaderMap::new();
        h.insert(http::header::ACCEPT, "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json".parse().unwrap());
        assert!(wants_protobuf(&h));
        h.insert(
            http::header::ACCEPT,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
                .parse()
                .unwrap(),
        );
        assert!(!wants_protobuf(&h));
    }
}

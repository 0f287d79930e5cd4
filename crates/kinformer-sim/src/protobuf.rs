//! Metadata-only LISTs and watches in Kubernetes' protobuf encoding
//! (`application/vnd.kubernetes.protobuf`, `...;stream=watch` for watches),
//! as kube-apiserver answers a request whose `Accept` puts
//! `application/vnd.kubernetes.protobuf;as=PartialObjectMetadata[List];...`
//! first.
//!
//! An object's frame (a watch event, or an initial event of a WatchList
//! stream) and a protobuf LIST page are transcoded from each stored object's
//! JSON `metadata` (an event's frame is built once and shared by every
//! watcher, like its JSON line); other watch lines (bookmarks, errors) are
//! converted from their JSON line. Both are written with
//! `kinformer_wire::protobuf`'s encoders, whose decoder is checked
//! against kube-apiserver's own bytes. Full objects stay JSON (allowed:
//! clients list the JSON type after it).

use bytes::Bytes;
use http::HeaderMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use kinformer_wire::protobuf::{
    encode_partial_object_meta, encode_partial_object_meta_list,
    encode_partial_object_meta_list_messages, encode_status, encode_watch_frame,
    envelope_partial_object_meta, partial_object_meta_message,
};
use kube_core::TypeMeta;
use serde::Deserialize;

use crate::history::{Event, EventType};
use crate::object::StoredObject;

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

/// The type of every metadata-only object.
fn partial_types() -> TypeMeta {
    TypeMeta {
        api_version: "meta.k8s.io/v1".into(),
        kind: "PartialObjectMetadata".into(),
    }
}

/// A stored object's JSON `metadata` transcoded (`None`, logged, when it
/// cannot be: the sim stores only objects it could read).
fn transcode(obj: &StoredObject) -> Option<Bytes> {
    match obj.metadata_bytes().map(partial_object_meta_message) {
        Some(Ok(message)) => Some(message),
        other => {
            tracing::warn!(key = %obj.meta.key(), error = ?other.map(|r| r.err()), "stored object's metadata not transcoded");
            None
        }
    }
}

/// A stored object's metadata as a bare `PartialObjectMetadata` message,
/// transcoded from its JSON once and kept with the object (kube-apiserver
/// holds decoded objects, whose protobuf encoding costs it little; the sim
/// holds JSON, so it keeps what it transcoded instead of paying ~5 µs per
/// object on every LIST and WatchList stream; a replaced version forgets
/// it).
pub fn stored_message(obj: &StoredObject) -> Option<Bytes> {
    if let Some(message) = obj.protobuf_message.get() {
        return Some(message);
    }
    Some(obj.protobuf_message.keep(transcode(obj)?))
}

/// The frame of an event of type `ty` carrying a stored object's metadata
/// (built from its metadata-only JSON line when the metadata cannot be
/// transcoded). An object transcoded here keeps the frame's tail as its
/// message (the message ends the frame), not a copy of it.
pub fn frame_of_stored(ty: EventType, obj: &StoredObject) -> Bytes {
    let frame = |message: Bytes| {
        let enveloped = envelope_partial_object_meta(Some(&partial_types()), message);
        Bytes::from(encode_watch_frame(ty.as_str(), &enveloped))
    };
    if let Some(message) = obj.protobuf_message.get() {
        return frame(message);
    }
    let Some(message) = transcode(obj) else {
        let mut line = ty.line_prefix().to_vec();
        crate::metadata::write_partial_stored(obj, &mut line);
        line.extend_from_slice(crate::history::LINE_SUFFIX);
        return frame_of_line(&line);
    };
    let built = frame(message.clone());
    let tail = built
        .len()
        .checked_sub(message.len())
        .map(|at| built.slice(at..));
    obj.protobuf_message.keep(match tail {
        Some(tail) if tail == message => tail,
        _ => message,
    });
    built
}

/// A metadata-only LIST page in protobuf: an enveloped
/// `PartialObjectMetadataList` of the page's items' metadata.
pub fn list_body(page: &crate::list::Page) -> Bytes {
    let list = ListMeta {
        resource_version: Some(page.rv.to_string()),
        continue_: page.continue_token.clone(),
        remaining_item_count: page.remaining.map(|r| i64::try_from(r).unwrap_or(i64::MAX)),
        ..ListMeta::default()
    };
    let messages: Option<Vec<Bytes>> = page.items.iter().map(|o| stored_message(o)).collect();
    match messages {
        Some(messages) => Bytes::from(encode_partial_object_meta_list_messages(&list, messages)),
        // An item that cannot be transcoded (logged) goes as empty metadata.
        None => {
            let metas: Vec<ObjectMeta> = page.items.iter().map(|o| stored_metadata(o)).collect();
            Bytes::from(encode_partial_object_meta_list(&list, &metas))
        }
    }
}

/// A stored object's `metadata` (empty, logged, when it cannot be read: the
/// sim stores only objects it could read).
fn stored_metadata(obj: &StoredObject) -> ObjectMeta {
    match obj
        .metadata_bytes()
        .map(serde_json::from_slice::<ObjectMeta>)
    {
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
        .get_or_init(|| frame_of_stored(ev.ty, &ev.obj))
        .clone()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use kinformer_wire::WatchEvent;
    use kinformer_wire::protobuf::{decode_watch_frame, next_frame};

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
    fn a_stored_objects_frame_carries_its_metadata_line_and_keeps_its_tail() {
        let pod = crate::template::pod("ns-1", "web-1", 7);
        let bytes = Bytes::from(serde_json::to_vec(&pod).unwrap());
        let obj = StoredObject::new(bytes.clone(), crate::object::ObjMeta::default());
        let line = crate::history::watch_line(EventType::Added, &crate::metadata::partial(&bytes));
        let frame = frame_of_stored(EventType::Added, &obj);
        assert_eq!(frame, frame_of_line(&line));
        // The object keeps the frame's tail (no copy), and later frames are built from it.
        let kept = obj.protobuf_message.get().unwrap();
        assert_eq!(kept.as_ptr(), frame[frame.len() - kept.len()..].as_ptr());
        assert_eq!(frame_of_stored(EventType::Added, &obj), frame);
        assert!(matches!(
            decode(&frame_of_stored(EventType::Deleted, &obj)),
            WatchEvent::Deleted(_)
        ));
        // An object without readable metadata goes through its JSON line (empty metadata).
        let bare = StoredObject::new(
            Bytes::from_static(b"{\"kind\":\"Pod\"}"),
            Default::default(),
        );
        match decode(&frame_of_stored(EventType::Added, &bare)) {
            WatchEvent::Added(m) => assert_eq!(m.metadata, ObjectMeta::default()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn commits_transcode_when_asked_and_a_replaced_version_forgets_its_message() {
        use crate::resource::{Registry, ResourceDef};
        use crate::store::{Store, StoreConfig};
        let store = |protobuf_on_commit| {
            Store::new(
                Registry::new(ResourceDef::builtins()),
                StoreConfig {
                    protobuf_on_commit,
                    ..StoreConfig::default()
                },
            )
        };
        let (eager, lazy) = (store(true), store(false));
        let res = eager.registry().find("", "v1", "pods").unwrap();
        for s in [&eager, &lazy] {
            s.create(res, None, crate::template::pod("ns-1", "web-1", 1))
                .unwrap();
        }
        let first = eager.get(res, "ns-1", "web-1").unwrap();
        assert!(
            first.protobuf_message.get().is_some(),
            "transcoded at commit"
        );
        let untouched = lazy.get(res, "ns-1", "web-1").unwrap();
        assert!(
            untouched.protobuf_message.get().is_none(),
            "not until asked"
        );
        assert!(stored_message(&untouched).is_some());
        assert!(
            untouched.protobuf_message.get().is_some(),
            "kept once asked"
        );
        eager
            .update(
                res,
                Some("ns-1"),
                Some("web-1"),
                crate::template::pod("ns-1", "web-1", 2),
            )
            .unwrap();
        assert!(
            first.protobuf_message.get().is_none(),
            "the replaced version forgot it"
        );
        let second = eager.get(res, "ns-1", "web-1").unwrap();
        assert!(second.protobuf_message.get().is_some());
        // Its frame is built again when asked for.
        assert!(matches!(
            decode(&frame_of_stored(EventType::Modified, &first)),
            WatchEvent::Modified(_)
        ));
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

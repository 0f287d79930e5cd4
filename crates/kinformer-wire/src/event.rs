//! Decoding one watch event line (`{"type":..,"object":{..}}`) without
//! trusting it: malformed JSON, unknown types, missing objects and objects
//! without a name are typed errors, never panics.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::marker::PhantomData;

use kube_core::Resource;
use serde::Deserialize;
use serde::de::{DeserializeOwned, DeserializeSeed};
use serde_json::value::RawValue;

use crate::error::WireError;
use crate::event_line::{Line, LineSeed, ObjectEvent};
use crate::managed_fields::Shape;
use crate::object_decode::{ObjectDecode, SerdeDecode};
use crate::status::{ApiStatus, StatusBody};

/// The annotation of the bookmark that ends a WatchList's initial events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// A decoded watch event.
#[derive(Debug)]
pub enum WatchEvent<K> {
    /// `ADDED`.
    Added(K),
    /// `MODIFIED`.
    Modified(K),
    /// `DELETED` (the object's final state).
    Deleted(K),
    /// `BOOKMARK`: progress to `resource_version`.
    Bookmark {
        /// The resourceVersion reached.
        resource_version: String,
        /// The WatchList initial-events-end marker.
        initial_events_end: bool,
    },
    /// `ERROR`: the watch ends with this status.
    Error(ApiStatus),
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    ty: String,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
pub(crate) struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Deserialize, Default)]
pub(crate) struct BookmarkMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// Decodes a watch line.
///
/// ```
/// use kinformer_wire::{WatchEvent, event::decode_event};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let line = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}}}"#;
/// assert!(matches!(decode_event::<ConfigMap>(line), Ok(WatchEvent::Added(_))));
/// assert!(decode_event::<ConfigMap>(b"{not json").is_err());
/// ```
pub fn decode_event<K: Resource + DeserializeOwned>(
    line: &[u8],
) -> Result<WatchEvent<K>, WireError> {
    decode_event_with(line, false)
}

/// [`decode_event`], optionally skipping the object's
/// `metadata.managedFields` while decoding (see [`crate::prune`]).
///
/// The line is parsed once: the object is decoded as its type (read first,
/// as the apiserver writes it) says. A line whose `object` comes before its
/// `type` takes a slower path that finds the object first.
pub fn decode_event_with<K: Resource + DeserializeOwned>(
    line: &[u8],
    skip_managed_fields: bool,
) -> Result<WatchEvent<K>, WireError> {
    decode_event_as::<K, SerdeDecode>(line, skip_managed_fields)
}

/// [`decode_event_with`], the object decoded by `D` (see
/// [`crate::object_decode`]).
pub fn decode_event_as<K: Resource + DeserializeOwned, D: ObjectDecode<K>>(
    line: &[u8],
    skip_managed_fields: bool,
) -> Result<WatchEvent<K>, WireError> {
    let in_object = Cell::new(false);
    let skip = skip_managed_fields.then_some(Shape::WatchLine);
    let parsed = crate::json::with_document(line, skip, |de, line_len| {
        LineSeed {
            skip_managed_fields,
            line_len,
            in_object: &in_object,
            object: PhantomData::<fn() -> (K, D)>,
        }
        .deserialize(de)
    });
    let parsed = match parsed {
        Ok(parsed) => parsed,
        Err(e) if in_object.get() => return Err(WireError::DecodeObject(e.to_string())),
        Err(e) => return Err(WireError::MalformedEvent(e.to_string())),
    };
    match parsed {
        Line::Object(ty, obj) => {
            let obj = check_name(obj)?;
            Ok(match ty {
                ObjectEvent::Added => WatchEvent::Added(obj),
                ObjectEvent::Modified => WatchEvent::Modified(obj),
                ObjectEvent::Deleted => WatchEvent::Deleted(obj),
            })
        }
        Line::Bookmark(b) => Ok(bookmark(b)),
        Line::Error(status) => Ok(error_event(status)),
        Line::Unknown(ty) => Err(WireError::UnknownEventType(ty)),
        Line::MissingObject(ty) => Err(WireError::MissingObject(ty)),
        Line::ObjectFirst => decode_event_in_two_passes::<K, D>(line, skip_managed_fields),
    }
}

/// The slow path: find the object's bytes with `serde_json`, then decode them.
fn decode_event_in_two_passes<K: Resource + DeserializeOwned, D: ObjectDecode<K>>(
    line: &[u8],
    skip_managed_fields: bool,
) -> Result<WatchEvent<K>, WireError> {
    let raw: RawEvent<'_> =
        serde_json::from_slice(line).map_err(|e| WireError::MalformedEvent(e.to_string()))?;
    let object = |ty: &str| {
        raw.object
            .ok_or_else(|| WireError::MissingObject(ty.into()))
    };
    let decode =
        |ty: &str| decode_object_as::<K, D>(object(ty)?.get().as_bytes(), skip_managed_fields);
    match raw.ty.as_str() {
        "ADDED" => decode("ADDED").map(WatchEvent::Added),
        "MODIFIED" => decode("MODIFIED").map(WatchEvent::Modified),
        "DELETED" => decode("DELETED").map(WatchEvent::Deleted),
        "BOOKMARK" => {
            let b: BookmarkObject = serde_json::from_str(object("BOOKMARK")?.get())
                .map_err(|e| WireError::MalformedEvent(e.to_string()))?;
            Ok(bookmark(b))
        }
        "ERROR" => Ok(error_event(
            raw.object.and_then(|o| serde_json::from_str(o.get()).ok()),
        )),
        other => Err(WireError::UnknownEventType(other.to_string())),
    }
}

fn bookmark<K>(b: BookmarkObject) -> WatchEvent<K> {
    let initial_events_end = b
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
        .is_some_and(|v| v == "true");
    WatchEvent::Bookmark {
        resource_version: b.metadata.resource_version.unwrap_or_default(),
        initial_events_end,
    }
}

/// An `ERROR` event; a status that cannot be read counts as an empty one.
fn error_event<K>(status: Option<StatusBody>) -> WatchEvent<K> {
    let st = status.unwrap_or_default();
    let code = st.code;
    WatchEvent::Error(st.into_status(code, None))
}

/// Decodes one object and checks it can be cached (has a name).
pub fn decode_object<K: Resource + DeserializeOwned>(bytes: &[u8]) -> Result<K, WireError> {
    decode_object_with(bytes, false)
}

/// [`decode_object`], optionally skipping `metadata.managedFields` while
/// decoding (see [`crate::prune`]).
pub fn decode_object_with<K: Resource + DeserializeOwned>(
    bytes: &[u8],
    skip_managed_fields: bool,
) -> Result<K, WireError> {
    decode_object_as::<K, SerdeDecode>(bytes, skip_managed_fields)
}

/// [`decode_object_with`], the object decoded by `D` (see
/// [`crate::object_decode`]).
pub fn decode_object_as<K: Resource + DeserializeOwned, D: ObjectDecode<K>>(
    bytes: &[u8],
    skip_managed_fields: bool,
) -> Result<K, WireError> {
    let obj = crate::json::from_slice_as::<K, D>(bytes, skip_managed_fields)
        .map_err(|e| WireError::DecodeObject(e.to_string()))?;
    check_name(obj)
}

/// Refuses objects without `metadata.name`.
pub fn check_name<K: Resource>(obj: K) -> Result<K, WireError> {
    match obj.meta().name.as_deref() {
        Some(n) if !n.is_empty() => Ok(obj),
        _ => Err(WireError::MissingName {
            namespace: obj.meta().namespace.clone(),
        }),
    }
}

/// The resourceVersion of an object, if any.
pub fn resource_version<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta()
        .resource_version
        .as_deref()
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn bookmark_with_initial_events_end() {
        let line = br#"{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        match decode_event::<Pod>(line) {
            Ok(WatchEvent::Bookmark {
                resource_version,
                initial_events_end,
            }) => {
                assert_eq!(resource_version, "12");
                assert!(initial_events_end);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_events_are_typed_errors() {
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"SURPRISE","object":{}}"#),
            Err(WireError::UnknownEventType(t)) if t == "SURPRISE"
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"ADDED"}"#),
            Err(WireError::MissingObject(_))
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"ADDED","object":{"kind":"Pod"}}"#),
            Err(WireError::MissingName { .. })
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"ADDED","object":{"metadata":{"name":5}}}"#),
            Err(WireError::DecodeObject(_))
        ));
        assert!(matches!(
            decode_event::<Pod>(b"{\"type\":\"MODIFIED\",\"object\":{this is not json}"),
            Err(WireError::MalformedEvent(_))
        ));
    }

    /// A line as the apiserver writes it: `type` first.
    fn pod_line(ty: &str) -> Vec<u8> {
        let pod = crate::testing::POD.trim_end();
        format!(r#"{{"type":"{ty}","object":{pod}}}"#).into_bytes()
    }

    fn object_of(e: WatchEvent<Pod>) -> (&'static str, Pod) {
        match e {
            WatchEvent::Added(p) => ("ADDED", p),
            WatchEvent::Modified(p) => ("MODIFIED", p),
            WatchEvent::Deleted(p) => ("DELETED", p),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn one_pass_decodes_as_two_passes_do() {
        for ty in ["ADDED", "MODIFIED", "DELETED"] {
            for skip in [false, true] {
                let line = pod_line(ty);
                let one = object_of(decode_event_with::<Pod>(&line, skip).unwrap());
                let two =
                    object_of(decode_event_in_two_passes::<Pod, SerdeDecode>(&line, skip).unwrap());
                assert_eq!(one, two);
                assert_eq!(one.0, ty);
                assert_eq!(one.1.metadata.managed_fields.is_none(), skip);
            }
        }
    }

    /// Which path a line takes: the one-pass reader must answer with the
    /// object for a type-first line, and hand an object-first line back.
    fn one_pass(line: &[u8]) -> Line<Pod> {
        let in_object = Cell::new(false);
        crate::json::with_document(line, None, |de, line_len| {
            LineSeed {
                skip_managed_fields: false,
                line_len,
                in_object: &in_object,
                object: PhantomData::<fn() -> (Pod, SerdeDecode)>,
            }
            .deserialize(de)
        })
        .unwrap()
    }

    #[test]
    fn a_type_first_line_is_read_in_one_pass() {
        assert!(matches!(
            one_pass(&pod_line("MODIFIED")),
            Line::Object(ObjectEvent::Modified, _)
        ));
        let object_first = br#"{"object":{"metadata":{"name":"p"}},"type":"ADDED"}"#;
        assert!(matches!(one_pass(object_first), Line::ObjectFirst));
    }

    #[test]
    fn object_before_type_and_escaped_or_extra_keys_still_decode() {
        let pod: serde_json::Value = serde_json::from_str(crate::testing::POD).unwrap();
        let object_first = serde_json::to_vec(&serde_json::json!({"object": pod})).unwrap();
        // {"object":{..}} then ,"type":"MODIFIED"}: serde_json keeps the order given.
        let mut line = object_first[..object_first.len() - 1].to_vec();
        line.extend_from_slice(br#","type":"MODIFIED"}"#);
        assert_eq!(object_of(decode_event::<Pod>(&line).unwrap()).0, "MODIFIED");

        let escaped = br#"{"extra":[1,{"a":2}],"type":"ADDED","object":{"metadata":{"name":"p"}},"more":null}"#;
        let (ty, p) = object_of(decode_event::<Pod>(escaped).unwrap());
        assert_eq!((ty, p.metadata.name.as_deref()), ("ADDED", Some("p")));
    }

    #[test]
    fn an_unreadable_error_status_is_an_empty_one() {
        let line = br#"{"type":"ERROR","object":{"code":"not a number"}}"#;
        assert!(matches!(
            decode_event::<Pod>(line),
            Ok(WatchEvent::Error(_))
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"ERROR"}"#),
            Ok(WatchEvent::Error(_))
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"object":{}}"#),
            Err(WireError::MalformedEvent(_))
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"BOOKMARK"}"#),
            Err(WireError::MissingObject(_))
        ));
    }

    #[test]
    fn error_event_carries_status() {
        let line = br#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}"#;
        match decode_event::<Pod>(line) {
            Ok(WatchEvent::Error(e)) => assert!(e.is_expired()),
            other => panic!("{other:?}"),
        }
    }
}

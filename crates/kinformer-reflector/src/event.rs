//! Decoding one watch event line (`{"type":..,"object":{..}}`) without
//! trusting it: malformed JSON, unknown types, missing objects and objects
//! without a name are typed errors, never panics.

use std::collections::BTreeMap;

use kube_core::Resource;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::error::ReflectorError;
use crate::transport::StatusBody;

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
    Error(ReflectorError),
}

#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(rename = "type")]
    ty: String,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Deserialize, Default)]
struct BookmarkMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// Decodes a watch line.
///
/// ```
/// use kinformer_reflector::{WatchEvent, event::decode_event};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let line = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"5"}}}"#;
/// assert!(matches!(decode_event::<ConfigMap>(line), Ok(WatchEvent::Added(_))));
/// assert!(decode_event::<ConfigMap>(b"{not json").is_err());
/// ```
pub fn decode_event<K: Resource + DeserializeOwned>(
    line: &[u8],
) -> Result<WatchEvent<K>, ReflectorError> {
    decode_event_with(line, false)
}

/// [`decode_event`], optionally skipping the object's
/// `metadata.managedFields` while decoding (see [`crate::prune`]).
pub fn decode_event_with<K: Resource + DeserializeOwned>(
    line: &[u8],
    skip_managed_fields: bool,
) -> Result<WatchEvent<K>, ReflectorError> {
    let raw: RawEvent<'_> =
        serde_json::from_slice(line).map_err(|e| ReflectorError::MalformedEvent(e.to_string()))?;
    let object = |ty: &str| {
        raw.object
            .ok_or_else(|| ReflectorError::MissingObject(ty.into()))
    };
    match raw.ty.as_str() {
        "ADDED" => decode_object_with(object("ADDED")?.get().as_bytes(), skip_managed_fields)
            .map(WatchEvent::Added),
        "MODIFIED" => decode_object_with(object("MODIFIED")?.get().as_bytes(), skip_managed_fields)
            .map(WatchEvent::Modified),
        "DELETED" => decode_object_with(object("DELETED")?.get().as_bytes(), skip_managed_fields)
            .map(WatchEvent::Deleted),
        "BOOKMARK" => {
            let b: BookmarkObject = serde_json::from_str(object("BOOKMARK")?.get())
                .map_err(|e| ReflectorError::MalformedEvent(e.to_string()))?;
            let initial_events_end = b
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
                .is_some_and(|v| v == "true");
            Ok(WatchEvent::Bookmark {
                resource_version: b.metadata.resource_version.unwrap_or_default(),
                initial_events_end,
            })
        }
        "ERROR" => {
            let st: StatusBody = raw
                .object
                .and_then(|o| serde_json::from_str(o.get()).ok())
                .unwrap_or_default();
            let code = st.code;
            Ok(WatchEvent::Error(st.into_error(code, None)))
        }
        other => Err(ReflectorError::UnknownEventType(other.to_string())),
    }
}

/// Decodes one object and checks it can be cached (has a name).
pub fn decode_object<K: Resource + DeserializeOwned>(bytes: &[u8]) -> Result<K, ReflectorError> {
    decode_object_with(bytes, false)
}

/// [`decode_object`], optionally skipping `metadata.managedFields` while
/// decoding (see [`crate::prune`]).
pub fn decode_object_with<K: Resource + DeserializeOwned>(
    bytes: &[u8],
    skip_managed_fields: bool,
) -> Result<K, ReflectorError> {
    let obj = crate::json::from_slice(bytes, skip_managed_fields)
        .map_err(|e| ReflectorError::DecodeObject(e.to_string()))?;
    check_name(obj)
}

/// Refuses objects without `metadata.name`.
pub fn check_name<K: Resource>(obj: K) -> Result<K, ReflectorError> {
    match obj.meta().name.as_deref() {
        Some(n) if !n.is_empty() => Ok(obj),
        _ => Err(ReflectorError::MissingName {
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
            Err(ReflectorError::UnknownEventType(t)) if t == "SURPRISE"
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"ADDED"}"#),
            Err(ReflectorError::MissingObject(_))
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"ADDED","object":{"kind":"Pod"}}"#),
            Err(ReflectorError::MissingName { .. })
        ));
        assert!(matches!(
            decode_event::<Pod>(br#"{"type":"ADDED","object":{"metadata":{"name":5}}}"#),
            Err(ReflectorError::DecodeObject(_))
        ));
        assert!(matches!(
            decode_event::<Pod>(b"{\"type\":\"MODIFIED\",\"object\":{this is not json}"),
            Err(ReflectorError::MalformedEvent(_))
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

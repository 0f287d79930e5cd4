//! Stored objects: pre-encoded JSON bytes plus the few parsed fields selectors and keys need.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

/// The parsed fields of an object the sim needs without touching its JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjMeta {
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `spec.nodeName` (pods).
    pub node_name: Option<String>,
    /// The object's resourceVersion.
    pub rv: u64,
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.generation`.
    pub generation: i64,
    /// `metadata.creationTimestamp`.
    pub created: String,
}

impl ObjMeta {
    /// Extract the fields from a JSON object (resourceVersion unparsed ones count as 0).
    pub fn from_value(v: &Value) -> Self {
        let md = v.get("metadata");
        let s = |k: &str| {
            md.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let labels = md
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let node_name = v
            .get("spec")
            .and_then(|s| s.get("nodeName"))
            .and_then(Value::as_str)
            .map(str::to_string);
        ObjMeta {
            namespace: s("namespace"),
            name: s("name"),
            labels,
            node_name,
            rv: s("resourceVersion").parse().unwrap_or(0),
            uid: s("uid"),
            generation: md
                .and_then(|m| m.get("generation"))
                .and_then(Value::as_i64)
                .unwrap_or(0),
            created: s("creationTimestamp"),
        }
    }

    /// The store key: `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> Arc<str> {
        object_key(&self.namespace, &self.name)
    }
}

/// Re-encode an object with another `metadata.resourceVersion` (rare paths only).
pub fn with_resource_version(obj: &[u8], rv: u64) -> Option<Bytes> {
    let Ok(Value::Object(mut m)) = serde_json::from_slice::<Value>(obj) else {
        return None;
    };
    with_metadata(&mut m, |md| {
        md.insert("resourceVersion".into(), Value::String(rv.to_string()))
    });
    let mut out = Vec::new();
    crate::encode::write(&mut out, &m).ok()?;
    Some(Bytes::from(out))
}

/// Whether the encoded object `old` has a different `spec` than `new` (compared as compact JSON,
/// which serde_json writes with sorted keys, so equal values encode equally).
pub fn spec_changed(old: &[u8], new_spec: Option<&Value>) -> bool {
    #[derive(serde::Deserialize)]
    struct SpecOnly<'a> {
        #[serde(borrow)]
        spec: Option<&'a serde_json::value::RawValue>,
    }
    let old_spec = serde_json::from_slice::<SpecOnly<'_>>(old)
        .ok()
        .and_then(|s| s.spec)
        .map(|r| r.get().to_string());
    let new_spec = new_spec.and_then(|s| serde_json::to_string(s).ok());
    old_spec != new_spec
}

/// The store key of an object: `namespace/name`, or `name` when the namespace is empty.
pub fn object_key(namespace: &str, name: &str) -> Arc<str> {
    if namespace.is_empty() {
        Arc::from(name)
    } else {
        Arc::from(format!("{namespace}/{name}"))
    }
}

/// One version of an object as stored: encoded once, shared by lists, gets and watch events.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// The object's JSON (no trailing newline).
    pub bytes: Bytes,
    /// Parsed fields.
    pub meta: ObjMeta,
    /// Where the `metadata` member's value lies in `bytes`, found once when the object is stored
    /// (metadata-only responses cut it out per request).
    pub metadata_at: Option<std::ops::Range<usize>>,
    /// The `metadata` as a bare protobuf `PartialObjectMetadata` message, transcoded once when
    /// first asked for (see [`crate::protobuf::stored_message`]).
    pub(crate) protobuf_message: ProtobufMessage,
}

/// A stored object's protobuf message, once transcoded; forgotten when the object is replaced
/// (a held version is rarely sent again, and a million of them would hold their messages).
#[derive(Debug, Default)]
pub(crate) struct ProtobufMessage(parking_lot::Mutex<Option<Bytes>>);

impl Clone for ProtobufMessage {
    fn clone(&self) -> Self {
        Self(parking_lot::Mutex::new(self.get()))
    }
}

impl ProtobufMessage {
    /// The message, if kept.
    pub(crate) fn get(&self) -> Option<Bytes> {
        self.0.lock().clone()
    }

    /// Keeps `message` unless one is kept already; returns the one kept.
    pub(crate) fn keep(&self, message: Bytes) -> Bytes {
        self.0.lock().get_or_insert(message).clone()
    }

    /// Forgets the message (it is transcoded again if asked for).
    pub(crate) fn forget(&self) {
        self.0.lock().take();
    }
}

/// Where the top-level `metadata` member's value lies in an encoded object.
pub fn metadata_range(bytes: &[u8]) -> Option<std::ops::Range<usize>> {
    crate::json_scan::member(bytes, b"metadata").map(|m| {
        let start = m.as_ptr() as usize - bytes.as_ptr() as usize;
        start..start + m.len()
    })
}

/// An object encoded outside the store lock, its resourceVersion (and commit time) left to stamp at
/// commit: the bulk-fill fast path (see [`crate::template::PodTemplate`]).
#[derive(Debug, Clone, Default)]
pub struct PreEncoded {
    /// The object's JSON with the stamped values left out.
    pub bytes: Vec<u8>,
    /// Where the resourceVersion digits go (between the quotes of `"resourceVersion":""`).
    pub rv_at: usize,
    /// Where the commit-time digits go (inside the annotation's quotes), when stamped.
    pub commit_at: Option<usize>,
    /// Where the `metadata` member's value lies in `bytes` (found outside the store lock).
    pub metadata_at: Option<std::ops::Range<usize>>,
    /// Parsed fields; `rv` is set at commit.
    pub meta: ObjMeta,
}

impl StoredObject {
    /// An object as stored, its `metadata` member located by a scan.
    pub fn new(bytes: Bytes, meta: ObjMeta) -> Self {
        let metadata_at = metadata_range(&bytes);
        Self::located(bytes, meta, metadata_at)
    }

    /// An object as stored whose `metadata` member is already located (e.g. carried over from the
    /// version it was spliced from; `None` leaves metadata-only responses to scan for it).
    pub fn located(
        bytes: Bytes,
        meta: ObjMeta,
        metadata_at: Option<std::ops::Range<usize>>,
    ) -> Self {
        Self {
            bytes,
            meta,
            metadata_at,
            protobuf_message: ProtobufMessage::default(),
        }
    }

    /// The `metadata` member's value, if the object has one.
    pub fn metadata_bytes(&self) -> Option<&[u8]> {
        self.metadata_at.clone().and_then(|r| self.bytes.get(r))
    }

    /// Parse the stored bytes back into a JSON value.
    pub fn to_value(&self) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(&self.bytes)
    }
}

/// Run `f` on `metadata`, creating it when missing or not an object.
pub fn with_metadata<R>(
    obj: &mut Map<String, Value>,
    f: impl FnOnce(&mut Map<String, Value>) -> R,
) -> R {
    let md = obj
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(m) = md {
        return f(m);
    }
    let mut m = Map::new();
    let r = f(&mut m);
    *md = Value::Object(m);
    r
}

/// Set one annotation, creating `metadata.annotations` when needed.
pub fn set_annotation(obj: &mut Map<String, Value>, key: &str, value: String) {
    with_metadata(obj, |md| {
        let ann = md
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !ann.is_object() {
            *ann = Value::Object(Map::new());
        }
        if let Value::Object(a) = ann {
            a.insert(key.to_string(), Value::String(value));
        }
    });
}

/// Apply an RFC 7386 JSON merge patch to `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in patch_map {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Validate a name as a DNS-1123 subdomain; returns the apiserver's message on failure.
pub fn validate_name(name: &str) -> Result<(), String> {
    const MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or \
                       '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex \
                       used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if name.is_empty() {
        return Err("Required value: name or generateName is required".into());
    }
    if name.len() > 253 {
        return Err(format!(
            "Invalid value: \"{name}\": must be no more than 253 characters"
        ));
    }
    let valid = name.chars().all(|c| ok_char(c) || c == '-' || c == '.')
        && name.chars().next().is_some_and(ok_char)
        && name.chars().last().is_some_and(ok_char);
    if valid {
        Ok(())
    } else {
        Err(format!("Invalid value: \"{name}\": {MSG}"))
    }
}

/// The current wall-clock time as RFC 3339 with second precision, like `creationTimestamp`.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Nanoseconds since the Unix epoch.
pub fn now_unix_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a":"b","c":{"d":"e","f":"g"}});
        merge_patch(&mut t, &json!({"a":"z","c":{"f":null}}));
        assert_eq!(t, json!({"a":"z","c":{"d":"e"}}));
    }

    #[test]
    fn meta_extraction() {
        let v = json!({"metadata":{"name":"p","namespace":"ns","labels":{"a":"1"},"resourceVersion":"7"},
            "spec":{"nodeName":"n1"}});
        let m = ObjMeta::from_value(&v);
        assert_eq!(m.key().as_ref(), "ns/p");
        assert_eq!(m.rv, 7);
        assert_eq!(m.node_name.as_deref(), Some("n1"));
        assert_eq!(m.labels.get("a").map(String::as_str), Some("1"));
    }

    #[test]
    fn names() {
        assert!(validate_name("a-b.c1").is_ok());
        assert!(validate_name("Bad_Name").is_err());
        assert!(validate_name("").is_err());
    }
}

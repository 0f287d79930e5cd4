//! Encoding objects with their members in kube-apiserver's order.
//!
//! The apiserver encodes Go structs, so members come in the order of the
//! struct's fields: `kind` and `apiVersion` first, then `metadata`, whose
//! `name` and `namespace` lead it and whose `managedFields` ends it; maps
//! (labels, annotations, a ConfigMap's data) come sorted by key. The sim
//! keeps objects as `serde_json` values, whose members are sorted by key.
//! This module writes an object's top level and its `metadata` in the
//! apiserver's order, so that a client scanning the bytes (kinformer's
//! reflector finds an object's key, and cuts `managedFields`, before
//! parsing) meets the same layout as against the real server. Members
//! further down (inside `spec`, `status`, an owner reference) stay sorted.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// The top-level members that lead an object or a list, in order; the
/// others follow, sorted (for a Pod: `spec`, then `status`, as the
/// apiserver writes them).
const TOP: &[&str] = &["kind", "apiVersion", "metadata"];

/// `ObjectMeta`'s members in the order of its Go fields, with `ListMeta`'s
/// (`continue`, `remainingItemCount`, which an object never has) at their
/// place after `resourceVersion`. Any other member follows, sorted.
const METADATA: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "continue",
    "remainingItemCount",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The members of a JSON object, the `first` ones leading in that order.
struct Ordered<'a> {
    members: &'a Map<String, Value>,
    first: &'static [&'static str],
}

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.members.len()))?;
        for &name in self.first {
            if let Some(value) = self.members.get(name) {
                match value {
                    Value::Object(metadata) if name == "metadata" => map.serialize_entry(
                        name,
                        &Ordered {
                            members: metadata,
                            first: METADATA,
                        },
                    )?,
                    _ => map.serialize_entry(name, value)?,
                }
            }
        }
        for (name, value) in self.members {
            if !self.first.contains(&name.as_str()) {
                map.serialize_entry(name, value)?;
            }
        }
        map.end()
    }
}

/// Appends `object` to `out`, encoded in the apiserver's member order.
pub fn write(out: &mut Vec<u8>, object: &Map<String, Value>) -> Result<(), serde_json::Error> {
    serde_json::to_writer(
        out,
        &Ordered {
            members: object,
            first: TOP,
        },
    )
}

/// `value` encoded in the apiserver's member order (any JSON value; only
/// an object's members are reordered).
pub fn to_vec(value: &Value) -> Result<Vec<u8>, serde_json::Error> {
    match value {
        Value::Object(object) => {
            let mut out = Vec::new();
            write(&mut out, object)?;
            Ok(out)
        }
        other => serde_json::to_vec(other),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn type_then_metadata_lead_and_metadata_follows_the_go_struct() {
        let pod = json!({
            "status": {"phase": "Running"},
            "spec": {"nodeName": "n", "containers": []},
            "metadata": {
                "managedFields": [{"manager": "m"}],
                "uid": "u", "resourceVersion": "7", "namespace": "ns", "name": "p",
                "labels": {"b": "2", "a": "1"}, "creationTimestamp": "t", "zzz": 1,
            },
            "kind": "Pod", "apiVersion": "v1",
        });
        let encoded = String::from_utf8(to_vec(&pod).unwrap()).unwrap();
        assert_eq!(
            encoded,
            concat!(
                r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns","#,
                r#""uid":"u","resourceVersion":"7","creationTimestamp":"t","labels":{"a":"1","b":"2"},"#,
                r#""managedFields":[{"manager":"m"}],"zzz":1},"#,
                r#""spec":{"containers":[],"nodeName":"n"},"status":{"phase":"Running"}}"#
            )
        );
        let back: Value = serde_json::from_str(&encoded).unwrap();
        assert_eq!(back, pod, "only the order changes");
    }

    #[test]
    fn list_metadata_and_non_objects() {
        let head = json!({"metadata": {"remainingItemCount": 3, "continue": "c", "resourceVersion": "9"},
            "apiVersion": "v1", "kind": "PodList"});
        assert_eq!(
            String::from_utf8(to_vec(&head).unwrap()).unwrap(),
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"c","remainingItemCount":3}}"#
        );
        assert_eq!(
            to_vec(&json!([1, {"b": 1, "a": 2}])).unwrap(),
            br#"[1,{"a":2,"b":1}]"#
        );
        let nameless_metadata = json!({"metadata": "x", "kind": "K"});
        assert_eq!(
            to_vec(&nameless_metadata).unwrap(),
            br#"{"kind":"K","metadata":"x"}"#
        );
    }
}

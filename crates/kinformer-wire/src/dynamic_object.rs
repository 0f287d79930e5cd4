//! Decoding kube's [`DynamicObject`] without serde's `flatten`.
//!
//! kube-core's derived impl flattens both `types` and `data`, so serde
//! first keeps every member other than `metadata` (the whole `spec` and
//! `status`) as a tree of generic values, then builds `TypeMeta` and the
//! `serde_json::Value` of `data` from that tree: the object's body is
//! allocated twice, and inside an object arena (`kinformer_alloc`) the
//! first copy stays with the object as dead space. [`DynamicObjectSeed`]
//! decodes each member once, straight into its place, to the same result:
//! - `metadata` as for [`crate::partial_meta`] (default when absent, an
//!   error when repeated);
//! - `apiVersion` and `kind` taken into `types` as the derive takes them
//!   (see the private module `type_meta`); those left after a failed one
//!   stay in `data`;
//! - every other member into `data`, an object (empty when nothing is left),
//!   a repeated key keeping its last value.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::DynamicObject;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::prune::{Key, metadata_seed};
use crate::type_meta::{TypeMetaField, TypeMetaMembers};

/// Decodes a `DynamicObject`, leaving out `metadata.managedFields` when
/// `skip_managed_fields` is set.
///
/// ```
/// use kube_core::DynamicObject;
/// use serde::de::DeserializeSeed;
/// use kinformer_wire::dynamic_object::DynamicObjectSeed;
///
/// let json = br#"{"apiVersion":"x.io/v1","kind":"X","metadata":{"name":"a"},"spec":{"n":1}}"#;
/// let mut de = serde_json::Deserializer::from_slice(json);
/// let obj: DynamicObject = DynamicObjectSeed::new(false).deserialize(&mut de).unwrap();
/// assert_eq!(obj.types.unwrap().kind, "X");
/// assert_eq!(obj.data["spec"]["n"], 1);
/// assert!(obj.data.get("kind").is_none());
/// ```
pub struct DynamicObjectSeed {
    skip_managed_fields: bool,
}

impl DynamicObjectSeed {
    /// A seed that skips `metadata.managedFields` when asked to.
    pub fn new(skip_managed_fields: bool) -> Self {
        Self {
            skip_managed_fields,
        }
    }
}

impl<'de> DeserializeSeed<'de> for DynamicObjectSeed {
    type Value = DynamicObject;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<DynamicObject, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DynamicObjectSeed {
    type Value = DynamicObject;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct DynamicObject")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DynamicObject, A::Error> {
        let mut types = TypeMetaMembers::default();
        let mut metadata: Option<ObjectMeta> = None;
        let mut data = serde_json::Map::new();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if let Some(field) = TypeMetaField::of(key.as_str())
                && types.taking()
            {
                types.take(field, map.next_value()?);
                continue;
            }
            if key.as_str() == "metadata" {
                if metadata.is_some() {
                    return Err(de::Error::duplicate_field("metadata"));
                }
                metadata = Some(map.next_value_seed(metadata_seed(self.skip_managed_fields))?);
                continue;
            }
            let value: Value = map.next_value()?;
            data.insert(key.into_string(), value);
        }
        Ok(DynamicObject {
            types: types.finish(),
            metadata: metadata.unwrap_or_default(),
            data: Value::Object(data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// kube's derive and this seed on the same JSON: both fail, or both
    /// give the same object.
    fn same_as_derive(json: &str, skip: bool) {
        let derived: Result<DynamicObject, _> = if skip {
            crate::prune::from_slice_without_managed_fields(json.as_bytes())
        } else {
            serde_json::from_str(json)
        };
        let mut de = serde_json::Deserializer::from_str(json);
        let ours = DynamicObjectSeed::new(skip)
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v));
        match (derived, ours) {
            (Ok(d), Ok(o)) => assert_eq!(d, o, "{json}"),
            (Err(_), Err(_)) => {}
            (d, o) => panic!("{json}: derive {d:?}, seed {o:?}"),
        }
    }

    #[test]
    fn a_pod_decodes_as_the_derive_decodes_it() {
        let pod = crate::testing::POD;
        let obj: DynamicObject = DynamicObjectSeed::new(true)
            .deserialize(&mut serde_json::Deserializer::from_str(pod))
            .unwrap();
        assert_eq!(obj.types.as_ref().map(|t| t.kind.as_str()), Some("Pod"));
        assert!(obj.data.get("spec").is_some());
        assert!(obj.metadata.managed_fields.is_none());
        same_as_derive(pod, true);
        same_as_derive(pod, false);
    }

    #[test]
    fn type_members_after_a_failed_one_stay_in_data() {
        for json in [
            r#"{"apiVersion":"v1","kind":"X","spec":{"a":[1,2.5,-3,null,true]}}"#,
            r#"{"kind":7,"apiVersion":"v1","status":"s"}"#,
            r#"{"apiVersion":"v1","apiVersion":"v2","kind":"X"}"#,
            r#"{"kind":"X","kind":"Y","apiVersion":"v1","kind":"Z"}"#,
            r#"{"spec":1,"spec":2}"#,
            r#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
            r#"{"metadata":null}"#,
            r#"{}"#,
            r#"[]"#,
        ] {
            same_as_derive(json, true);
            same_as_derive(json, false);
        }
    }

    fn member() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just(r#""v1""#.to_string()),
            Just(r#""X""#.to_string()),
            Just("null".to_string()),
            Just("-3".to_string()),
            Just("1.5".to_string()),
            Just("false".to_string()),
            Just(r#"[1,"a",{"b":[]}]"#.to_string()),
            Just(r#"{"managedFields":[1],"x":{"y":"z"}}"#.to_string()),
        ];
        let metadata = prop_oneof![
            Just(r#"{"name":"a","labels":{"k":"v"}}"#.to_string()),
            Just(r#"{"name":"b","managedFields":[{"manager":"m"}]}"#.to_string()),
            Just("null".to_string()),
        ];
        let key = prop_oneof![
            Just("apiVersion"),
            Just("kind"),
            Just("spec"),
            Just("status"),
            Just("data"),
        ];
        prop_oneof![
            4 => (key, value).prop_map(|(k, v)| format!(r#""{k}":{v}"#)),
            1 => metadata.prop_map(|m| format!(r#""metadata":{m}"#)),
        ]
    }

    proptest! {
        #[test]
        fn any_members_in_any_order_decode_as_the_derive_decodes_them(
            members in proptest::collection::vec(member(), 0..7),
            skip in any::<bool>(),
        ) {
            same_as_derive(&format!("{{{}}}", members.join(",")), skip);
        }
    }
}

//! Decoding kube's [`PartialObjectMeta`] without serde's `flatten`.
//!
//! kube-core derives `Deserialize` for `PartialObjectMeta` with its
//! `TypeMeta` flattened. serde's derive then keeps every member other than
//! `metadata` (`kind` and `apiVersion`) in a growable vector of generic
//! values and decodes `TypeMeta` from that vector at the end. Inside an
//! object arena (`kinformer_alloc`) the vector is dead space that stays with
//! the object: it is freed while later parts of the object are live, so its
//! bytes are never reused. [`PartialObjectMetaSeed`] reads the three members
//! directly, to the same result as the derive:
//! - `types` is `Some` exactly when `apiVersion` and `kind` each appear once,
//!   as strings (otherwise the flattened `TypeMeta` fails to decode, which
//!   the derive turns into `None`; see the private module `type_meta`);
//! - `metadata` is the default when absent, and an error when repeated;
//! - every other member is ignored.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_core::PartialObjectMeta;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::prune::{Key, metadata_seed};
use crate::type_meta::{TypeMetaField, TypeMetaMembers};

/// Decodes a `PartialObjectMeta<K>`, leaving out `metadata.managedFields`
/// when `skip_managed_fields` is set.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kube_core::PartialObjectMeta;
/// use serde::de::DeserializeSeed;
/// use kinformer_wire::partial_meta::PartialObjectMetaSeed;
///
/// let json = br#"{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"name":"a","managedFields":[{"manager":"m"}]}}"#;
/// let mut de = serde_json::Deserializer::from_slice(json);
/// let meta: PartialObjectMeta<Pod> = PartialObjectMetaSeed::new(true).deserialize(&mut de).unwrap();
/// assert_eq!(meta.types.unwrap().kind, "PartialObjectMetadata");
/// assert_eq!(meta.metadata.name.as_deref(), Some("a"));
/// assert!(meta.metadata.managed_fields.is_none());
/// ```
pub struct PartialObjectMetaSeed<K> {
    skip_managed_fields: bool,
    object: PhantomData<fn() -> K>,
}

impl<K> PartialObjectMetaSeed<K> {
    /// A seed that skips `metadata.managedFields` when asked to.
    pub fn new(skip_managed_fields: bool) -> Self {
        Self {
            skip_managed_fields,
            object: PhantomData,
        }
    }
}

impl<'de, K> DeserializeSeed<'de> for PartialObjectMetaSeed<K> {
    type Value = PartialObjectMeta<K>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_map(self)
    }
}

impl<'de, K> Visitor<'de> for PartialObjectMetaSeed<K> {
    type Value = PartialObjectMeta<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct PartialObjectMeta")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut types = TypeMetaMembers::default();
        let mut metadata: Option<ObjectMeta> = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            if let Some(field) = TypeMetaField::of(key.as_str()) {
                if types.taking() {
                    types.take(field, map.next_value()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
                continue;
            }
            match key.as_str() {
                "metadata" => {
                    if metadata.is_some() {
                        return Err(de::Error::duplicate_field("metadata"));
                    }
                    metadata = Some(map.next_value_seed(metadata_seed(self.skip_managed_fields))?);
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(PartialObjectMeta {
            types: types.finish(),
            metadata: metadata.unwrap_or_default(),
            _phantom: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use proptest::prelude::*;

    /// kube's derive and this seed on the same JSON: both fail, or both
    /// give the same `types` and `metadata`.
    fn same_as_derive(json: &str, skip: bool) {
        let derived: Result<PartialObjectMeta<Pod>, _> = if skip {
            crate::prune::from_slice_without_managed_fields(json.as_bytes())
        } else {
            serde_json::from_str(json)
        };
        let mut de = serde_json::Deserializer::from_str(json);
        let ours = PartialObjectMetaSeed::<Pod>::new(skip)
            .deserialize(&mut de)
            .and_then(|v| de.end().map(|()| v));
        match (derived, ours) {
            (Ok(d), Ok(o)) => {
                assert_eq!(d.types, o.types, "{json}");
                assert_eq!(d.metadata, o.metadata, "{json}");
            }
            (Err(_), Err(_)) => {}
            (d, o) => panic!(
                "{json}: derive {:?}, seed {:?}",
                d.map(|v| v.types),
                o.map(|v| v.types)
            ),
        }
    }

    #[test]
    fn a_metadata_document_decodes_as_the_derive_decodes_it() {
        let partial = crate::testing::POD_METADATA;
        let seed: PartialObjectMeta<Pod> = PartialObjectMetaSeed::new(true)
            .deserialize(&mut serde_json::Deserializer::from_str(partial))
            .unwrap();
        assert!(seed.types.is_some());
        assert!(seed.metadata.labels.is_some());
        assert!(seed.metadata.managed_fields.is_none());
        same_as_derive(partial, true);
        same_as_derive(partial, false);
    }

    #[test]
    fn types_need_both_members_once_and_as_strings() {
        for json in [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}"#,
            r#"{"kind":"Pod","metadata":{"name":"a"}}"#,
            r#"{"apiVersion":"v1","metadata":{"name":"a"}}"#,
            r#"{"apiVersion":"v1","kind":7}"#,
            r#"{"apiVersion":null,"kind":"Pod"}"#,
            r#"{"apiVersion":"v1","kind":"Pod","kind":"Pod"}"#,
            r#"{"apiVersion":["v1"],"kind":{"a":1}}"#,
            r#"{"apiVersion":"v\u0031","k\u0069nd":"Pod"}"#,
            r#"{}"#,
        ] {
            same_as_derive(json, true);
            same_as_derive(json, false);
        }
    }

    #[test]
    fn metadata_twice_or_malformed_is_an_error() {
        for json in [
            r#"{"metadata":{"name":"a"},"metadata":{"name":"b"}}"#,
            r#"{"metadata":null}"#,
            r#"{"metadata":[1]}"#,
            r#"[1,2]"#,
            r#""x""#,
            r#"{"metadata":{"name":"a"}"#,
        ] {
            same_as_derive(json, true);
            same_as_derive(json, false);
        }
    }

    fn member() -> impl Strategy<Value = String> {
        let value = prop_oneof![
            Just(r#""v1""#.to_string()),
            Just(r#""Pod""#.to_string()),
            Just("null".to_string()),
            Just("3".to_string()),
            Just("true".to_string()),
            Just(r#"[1,"a",{"b":[]}]"#.to_string()),
            Just(r#"{"x":{"y":"z"}}"#.to_string()),
        ];
        let metadata = prop_oneof![
            Just(r#"{"name":"a","labels":{"k":"v"}}"#.to_string()),
            Just(r#"{"name":"b","managedFields":[{"manager":"m"}]}"#.to_string()),
            Just("null".to_string()),
            Just("{}".to_string()),
        ];
        prop_oneof![
            value.clone().prop_map(|v| format!(r#""apiVersion":{v}"#)),
            value.clone().prop_map(|v| format!(r#""kind":{v}"#)),
            value.prop_map(|v| format!(r#""other":{v}"#)),
            metadata.prop_map(|m| format!(r#""metadata":{m}"#)),
        ]
    }

    proptest! {
        #[test]
        fn any_members_in_any_order_decode_as_the_derive_decodes_them(
            members in proptest::collection::vec(member(), 0..6),
            skip in any::<bool>(),
        ) {
            same_as_derive(&format!("{{{}}}", members.join(",")), skip);
        }
    }
}

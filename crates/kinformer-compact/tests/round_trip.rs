//! Packing is lossless and unpacking never panics: `decode(pack(x)) == x`
//! for random Pods, custom resources and `DynamicObject`s; corrupt and
//! truncated bytes are errors.
#![allow(clippy::unwrap_used)]

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference};
use kinformer_compact::{Compact, CompactError};
use kube_core::{
    ApiResource, DynamicObject, GroupVersionKind, NamespaceResourceScope, ObjectMeta, Resource,
};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,12}"
}

/// Any text, escapes and non-ASCII included.
fn text() -> impl Strategy<Value = String> {
    ".{0,24}"
}

fn string_map() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    proptest::option::of(proptest::collection::btree_map(word(), text(), 0..4))
}

fn meta() -> impl Strategy<Value = ObjectMeta> {
    (
        word(),
        proptest::option::of(word()),
        string_map(),
        string_map(),
        proptest::option::of(1u64..u64::MAX),
        proptest::collection::vec((word(), word(), any::<bool>()), 0..2),
        proptest::option::of(proptest::collection::vec((word(), word()), 0..2)),
    )
        .prop_map(
            |(name, namespace, labels, annotations, rv, owners, managed)| ObjectMeta {
                name: Some(name),
                namespace,
                labels,
                annotations,
                resource_version: rv.map(|v| v.to_string()),
                owner_references: (!owners.is_empty()).then(|| {
                    owners
                        .into_iter()
                        .map(|(name, uid, controller)| OwnerReference {
                            api_version: "apps/v1".into(),
                            kind: "ReplicaSet".into(),
                            name,
                            uid,
                            controller: Some(controller),
                            ..Default::default()
                        })
                        .collect()
                }),
                managed_fields: managed.map(|m| {
                    m.into_iter()
                        .map(|(manager, op)| ManagedFieldsEntry {
                            manager: Some(manager),
                            operation: Some(op),
                            api_version: Some("v1".into()),
                            ..Default::default()
                        })
                        .collect()
                }),
                ..Default::default()
            },
        )
}

fn pod() -> impl Strategy<Value = Pod> {
    (
        meta(),
        proptest::collection::vec(
            (
                word(),
                text(),
                proptest::collection::vec((word(), text()), 0..3),
            ),
            1..3,
        ),
        proptest::option::of(word()),
        proptest::option::of(word()),
    )
        .prop_map(|(metadata, containers, node, phase)| Pod {
            metadata,
            spec: Some(PodSpec {
                containers: containers
                    .into_iter()
                    .map(|(name, image, env)| Container {
                        name,
                        image: Some(image),
                        env: (!env.is_empty()).then(|| {
                            env.into_iter()
                                .map(|(name, value)| EnvVar {
                                    name,
                                    value: Some(value),
                                    ..Default::default()
                                })
                                .collect()
                        }),
                        ..Default::default()
                    })
                    .collect(),
                node_name: node,
                ..Default::default()
            }),
            status: phase.map(|phase| PodStatus {
                phase: Some(phase),
                ..Default::default()
            }),
        })
}

/// A custom resource, as `kube::CustomResource` would derive one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Widget {
    metadata: ObjectMeta,
    spec: WidgetSpec,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WidgetSpec {
    size: u32,
    colour: Option<String>,
    parts: Vec<String>,
    ratio: f64,
}

impl Resource for Widget {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;
    fn kind(_: &()) -> Cow<'_, str> {
        "Widget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "example.com".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "widgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn widget() -> impl Strategy<Value = Widget> {
    (
        meta(),
        any::<u32>(),
        proptest::option::of(text()),
        proptest::collection::vec(text(), 0..4),
        -1e12f64..1e12,
    )
        .prop_map(|(metadata, size, colour, parts, ratio)| Widget {
            metadata,
            spec: WidgetSpec {
                size,
                colour,
                parts,
                ratio,
            },
        })
}

/// JSON values without floats that JSON cannot carry (NaN, infinities).
fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e9f64..1e9).prop_map(serde_json::Value::from),
        text().prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            proptest::collection::btree_map(word(), inner, 0..4)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn dynamic_object() -> impl Strategy<Value = DynamicObject> {
    (
        meta(),
        proptest::collection::btree_map(word(), json(), 0..4),
    )
        .prop_map(|(metadata, fields)| {
            let resource =
                ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Gadget"));
            let mut obj = DynamicObject::new(metadata.name.as_deref().unwrap_or("x"), &resource);
            obj.metadata = metadata;
            let fields: serde_json::Map<String, serde_json::Value> = fields
                .into_iter()
                .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
                .collect();
            obj.data = serde_json::Value::Object(fields);
            obj
        })
}

fn round_trip<K>(obj: K)
where
    K: Resource + Clone + PartialEq + std::fmt::Debug + Serialize + for<'de> Deserialize<'de>,
{
    let packed = Compact::pack(obj.clone()).unwrap();
    assert!(packed.is_packed());
    // What indexes read is there without decoding, managed fields aside.
    assert_eq!(packed.meta().name, obj.meta().name);
    assert_eq!(packed.meta().labels, obj.meta().labels);
    assert_eq!(packed.meta().managed_fields, None);
    assert_eq!(packed.decode().unwrap(), obj);
    // Packing from a reference leaves the object as it was.
    let mut again = obj.clone();
    let from = Compact::pack_from(&mut again).unwrap();
    assert_eq!(again, obj);
    assert_eq!(from.into_object().unwrap(), obj);
}

/// Every truncation and a flipped byte at every position: an error or (for
/// a flip the frame's format does not see, such as in a string) another
/// object, never a panic.
fn damage<K>(obj: K)
where
    K: Resource + Clone + std::fmt::Debug + Serialize + for<'de> Deserialize<'de>,
{
    let packed = Compact::pack(obj.clone()).unwrap();
    let bytes = packed.packed_bytes().unwrap().to_vec();
    for len in 0..bytes.len() {
        let cut = Compact::<K>::from_parts(packed.meta().clone(), bytes[..len].into());
        assert!(
            cut.decode().is_err(),
            "truncated to {len} of {} bytes",
            bytes.len()
        );
    }
    for i in 0..bytes.len() {
        let mut flipped = bytes.clone();
        flipped[i] ^= 0x5a;
        let _ = Compact::<K>::from_parts(packed.meta().clone(), flipped.into()).decode();
    }
}

proptest! {
    #[test]
    fn pods_round_trip(p in pod()) {
        round_trip(p);
    }

    #[test]
    fn custom_resources_round_trip(w in widget()) {
        round_trip(w);
    }

    #[test]
    fn dynamic_objects_round_trip(d in dynamic_object()) {
        round_trip(d);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn damaged_pods_are_errors_not_panics(p in pod()) {
        damage(p);
    }

    #[test]
    fn damaged_dynamic_objects_are_errors_not_panics(d in dynamic_object()) {
        damage(d);
    }
}

#[test]
fn an_announced_length_above_the_limit_is_refused_before_allocating() {
    let mut bytes = u32::MAX.to_le_bytes().to_vec();
    bytes.extend_from_slice(&[0x28, 0xb5, 0x2f, 0xfd]);
    let c = Compact::<Pod>::from_parts(ObjectMeta::default(), bytes.into());
    assert!(matches!(c.decode(), Err(CompactError::Corrupt(_))));
}

#[test]
fn bytes_of_another_type_are_a_decode_error() {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("p".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let packed = Compact::pack(pod).unwrap();
    let wrong =
        Compact::<Widget>::from_parts(packed.meta().clone(), packed.packed_bytes().unwrap().into());
    // A Pod's JSON has no `spec` a Widget can read.
    assert!(matches!(wrong.decode(), Err(CompactError::Decode(_))));
}

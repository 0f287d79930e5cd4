//! The reflector's decoder (simd-json) against `serde_json` on random
//! documents: it must give back the document that was encoded (floats
//! included, to the bit: `serde_json`'s default float parser may be one
//! unit in the last place off, so the spec is compared with the original),
//! and refuse what `serde_json` refuses.
#![allow(clippy::unwrap_used)]

use kinformer_reflector::json;
use kube::api::DynamicObject;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Any JSON value: strings with escapes and non-ASCII, integers across the
/// i64/u64 range, finite floats, nested arrays and objects.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "[a-z\"\\\\/\u{0}-\u{1f}é😀\u{2028}]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::btree_map("[a-zA-Z_\\-é]{0,8}", inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn decodes_the_document_that_was_encoded(spec in value(), labels in prop::collection::btree_map("[a-z]{1,6}", "[a-z0-9]{0,6}", 0..4)) {
        let doc = serde_json::json!({
            "apiVersion": "x.dev/v1",
            "kind": "X",
            "metadata": {"name": "x", "namespace": "n", "labels": labels},
            "spec": spec,
        });
        let bytes = serde_json::to_vec(&doc).unwrap();
        let ours: DynamicObject = json::from_slice(&bytes, false).unwrap();
        let reference: DynamicObject = serde_json::from_slice(&bytes).unwrap();
        prop_assert_eq!(&ours.metadata, &reference.metadata);
        prop_assert_eq!(&ours.data, &serde_json::json!({"spec": doc["spec"]}));
    }

    #[test]
    fn refuses_what_serde_json_refuses(bytes in prop::collection::vec(any::<u8>(), 0..64), cut in any::<prop::sample::Index>()) {
        // Random bytes, and a valid document cut short.
        let doc = br#"{"apiVersion":"x/v1","kind":"X","metadata":{"name":"x"},"spec":{"a":[1,2,{"b":"c"}]}}"#;
        let truncated = &doc[..cut.index(doc.len())];
        for input in [&bytes[..], truncated] {
            let reference = serde_json::from_slice::<DynamicObject>(input);
            let ours = json::from_slice::<DynamicObject>(input, false);
            prop_assert_eq!(ours.is_ok(), reference.is_ok(), "{:?}", String::from_utf8_lossy(input));
        }
    }
}

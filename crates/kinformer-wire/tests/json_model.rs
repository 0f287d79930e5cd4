//! The reflector's decoder (simd-json) against `serde_json` on random
//! documents: it must give back the document that was encoded (floats
//! included, to the bit: `serde_json`'s default float parser may be one
//! unit in the last place off, so the spec is compared with the original),
//! and refuse what `serde_json` refuses. With `managedFields` skipped (and
//! so cut out of the bytes before the parse), it must decode what the
//! object without the field decodes to, and refuse what the whole parse
//! refuses.
#![allow(clippy::unwrap_used)]

use std::ops::Range;

use kinformer_wire::{WatchEvent, event, json, prune};
use kube_core::DynamicObject;
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

/// An object whose `metadata` members come in any order, `managedFields`
/// among them (or not), with `managedFields` in the spec too; compact or
/// with whitespace between tokens. With the same object without the
/// member, and where the member is (separators around it included).
fn object_with_managed_fields() -> impl Strategy<Value = (Vec<u8>, Vec<u8>, Option<Range<usize>>)> {
    let members = (
        value(),
        any::<bool>(),
        prop::collection::btree_map("[a-z]{1,6}", "[a-z0-9]{0,6}", 0..4),
    )
        .prop_flat_map(|(fields, present, labels)| {
            let mut members = vec![
                ("name", Value::from("x")),
                ("namespace", Value::from("n")),
                ("labels", serde_json::json!(labels)),
            ];
            if present {
                members.push(("managedFields", fields));
            }
            Just(members).prop_shuffle()
        });
    (members, value(), any::<bool>()).prop_map(|(members, spec, pretty)| {
        let encode = |v: &Value| {
            if pretty {
                serde_json::to_string_pretty(v).unwrap()
            } else {
                serde_json::to_string(v).unwrap()
            }
        };
        let (sep, colon) = if pretty { (" ,\n ", " : ") } else { (",", ":") };
        let spec = serde_json::json!({"managedFields": spec, "metadata": {"managedFields": spec}});
        let document = |with_fields: bool| {
            let mut doc = format!("{{\"apiVersion\"{colon}\"x.dev/v1\"{sep}\"kind\"{colon}\"X\"{sep}\"metadata\"{colon}{{");
            let mut fields = None;
            let members = members.iter().filter(|(k, _)| with_fields || *k != "managedFields");
            for (i, (k, v)) in members.enumerate() {
                let start = doc.len();
                if i > 0 {
                    doc.push_str(sep);
                }
                doc.push_str(&format!("\"{k}\"{colon}{}", encode(v)));
                if *k == "managedFields" {
                    fields = Some(start..doc.len() + sep.len());
                }
            }
            doc.push_str(&format!("}}{sep}\"spec\"{colon}{}}}", encode(&spec)));
            (doc.into_bytes(), fields)
        };
        let (bytes, fields) = document(true);
        (bytes, document(false).0, fields)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn leaving_managed_fields_out_of_the_parse_decodes_what_pruning_decodes((bytes, without, _) in object_with_managed_fields()) {
        let ours: DynamicObject = json::from_slice(&bytes, true).unwrap();
        // The object without the member, parsed whole (not by `serde_json`,
        // whose floats may be one unit in the last place off).
        let reference: DynamicObject = json::from_slice(&without, false).unwrap();
        prop_assert!(ours.metadata.managed_fields.is_none());
        prop_assert_eq!(&ours.metadata, &reference.metadata);
        prop_assert_eq!(&ours.data, &reference.data);
        // The same object in a watch line.
        let line = [br#"{"type":"MODIFIED","object":"#.as_slice(), &bytes, b"}"].concat();
        let event = event::decode_event_with::<DynamicObject>(&line, true).unwrap();
        let WatchEvent::Modified(obj) = event else { panic!("not an update") };
        prop_assert_eq!(&obj.metadata, &reference.metadata);
        prop_assert_eq!(&obj.data, &reference.data);
    }

    #[test]
    fn a_damaged_document_is_refused_as_a_whole_parse_refuses_it((bytes, _, fields) in object_with_managed_fields(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let at = at.index(bytes.len());
        prop_assert!(json::from_slice::<DynamicObject>(&bytes[..at], true).is_err());
        // A byte changed outside `metadata.managedFields` and its
        // separators (inside, the cut value is only checked for matching
        // brackets, ended strings and allowed bytes: see the reflector's
        // `managed_fields` module).
        if fields.is_some_and(|f| f.contains(&at)) {
            return Ok(());
        }
        let mut damaged = bytes.clone();
        damaged[at] = byte;
        // The reference is the parse before the cut existed: simd-json
        // over every byte, pruning while deserializing.
        let mut whole = damaged.clone();
        let reference = simd_json::Deserializer::from_slice(&mut whole)
            .and_then(|mut de| prune::deserialize_without_managed_fields::<DynamicObject, _>(&mut de));
        let ours = json::from_slice::<DynamicObject>(&damaged, true);
        prop_assert_eq!(ours.is_ok(), reference.is_ok(), "{:?}", String::from_utf8_lossy(&damaged));
    }
}

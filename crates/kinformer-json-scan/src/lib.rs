//! Finding members of an encoded JSON object without parsing it: a scan
//! that skips values by their brackets and stops as soon as it has what it
//! was asked for.
//!
//! Used where parsing a whole document would be wasted: the simulator
//! reads an object's `metadata` out of the bytes it stores, and the
//! reflector cuts `metadata.managedFields` out of a watch line before
//! simd-json parses it, and reads an object's UID to leave out, before any
//! decoding, the objects outside its shard.
//!
//! What the scan skips is checked less than a parse would check it: its
//! brackets must match by kind, its strings end, and no byte outside
//! strings may be other than JSON's punctuation, digits, whitespace and the
//! letters of literals and exponents. Anything the scan does not expect
//! (another shape, nesting deeper than [`MAX_DEPTH`]) is `None`, and the
//! caller parses the document instead.
//!
//! Modules: `scanner` walks members, keys and short values a byte at a
//! time; `block` skips arrays and objects 64 bytes at a time over the bit
//! masks `classify` makes of each block; `depth` checks, over the same masks, that a document does
//! not nest too deep ([`NestingCheck`]).

use std::ops::Range;

mod block;
mod classify;
mod depth;
mod scanner;
#[cfg(test)]
mod testing;

pub use depth::NestingCheck;

use scanner::Scanner;

/// Deepest nesting of arrays and objects the scan goes through
/// (`serde_json`'s limit).
pub const MAX_DEPTH: usize = 128;

/// The raw bytes of the value of the top-level member `name` (the raw
/// bytes between its quotes) of the JSON object `obj`.
///
/// ```
/// let obj = br#"{"kind":"Pod","metadata":{"name":"a"},"spec":{}}"#;
/// assert_eq!(kinformer_json_scan::member(obj, b"metadata"), Some(&br#"{"name":"a"}"#[..]));
/// assert_eq!(kinformer_json_scan::member(obj, b"status"), None);
/// ```
pub fn member<'a>(obj: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut s = Scanner { json: obj, at: 0 };
    s.open(b'{')?;
    s.find_member(name, 1)?;
    s.skip_ws();
    let start = s.at;
    s.skip_value(1)?;
    obj.get(start..s.at)
}

/// The bytes to remove so that the member at `path` is gone: the member
/// with one comma that separates it from its neighbours. Every name but
/// the last is an object member whose value is an object, starting from
/// the top-level object `json`. The removed bytes are also checked to be
/// UTF-8. `None` when there is no such member or the scan met something
/// it does not expect.
///
/// ```
/// let json = br#"{"metadata":{"name":"a","managedFields":[{}],"uid":"u"}}"#;
/// let cut = kinformer_json_scan::member_span(json, &[b"metadata", b"managedFields"]).unwrap();
/// let rest = [&json[..cut.start], &json[cut.end..]].concat();
/// assert_eq!(rest, br#"{"metadata":{"name":"a","uid":"u"}}"#);
/// ```
pub fn member_span(json: &[u8], path: &[&[u8]]) -> Option<Range<usize>> {
    let (last, parents) = path.split_last()?;
    let (mut s, depth) = Scanner::enter(json, parents)?;
    s.member_range(last, depth)
}

/// The string values of the members `names` of the object at `path` (a
/// path of object members from the top-level object `json`, empty for that
/// object itself): for each name, the raw bytes between the value's quotes
/// (escapes left as they are), or `None` when the object has no such member
/// or its value is not a string. The scan goes no further into the object
/// than the last of them. `None` when the path is not there or the scan
/// met something it does not expect. The first of two members of one name
/// is the one found.
///
/// ```
/// let line = br#"{"type":"ADDED","object":{"metadata":{"name":"a","uid":"u1","labels":{}}}}"#;
/// let [uid, rv] = kinformer_json_scan::string_members(line, &[b"object", b"metadata"], [b"uid", b"resourceVersion"]).unwrap();
/// assert_eq!((uid, rv), (Some(&b"u1"[..]), None));
/// ```
pub fn string_members<'a, const N: usize>(
    json: &'a [u8],
    path: &[&[u8]],
    names: [&[u8]; N],
) -> Option<[Option<&'a [u8]>; N]> {
    let (mut s, depth) = Scanner::enter(json, path)?;
    s.string_members(names, depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBJECT: &[&[u8]] = &[b"metadata", b"managedFields"];
    const LINE: &[&[u8]] = &[b"object", b"metadata", b"managedFields"];

    fn cut(json: &str, path: &[&[u8]]) -> Option<String> {
        let r = member_span(json.as_bytes(), path)?;
        Some(format!("{}{}", &json[..r.start], &json[r.end..]))
    }

    #[test]
    fn the_member_and_one_comma_are_cut_wherever_it_stands() {
        let obj = OBJECT;
        assert_eq!(
            cut(
                r#"{"metadata":{"name":"a","managedFields":[{"m":1}],"uid":"u"}}"#,
                obj
            )
            .unwrap(),
            r#"{"metadata":{"name":"a","uid":"u"}}"#
        );
        assert_eq!(
            cut(r#"{"metadata":{"managedFields":[],"name":"a"}}"#, obj).unwrap(),
            r#"{"metadata":{"name":"a"}}"#
        );
        assert_eq!(
            cut(r#"{"metadata":{"name":"a" , "managedFields" : [ ] }}"#, obj).unwrap(),
            r#"{"metadata":{"name":"a"  }}"#
        );
        assert_eq!(
            cut(r#"{"metadata":{"managedFields":null}}"#, obj).unwrap(),
            r#"{"metadata":{}}"#
        );
        assert_eq!(
            cut(r#"{"metadata":{"a":1,"managedFields":false,"b":2}}"#, obj).unwrap(),
            r#"{"metadata":{"a":1,"b":2}}"#
        );
        assert_eq!(
            cut(
                r#"{"kind":"Pod","spec":{"metadata":{"managedFields":1}},"metadata":{"managedFields":[{"fieldsV1":{"k:{\"name\":\"a]\"}":{}}}]},"status":{}}"#,
                obj
            )
            .unwrap(),
            r#"{"kind":"Pod","spec":{"metadata":{"managedFields":1}},"metadata":{},"status":{}}"#
        );
    }

    #[test]
    fn a_path_reaches_only_the_member_it_names() {
        let line = r#"{"type":"MODIFIED","metadata":{"managedFields":[]},"object":{"metadata":{"name":"a","managedFields":[{}]}}}"#;
        assert_eq!(
            cut(line, LINE).unwrap(),
            r#"{"type":"MODIFIED","metadata":{"managedFields":[]},"object":{"metadata":{"name":"a"}}}"#
        );
        // From the top, the line's own `metadata` is the one.
        assert_eq!(
            cut(line, OBJECT).unwrap(),
            r#"{"type":"MODIFIED","metadata":{},"object":{"metadata":{"name":"a","managedFields":[{}]}}}"#
        );
    }

    #[test]
    fn nothing_is_cut_from_what_the_scan_does_not_expect() {
        let none = [
            r#"{"metadata":{"name":"a"}}"#,
            r#"{"metadata":{"name":"a","m\u0061nagedFields":[]}}"#,
            r#"{"spec":{"managedFields":[]}}"#,
            r#"{"metadata":{"managedFields":[{]}}"#,
            r#"{"metadata":{"managedFields":[}]}}"#,
            r#"{"metadata":{"managedFields":[1,2,3]]]"#,
            r#"{"metadata":{"managedFields":[xyz]}}"#,
            r#"{"metadata":{"managedFields":["unterminated]}}"#,
            r#"{"metadata":{"managedFields":}}"#,
            r#"{"metadata":{"managedFields":[] "name":"a"}}"#,
            r#"{"metadata":[{"managedFields":[]}]}"#,
            r#"["metadata",{"managedFields":[]}]"#,
            "",
            "{",
        ];
        for json in none {
            assert_eq!(cut(json, OBJECT), None, "{json}");
        }
        let bad_utf8 = b"{\"metadata\":{\"managedFields\":[\"\xff\"]}}";
        assert_eq!(member_span(bad_utf8, OBJECT), None);
    }

    #[test]
    fn member_gives_the_raw_value_of_a_top_level_member() {
        let obj = br#" { "a" : [1,{"b":"]"}] , "b\"" :"x","c":-1.5e3 } "#;
        assert_eq!(member(obj, b"a"), Some(&br#"[1,{"b":"]"}]"#[..]));
        assert_eq!(member(obj, b"b\\\""), Some(&br#""x""#[..]));
        assert_eq!(member(obj, b"c"), Some(&b"-1.5e3"[..]));
        assert_eq!(member(obj, b"b"), None);
        assert_eq!(member(br#"{"a":[}"#, b"a"), None);
        assert_eq!(member(b"[1]", b"a"), None);
    }

    #[test]
    fn string_members_are_found_at_their_path_and_nowhere_else() {
        const META: &[&[u8]] = &[b"object", b"metadata"];
        fn found(json: &str) -> Option<[Option<&[u8]>; 2]> {
            string_members(json.as_bytes(), META, [b"uid", b"resourceVersion"])
        }
        let line = r#"{"type":"MODIFIED","object":{"spec":{"uid":"no"},"metadata":{"ownerReferences":[{"uid":"owner"}],"uid":"u\"1","labels":{"uid":"x"},"resourceVersion":"42","uid":"dup"}}}"#;
        assert_eq!(found(line), Some([Some(&br#"u\"1"#[..]), Some(&b"42"[..])]));
        // Absent, not a string, an empty object.
        assert_eq!(
            found(r#"{"object":{"metadata":{"uid":null,"name":"a"}}}"#),
            Some([None, None])
        );
        assert_eq!(found(r#"{"object":{"metadata":{}}}"#), Some([None, None]));
        assert_eq!(
            found(r#"{"object":{"metadata" : { "resourceVersion" : "7" } } }"#),
            Some([None, Some(&b"7"[..])])
        );
        // What the scan does not expect.
        for json in [
            r#"{"object":{}}"#,
            r#"{"object":{"metadata":[]}}"#,
            r#"{"object":{"metadata":{"uid":"a" "resourceVersion":"1"}}}"#,
            r#"{"object":{"metadata":{"labels":{],"uid":"a"}}}"#,
            r#"{"object":{"metadata":{"uid":"unterminated}}}"#,
            "",
        ] {
            assert_eq!(found(json), None, "{json}");
        }
        // The empty path is the top-level object.
        assert_eq!(
            string_members(br#"{"a":"1","b":2}"#, &[], [b"b", b"a"]),
            Some([None, Some(&b"1"[..])])
        );
    }

    #[test]
    fn nesting_past_the_limit_is_not_cut() {
        let nested = |n: usize| {
            format!(
                r#"{{"metadata":{{"managedFields":{}{}}}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        // The object and metadata take two levels.
        assert!(cut(&nested(MAX_DEPTH - 2), OBJECT).is_some());
        assert_eq!(cut(&nested(MAX_DEPTH - 1), OBJECT), None);
        assert_eq!(cut(&nested(10_000), OBJECT), None);
    }
}

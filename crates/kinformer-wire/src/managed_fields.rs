//! Finding `metadata.managedFields` in raw JSON, so that a decoder that
//! skips the field need not parse it at all.
//!
//! [`crate::prune`] skips the field while deserializing, but simd-json has
//! by then built its tape over the whole document: for a Pod the field is
//! about half the bytes, and for a metadata-only object two thirds. Cutting
//! the member out of the bytes before the parse saves that work; the
//! deserializer still prunes, so a member the scan does not find (a key
//! written with escapes, say) is skipped as before.
//!
//! The scan ([`kinformer_json_scan::member_span`]) walks only as far as the
//! end of the field's value; everything it keeps is parsed and checked in
//! full afterwards. The value it cuts is checked less than a parse would
//! check it (see that crate's docs): a grammar error inside it (`[1,,2]`)
//! is not refused.

use std::ops::Range;

/// What the bytes hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One object (a LIST item, or a watch line's `object`).
    Object,
    /// A watch line: `{"type":..,"object":{..}}`.
    WatchLine,
}

/// The bytes to remove so that `metadata.managedFields` is gone (the
/// member with one comma), or `None` when it is not found.
pub(crate) fn managed_fields_member(json: &[u8], shape: Shape) -> Option<Range<usize>> {
    let path: &[&[u8]] = match shape {
        Shape::Object => &[b"metadata", b"managedFields"],
        Shape::WatchLine => &[b"object", b"metadata", b"managedFields"],
    };
    kinformer_json_scan::member_span(json, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_a_watch_line_only_the_objects_metadata_counts() {
        let line = br#"{"type":"MODIFIED","metadata":{"managedFields":[]},"object":{"metadata":{"name":"a","managedFields":[{}]}}}"#;
        let cut = |shape| {
            let r = managed_fields_member(line, shape).unwrap();
            String::from_utf8([&line[..r.start], &line[r.end..]].concat()).unwrap()
        };
        assert_eq!(
            cut(Shape::WatchLine),
            r#"{"type":"MODIFIED","metadata":{"managedFields":[]},"object":{"metadata":{"name":"a"}}}"#
        );
        // As an object, the line's own `metadata` is the one.
        assert_eq!(
            cut(Shape::Object),
            r#"{"type":"MODIFIED","metadata":{},"object":{"metadata":{"name":"a","managedFields":[{}]}}}"#
        );
    }
}

//! Restamping: a new version of a stored object that differs only in its resourceVersion and
//! commit-time annotation, made by splicing the new values into the stored bytes (no JSON value,
//! no re-encoding). The churn's fast update path: a write whose only change is its stamps, like a
//! controller's periodic status heartbeat.

use crate::object::StoredObject;
use crate::store::COMMIT_ANNOTATION;

/// One edit of encoded bytes: `start..end` replaced by `value` (an insertion when they are equal).
#[derive(Debug, Clone, Copy)]
pub struct Splice<'a> {
    /// First byte replaced.
    pub start: usize,
    /// End of the bytes replaced.
    pub end: usize,
    /// What goes in their place.
    pub value: &'a [u8],
}

/// What [`splice_line`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spliced {
    /// Where the edited object lies in the output.
    pub object: std::ops::Range<usize>,
    /// The range asked to be kept track of, in the edited object's own bytes (`None` when an edit
    /// crosses one of its ends).
    pub kept: Option<std::ops::Range<usize>>,
}

/// Write `prefix`, `object` with `edits` applied, then `suffix`, in one allocation; `keep` (a range
/// of `object`, e.g. its `metadata` member) is carried over to the edited bytes. `None` (and `out`
/// left empty) when edits overlap or lie outside the object.
pub fn splice_line(
    out: &mut Vec<u8>,
    prefix: &[u8],
    object: &[u8],
    edits: &mut [Splice<'_>],
    suffix: &[u8],
    keep: Option<std::ops::Range<usize>>,
) -> Option<Spliced> {
    out.clear();
    edits.sort_unstable_by_key(|e| e.start);
    let mut last = 0;
    for e in edits.iter() {
        if e.start < last || e.end < e.start || e.end > object.len() {
            return None;
        }
        last = e.end;
    }
    let grow: usize = edits.iter().map(|e| e.value.len()).sum();
    out.reserve_exact(prefix.len() + object.len() + grow + suffix.len());
    out.extend_from_slice(prefix);
    let mut last = 0;
    for e in edits.iter() {
        out.extend_from_slice(&object[last..e.start]);
        out.extend_from_slice(e.value);
        last = e.end;
    }
    out.extend_from_slice(&object[last..]);
    let end = out.len();
    out.extend_from_slice(suffix);
    let kept = keep.and_then(|k| {
        let crosses = |at: usize| edits.iter().any(|e| e.start < at && at < e.end);
        if crosses(k.start) || crosses(k.end) {
            return None;
        }
        // An edit shifts a boundary when it lies before it (an insertion at the range's start
        // goes before the range, one at its end after it).
        let shift = |at: usize, before: &dyn Fn(&Splice<'_>) -> bool| {
            edits
                .iter()
                .filter(|e| before(e))
                .fold(at as isize, |p, e| {
                    p + e.value.len() as isize - (e.end - e.start) as isize
                })
        };
        let start = shift(k.start, &|e| e.end <= k.start);
        let end = shift(k.end, &|e| e.start < k.end);
        Some(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    });
    Some(Spliced {
        object: prefix.len()..end,
        kept,
    })
}

/// Where `needle` occurs, if it occurs exactly once.
fn only_occurrence(bytes: &[u8], needle: &[u8]) -> Option<usize> {
    let mut hits = memchr::memmem::find_iter(bytes, needle);
    let at = hits.next()?;
    hits.next().is_none().then_some(at)
}

/// The range of the string value that follows `key_and_quote` (which ends in the value's opening
/// quote), if `key_and_quote` occurs exactly once and the value is all digits, as stamps are.
fn string_value(bytes: &[u8], key_and_quote: &[u8]) -> Option<(usize, usize)> {
    let start = only_occurrence(bytes, key_and_quote)? + key_and_quote.len();
    let len = memchr::memchr(b'"', &bytes[start..])?;
    let digits = &bytes[start..start + len];
    (!digits.is_empty() && digits.iter().all(u8::is_ascii_digit)).then_some((start, start + len))
}

/// [`splice_line`] with the edits of a restamp: `old`'s `metadata.resourceVersion` set to `new_rv`
/// and, when `commit` is given, its [`COMMIT_ANNOTATION`] value set to it; its `metadata` range is
/// carried over. `None` (and `out` left empty) when the object does not hold both values exactly
/// once in the form the store writes them.
pub fn restamp_line(
    out: &mut Vec<u8>,
    prefix: &[u8],
    old: &StoredObject,
    new_rv: &str,
    commit: Option<&str>,
    suffix: &[u8],
) -> Option<Spliced> {
    out.clear();
    let object = &old.bytes[..];
    let old_rv = old.meta.rv.to_string();
    let rv_field = format!("\"resourceVersion\":\"{old_rv}\"");
    let rv_start =
        only_occurrence(object, rv_field.as_bytes())? + rv_field.len() - old_rv.len() - 1;
    let mut edits = [
        Splice {
            start: rv_start,
            end: rv_start + old_rv.len(),
            value: new_rv.as_bytes(),
        },
        Splice {
            start: 0,
            end: 0,
            value: b"",
        },
    ];
    let mut n = 1;
    if let Some(commit) = commit {
        let key = format!("\"{COMMIT_ANNOTATION}\":\"");
        let (start, end) = string_value(object, key.as_bytes())?;
        edits[1] = Splice {
            start,
            end,
            value: commit.as_bytes(),
        };
        n = 2;
    }
    let keep = old.metadata_at.clone();
    splice_line(out, prefix, object, &mut edits[..n], suffix, keep)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use bytes::Bytes;
    use serde_json::{Value, json};

    use crate::object::ObjMeta;

    use super::*;

    fn stamped(rv: &str, commit: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "metadata": {
                "annotations": {COMMIT_ANNOTATION: commit, "other": "x"},
                "managedFields": [{"fieldsV1": {"f:metadata": {"f:annotations": {
                    format!("f:{COMMIT_ANNOTATION}"): {}}}}}],
                "name": "p",
                "resourceVersion": rv,
            },
            "spec": {"resourceVersion": "not this one"},
        }))
        .unwrap()
    }

    fn stored(bytes: Vec<u8>, rv: u64) -> StoredObject {
        let meta = ObjMeta {
            rv,
            ..ObjMeta::default()
        };
        StoredObject::new(Bytes::from(bytes), meta)
    }

    #[test]
    fn restamps_resource_version_and_commit_time_only() {
        let old = stored(stamped("41", "1000"), 41);
        let mut out = Vec::new();
        let done = restamp_line(&mut out, b"<", &old, "12345", Some("99999999"), b">").unwrap();
        assert!(old.metadata_at.is_some());
        let (s, e) = (done.object.start, done.object.end);
        // The metadata range follows the edits.
        let new_meta = crate::json_scan::member(&out[s..e], b"metadata").unwrap();
        let new_at = new_meta.as_ptr() as usize - out[s..].as_ptr() as usize;
        assert_eq!(done.kept, Some(new_at..new_at + new_meta.len()));
        assert_eq!((out[0], out[out.len() - 1]), (b'<', b'>'));
        let got: Value = serde_json::from_slice(&out[s..e]).unwrap();
        let want: Value = serde_json::from_slice(&stamped("12345", "99999999")).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn without_commit_time_only_the_resource_version_changes() {
        let old = stored(stamped("7", "1000"), 7);
        let mut out = Vec::new();
        let done = restamp_line(&mut out, b"", &old, "8", None, b"").unwrap();
        let (s, e) = (done.object.start, done.object.end);
        let got: Value = serde_json::from_slice(&out[s..e]).unwrap();
        assert_eq!(
            got,
            serde_json::from_slice::<Value>(&stamped("8", "1000")).unwrap()
        );
    }

    #[test]
    fn refuses_objects_without_the_stamps() {
        let mut out = Vec::new();
        let no_commit = serde_json::to_vec(&json!({"metadata": {"resourceVersion": "3"}})).unwrap();
        let no_commit = stored(no_commit.clone(), 3);
        assert!(restamp_line(&mut out, b"", &no_commit, "4", Some("1"), b"").is_none());
        assert!(out.is_empty());
        // A stale resourceVersion is not found.
        let stale = stored(no_commit.bytes.to_vec(), 2);
        assert!(restamp_line(&mut out, b"", &stale, "4", None, b"").is_none());
        // A value that is not digits is not a stamp.
        let odd = stored(stamped("5", "not-a-time"), 5);
        assert!(restamp_line(&mut out, b"", &odd, "6", Some("1"), b"").is_none());
    }

    #[test]
    fn a_kept_range_moves_with_edits_before_it_and_is_lost_when_one_crosses_it() {
        let obj = b"0123456789";
        let mut out = Vec::new();
        let mut edits = [
            Splice {
                start: 1,
                end: 2,
                value: b"xyz",
            },
            Splice {
                start: 4,
                end: 4,
                value: b"+",
            },
            Splice {
                start: 8,
                end: 8,
                value: b"!",
            },
        ];
        let done = splice_line(&mut out, b"<", obj, &mut edits, b">", Some(4..8)).unwrap();
        assert_eq!(out, b"<0xyz23+4567!89>");
        assert_eq!(&out[done.object.clone()], b"0xyz23+4567!89");
        // "4567" was at 4..8: two bytes more before it, the insertion at its start before it, the
        // one at its end after it.
        assert_eq!(done.kept, Some(7..11));
        let mut crossing = [Splice {
            start: 3,
            end: 5,
            value: b"",
        }];
        let done = splice_line(&mut out, b"", obj, &mut crossing, b"", Some(4..8)).unwrap();
        assert_eq!(done.kept, None);
        let mut overlapping = [
            Splice {
                start: 1,
                end: 3,
                value: b"",
            },
            Splice {
                start: 2,
                end: 4,
                value: b"",
            },
        ];
        assert!(splice_line(&mut out, b"", obj, &mut overlapping, b"", None).is_none());
        assert!(out.is_empty());
    }
}

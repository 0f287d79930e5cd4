//! Restamping: a new version of a stored object that differs only in its resourceVersion and
//! commit-time annotation, made by splicing the new values into the stored bytes (no JSON value,
//! no re-encoding). The churn's fast update path: a write whose only change is its stamps, like a
//! controller's periodic status heartbeat.

use crate::store::COMMIT_ANNOTATION;

/// The byte range of one string value to replace and what replaces it.
struct Splice<'a> {
    start: usize,
    end: usize,
    value: &'a [u8],
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

/// Write `prefix`, `object` with its `metadata.resourceVersion` (currently `old_rv`) set to
/// `new_rv` and, when `commit` is given, its [`COMMIT_ANNOTATION`] value set to it, then `suffix`.
/// Returns the object's range in `out`, or `None` (and leaves `out` empty) when the object does not
/// hold both values exactly once in the form the store writes them.
pub fn restamp_line(
    out: &mut Vec<u8>,
    prefix: &[u8],
    object: &[u8],
    old_rv: u64,
    new_rv: &str,
    commit: Option<&str>,
    suffix: &[u8],
) -> Option<(usize, usize)> {
    out.clear();
    let old_rv = old_rv.to_string();
    let rv_field = format!("\"resourceVersion\":\"{old_rv}\"");
    let rv_start =
        only_occurrence(object, rv_field.as_bytes())? + rv_field.len() - old_rv.len() - 1;
    let mut splices = vec![Splice {
        start: rv_start,
        end: rv_start + old_rv.len(),
        value: new_rv.as_bytes(),
    }];
    if let Some(commit) = commit {
        let key = format!("\"{COMMIT_ANNOTATION}\":\"");
        let (start, end) = string_value(object, key.as_bytes())?;
        splices.push(Splice {
            start,
            end,
            value: commit.as_bytes(),
        });
    }
    splices.sort_unstable_by_key(|s| s.start);
    let grow: usize = splices.iter().map(|s| s.value.len()).sum();
    out.reserve_exact(prefix.len() + object.len() + grow + suffix.len());
    out.extend_from_slice(prefix);
    let mut last = 0;
    for s in &splices {
        if s.start < last {
            out.clear();
            return None;
        }
        out.extend_from_slice(&object[last..s.start]);
        out.extend_from_slice(s.value);
        last = s.end;
    }
    out.extend_from_slice(&object[last..]);
    let end = out.len();
    out.extend_from_slice(suffix);
    Some((prefix.len(), end))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::{Value, json};

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

    #[test]
    fn restamps_resource_version_and_commit_time_only() {
        let old = stamped("41", "1000");
        let mut out = Vec::new();
        let (s, e) =
            restamp_line(&mut out, b"<", &old, 41, "12345", Some("99999999"), b">").unwrap();
        assert_eq!((out[0], out[out.len() - 1]), (b'<', b'>'));
        let got: Value = serde_json::from_slice(&out[s..e]).unwrap();
        let want: Value = serde_json::from_slice(&stamped("12345", "99999999")).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn without_commit_time_only_the_resource_version_changes() {
        let old = stamped("7", "1000");
        let mut out = Vec::new();
        let (s, e) = restamp_line(&mut out, b"", &old, 7, "8", None, b"").unwrap();
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
        assert!(restamp_line(&mut out, b"", &no_commit, 3, "4", Some("1"), b"").is_none());
        assert!(out.is_empty());
        // A stale resourceVersion is not found.
        assert!(restamp_line(&mut out, b"", &no_commit, 2, "4", None, b"").is_none());
        // A value that is not digits is not a stamp.
        let odd = stamped("5", "not-a-time");
        assert!(restamp_line(&mut out, b"", &odd, 5, "6", Some("1"), b"").is_none());
    }
}

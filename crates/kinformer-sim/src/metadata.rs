//! Metadata-only (`PartialObjectMetadata`) representations, cut from the stored bytes.

use bytes::Bytes;
use http::HeaderMap;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::history::{Event, EventType, LINE_SUFFIX};
use crate::object::StoredObject;

/// What the client asked for in `Accept`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// The full object.
    Full,
    /// `as=PartialObjectMetadata` (single object or watch events) or `as=PartialObjectMetadataList`.
    Metadata,
}

impl Representation {
    /// Read the `Accept` header; anything mentioning `as=PartialObjectMetadata` selects metadata.
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let meta = headers
            .get_all(http::header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("as=PartialObjectMetadata"));
        if meta {
            Representation::Metadata
        } else {
            Representation::Full
        }
    }
}

/// A 406 when `Accept` asks only for the metadata form of the other shape: `PartialObjectMetadata`
/// for a list, or `PartialObjectMetadataList` for one object (kube-apiserver has no fallback there).
/// `kind` and `core` name the Go type in the message, as the apiserver does.
pub fn check_accept(
    headers: &HeaderMap,
    is_list: bool,
    kind: &str,
    core: bool,
) -> Result<(), crate::status::ApiError> {
    let mut mismatched: Option<&'static str> = None;
    for entry in headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let list = entry.contains("as=PartialObjectMetadataList");
        let object = !list && entry.contains("as=PartialObjectMetadata");
        match (list, object) {
            (false, false) => return Ok(()),
            (true, _) if is_list => return Ok(()),
            (_, true) if !is_list => return Ok(()),
            (true, _) => mismatched = Some("PartialObjectMetadataList"),
            _ => mismatched = Some("PartialObjectMetadata"),
        }
    }
    match mismatched {
        None => Ok(()),
        Some(wanted) => {
            let list_suffix = if is_list { "List" } else { "" };
            let go_type = if core {
                format!("*core.{kind}{list_suffix}")
            } else {
                format!("*unstructured.Unstructured{list_suffix}")
            };
            Err(crate::status::ApiError::not_acceptable(
                wanted, is_list, &go_type,
            ))
        }
    }
}

/// Append `obj` without its top-level `apiVersion` and `kind`: kube-apiserver's list items carry
/// no type metadata. Fast when `apiVersion` (and `kind`) lead the object, as in sorted encodings.
pub fn write_without_type_meta(obj: &[u8], out: &mut Vec<u8>) {
    let Some(mut rest) = obj.strip_prefix(b"{") else {
        out.extend_from_slice(obj);
        return;
    };
    let mut skipped = 0;
    for key in [&br#""apiVersion":""#[..], &br#""kind":""#[..]] {
        let Some(after) = rest.strip_prefix(key) else {
            break;
        };
        // Type metadata values are plain strings without escapes.
        match after.iter().position(|b| *b == b'"' || *b == b'\\') {
            Some(q) if after[q] == b'"' && after.get(q + 1) == Some(&b',') => {
                rest = &after[q + 2..];
                skipped += 1;
            }
            _ => break,
        }
    }
    if skipped == 2 {
        out.push(b'{');
        out.extend_from_slice(rest);
    } else {
        strip_members(obj, out);
    }
}

/// The general case: copy `obj` skipping top-level members named `apiVersion` or `kind`.
fn strip_members(obj: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    // Start of the current top-level member (just after `{` or `,`), and whether one was copied.
    let mut member_start = 1usize;
    let mut copied_any = false;
    out.push(b'{');
    let mut i = 0usize;
    while i < obj.len() {
        let b = obj[i];
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
        } else {
            match b {
                b'"' => in_str = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        flush_member(&obj[member_start..i], out, &mut copied_any);
                        out.push(b'}');
                        return;
                    }
                }
                b',' if depth == 1 => {
                    flush_member(&obj[member_start..i], out, &mut copied_any);
                    member_start = i + 1;
                }
                _ => {}
            }
        }
        i += 1;
    }
    // Not a well-formed object: copy it as it is.
    out.truncate(start);
    out.extend_from_slice(obj);
}

fn flush_member(member: &[u8], out: &mut Vec<u8>, copied_any: &mut bool) {
    let trimmed = member.trim_ascii_start();
    if trimmed.starts_with(br#""apiVersion""#) || trimmed.starts_with(br#""kind""#) {
        return;
    }
    if member.trim_ascii().is_empty() {
        return;
    }
    if *copied_any {
        out.push(b',');
    }
    out.extend_from_slice(member);
    *copied_any = true;
}

const OBJ_PREFIX: &[u8] =
    br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;

#[derive(Deserialize)]
struct MetaOnly<'a> {
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
}

/// Append the `PartialObjectMetadata` form of an encoded object to `out`.
pub fn write_partial(obj: &[u8], out: &mut Vec<u8>) {
    // Stored objects are valid JSON (the store encoded them), so the `metadata` member can be cut
    // by a scan that stops after it; anything the scan does not expect goes through serde_json.
    let raw = crate::json_scan::member(obj, b"metadata").or_else(|| {
        serde_json::from_slice::<MetaOnly<'_>>(obj)
            .ok()
            .and_then(|m| m.metadata)
            .map(|r| r.get().as_bytes())
    });
    out.extend_from_slice(OBJ_PREFIX);
    out.extend_from_slice(raw.unwrap_or(b"{}"));
    out.push(b'}');
}

/// Append the `PartialObjectMetadata` form of a stored object to `out` (its `metadata` located
/// when it was stored).
pub fn write_partial_stored(obj: &StoredObject, out: &mut Vec<u8>) {
    match obj.metadata_bytes() {
        Some(md) => {
            out.extend_from_slice(OBJ_PREFIX);
            out.extend_from_slice(md);
            out.push(b'}');
        }
        None => write_partial(&obj.bytes, out),
    }
}

/// The `PartialObjectMetadata` form of an encoded object.
pub fn partial(obj: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(512);
    write_partial(obj, &mut out);
    Bytes::from(out)
}

/// The metadata-only watch line of an event, built once and cached on the event.
pub fn event_line(ev: &Event) -> Bytes {
    ev.meta_line.get_or_init(|| build_event_line(ev)).clone()
}

/// The metadata-only watch line of an event, built.
fn build_event_line(ev: &Event) -> Bytes {
    let mut out = Vec::with_capacity(ev.obj.bytes.len() / 2 + 64);
    out.extend_from_slice(ev.ty.line_prefix());
    write_partial_stored(&ev.obj, &mut out);
    out.extend_from_slice(LINE_SUFFIX);
    Bytes::from(out)
}

/// A watch line of the given type for encoded object bytes, in the given representation.
pub fn typed_line(ty: EventType, obj: &[u8], repr: Representation) -> Bytes {
    let mut out = Vec::with_capacity(obj.len() + 64);
    out.extend_from_slice(ty.line_prefix());
    match repr {
        Representation::Full => out.extend_from_slice(obj),
        Representation::Metadata => write_partial(obj, &mut out),
    }
    out.extend_from_slice(LINE_SUFFIX);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_type_meta() {
        for obj in [
            &br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"kind":"x"}}"#[..],
            br#"{"apiVersion":"v1","data":{"kind":"k"},"kind":"Pod","metadata":{"name":"a"},"spec":{"kind":"x"}}"#,
            br#"{"metadata":{"name":"a"},"kind":"Pod","spec":{"kind":"x"},"apiVersion":"v1"}"#,
        ] {
            let mut out = Vec::new();
            write_without_type_meta(obj, &mut out);
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            let mut want: serde_json::Value = serde_json::from_slice(obj).unwrap();
            let m = want.as_object_mut().unwrap();
            m.remove("apiVersion");
            m.remove("kind");
            assert_eq!(v, want, "{}", String::from_utf8_lossy(&out));
        }
    }

    #[test]
    fn a_stored_object_is_cut_where_its_metadata_was_found_when_stored() {
        let bytes = serde_json::to_vec(&crate::template::pod("ns-1", "p-1", 1)).unwrap();
        let stored = StoredObject::new(Bytes::from(bytes.clone()), Default::default());
        assert!(stored.metadata_at.is_some());
        let (mut a, mut b) = (Vec::new(), Vec::new());
        write_partial_stored(&stored, &mut a);
        write_partial(&bytes, &mut b);
        assert_eq!(a, b);
        // No metadata member: the general path (an empty one).
        let bare = StoredObject::new(Bytes::from_static(b"{\"kind\":\"X\"}"), Default::default());
        assert_eq!(bare.metadata_at, None);
        a.clear();
        write_partial_stored(&bare, &mut a);
        assert!(a.ends_with(b"\"metadata\":{}}"));
    }

    #[test]
    fn cuts_metadata() {
        let p = partial(br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"x":"y"}},"spec":{"z":1}}"#);
        let v: serde_json::Value = serde_json::from_slice(&p).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
                "metadata":{"name":"a","labels":{"x":"y"}}})
        );
    }
}

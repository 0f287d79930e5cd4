//! Metadata-only (`PartialObjectMetadata`) representations, cut from the stored bytes.

use bytes::Bytes;
use http::HeaderMap;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::history::{Event, EventType, LINE_SUFFIX};

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

const OBJ_PREFIX: &[u8] =
    br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#;

#[derive(Deserialize)]
struct MetaOnly<'a> {
    #[serde(borrow)]
    metadata: Option<&'a RawValue>,
}

/// Append the `PartialObjectMetadata` form of an encoded object to `out`.
pub fn write_partial(obj: &[u8], out: &mut Vec<u8>) {
    let raw = serde_json::from_slice::<MetaOnly<'_>>(obj)
        .ok()
        .and_then(|m| m.metadata)
        .map(RawValue::get);
    out.extend_from_slice(OBJ_PREFIX);
    out.extend_from_slice(raw.unwrap_or("{}").as_bytes());
    out.push(b'}');
}

/// The `PartialObjectMetadata` form of an encoded object.
pub fn partial(obj: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(512);
    write_partial(obj, &mut out);
    Bytes::from(out)
}

/// The metadata-only watch line of an event, built once and cached on the event.
pub fn event_line(ev: &Event) -> Bytes {
    ev.meta_line
        .get_or_init(|| typed_line(ev.ty, &ev.obj.bytes, Representation::Metadata))
        .clone()
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

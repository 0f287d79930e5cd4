//! A protobuf watch body (`application/vnd.kubernetes.protobuf;stream=watch`):
//! frames of a 4-byte big-endian length and a raw `WatchEvent`, whose
//! `object` is an enveloped object (or, for `ERROR`, an enveloped `Status`).

use bytes::{Buf, Bytes, BytesMut};
use kube_core::PartialObjectMeta;
use prost::Message;

use super::messages;
use super::object::{decode_outside_arena, decode_partial_object_meta, open_envelope};
use crate::error::WireError;
use crate::event::{INITIAL_EVENTS_END_ANNOTATION, WatchEvent};
use crate::status::{ApiStatus, StatusBody, StatusDetails};

/// The longest frame accepted: a length above it is taken for a corrupt
/// stream rather than waited for.
pub const MAX_FRAME: usize = 64 << 20;

/// Takes the next whole frame off the front of `buf` (`Ok(None)` until one
/// has arrived whole).
///
/// ```
/// use bytes::BytesMut;
/// use kinformer_wire::protobuf::next_frame;
///
/// let mut buf = BytesMut::from(&[0, 0, 0, 2, 7, 8, 0, 0][..]);
/// assert_eq!(next_frame(&mut buf).unwrap().unwrap().as_ref(), &[7, 8]);
/// assert!(next_frame(&mut buf).unwrap().is_none());
/// ```
pub fn next_frame(buf: &mut BytesMut) -> Result<Option<Bytes>, WireError> {
    let Some(len) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len > MAX_FRAME {
        return Err(WireError::MalformedEvent(format!(
            "protobuf watch frame of {len} bytes (at most {MAX_FRAME})"
        )));
    }
    if buf.len() < 4 + len {
        return Ok(None);
    }
    buf.advance(4);
    Ok(Some(buf.split_to(len).freeze()))
}

/// Decodes one watch frame of a metadata-only watch.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_wire::WatchEvent;
/// use kinformer_wire::protobuf::decode_watch_frame;
///
/// // type "ADDED", object: the envelope around an object named "a".
/// let mut object = b"k8s\0".to_vec();
/// object.extend_from_slice(&[0x12, 0x05, 0x0a, 0x03, 0x0a, 0x01, b'a']);
/// let mut frame = vec![0x0a, 0x05];
/// frame.extend_from_slice(b"ADDED");
/// frame.extend_from_slice(&[0x12, object.len() as u8 + 2, 0x0a, object.len() as u8]);
/// frame.extend_from_slice(&object);
/// match decode_watch_frame::<Pod>(frame.into(), true).unwrap() {
///     WatchEvent::Added(m) => assert_eq!(m.metadata.name.as_deref(), Some("a")),
///     other => panic!("{other:?}"),
/// }
/// ```
pub fn decode_watch_frame<K>(
    frame: Bytes,
    skip_managed_fields: bool,
) -> Result<WatchEvent<PartialObjectMeta<K>>, WireError> {
    let messages::WatchEvent { r#type, object } = messages::WatchEvent::decode(frame)
        .map_err(|e| WireError::MalformedEvent(format!("protobuf watch event: {e}")))?;
    // Taken once, by the one arm that needs it.
    let object = || {
        object
            .map(|o| o.raw)
            .filter(|raw| !raw.is_empty())
            .ok_or_else(|| WireError::MissingObject(event_type(&r#type)))
    };
    Ok(match &r#type[..] {
        b"ADDED" => WatchEvent::Added(decode_partial_object_meta(object()?, skip_managed_fields)?),
        b"MODIFIED" => {
            WatchEvent::Modified(decode_partial_object_meta(object()?, skip_managed_fields)?)
        }
        b"DELETED" => {
            WatchEvent::Deleted(decode_partial_object_meta(object()?, skip_managed_fields)?)
        }
        b"BOOKMARK" => {
            let m = decode_outside_arena::<K>(object()?, true)?.metadata;
            WatchEvent::Bookmark {
                resource_version: m.resource_version.unwrap_or_default(),
                initial_events_end: m
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION))
                    .is_some_and(|v| v == "true"),
            }
        }
        b"ERROR" => WatchEvent::Error(status_error(object()?)?),
        other => return Err(WireError::UnknownEventType(event_type(other))),
    })
}

/// An event type as text, for an error.
fn event_type(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// The status an enveloped protobuf `Status` holds (the object of a watch
/// `ERROR` event, or the body of an error answer to a protobuf request).
pub fn status_error(enveloped: Bytes) -> Result<ApiStatus, WireError> {
    let (_, raw) = open_envelope(enveloped)?;
    let st = messages::Status::decode(raw)
        .map_err(|e| WireError::MalformedEvent(format!("protobuf status: {e}")))?;
    let code = u16::try_from(st.code).unwrap_or_default();
    let body = StatusBody {
        code,
        reason: st.reason,
        message: st.message,
        details: st.details.map(|d| StatusDetails {
            retry_after_seconds: u64::try_from(d.retry_after_seconds).ok().filter(|s| *s > 0),
        }),
    };
    Ok(body.into_status(code, None))
}

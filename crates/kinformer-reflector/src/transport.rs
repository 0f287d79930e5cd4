//! Sending a request through [`kube::Client`] (or checking a
//! [`DirectWatch`](crate::DirectWatch)'s answer) and turning failures into
//! [`ReflectorError`]s (status code, `Status` body, `Retry-After`).

use std::time::Duration;

use http_body_util::BodyExt;
use kinformer_wire::status::StatusBody;
use kinformer_wire::{ApiStatus, protobuf};
use kube::Client;
use kube::client::Body;

use crate::error::ReflectorError;

/// Sends `req`; a non-2xx answer becomes [`ReflectorError::Api`].
pub async fn send(
    client: &Client,
    req: http::Request<Body>,
) -> Result<http::Response<Body>, ReflectorError> {
    let resp = client.send(req).await.map_err(ReflectorError::Transport)?;
    check(resp).await
}

/// `resp` when its status is 2xx, else its `Status` body (JSON or
/// protobuf) as [`ReflectorError::Api`].
pub async fn check<B>(resp: http::Response<B>) -> Result<http::Response<B>, ReflectorError>
where
    B: http_body::Body<Data = bytes::Bytes>,
{
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let retry_after = resp
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = resp
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    if body.starts_with(protobuf::MAGIC) {
        // A protobuf `Status` (the answer to a request that accepted protobuf).
        return Err(match protobuf::watch::status_error(body) {
            Ok(st) => ApiStatus {
                code: if st.code == 0 {
                    status.as_u16()
                } else {
                    st.code
                },
                retry_after: retry_after.or(st.retry_after),
                ..st
            }
            .into(),
            Err(e) => e.into(),
        });
    }
    let st: StatusBody = serde_json::from_slice(&body).unwrap_or_else(|_| StatusBody {
        message: String::from_utf8_lossy(&body).trim().to_string(),
        ..StatusBody::default()
    });
    Err(st.into_status(status.as_u16(), retry_after).into())
}

/// Reads a whole (non-streaming) response body; a body that sends nothing
/// for `idle` is abandoned with [`ReflectorError::IdleTimeout`] (a long
/// body that keeps arriving is read to its end).
pub async fn read_body(
    resp: http::Response<Body>,
    idle: Duration,
) -> Result<bytes::Bytes, ReflectorError> {
    let mut body = resp.into_body();
    let mut parts = Vec::new();
    loop {
        match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => return Err(ReflectorError::IdleTimeout(idle)),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(ReflectorError::Body(e.to_string())),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    parts.push(data);
                }
            }
        }
    }
    // One part (the common case for a small page) is returned as it is.
    if parts.len() == 1 {
        return Ok(parts.swap_remove(0));
    }
    let mut whole = bytes::BytesMut::with_capacity(parts.iter().map(bytes::Bytes::len).sum());
    for p in parts {
        whole.extend_from_slice(&p);
    }
    Ok(whole.freeze())
}

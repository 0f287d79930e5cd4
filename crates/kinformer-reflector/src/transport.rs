//! Sending a request through [`kube::Client`] (or checking a
//! [`DirectWatch`](crate::DirectWatch)'s answer) and turning failures into
//! [`ReflectorError`]s (status code, `Status` body, `Retry-After`).

use std::time::Duration;

use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use serde::Deserialize;

use crate::error::ReflectorError;

/// The parts of a `metav1.Status` the reflector looks at.
#[derive(Debug, Default, Deserialize)]
pub struct StatusBody {
    /// HTTP code.
    #[serde(default)]
    pub code: u16,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: String,
    /// Human-readable message.
    #[serde(default)]
    pub message: String,
    /// Details (`retryAfterSeconds`).
    #[serde(default)]
    pub details: Option<StatusDetails>,
}

/// `Status.details`.
#[derive(Debug, Default, Deserialize)]
pub struct StatusDetails {
    /// Seconds to wait before retrying.
    #[serde(default, rename = "retryAfterSeconds")]
    pub retry_after_seconds: Option<u64>,
}

impl StatusBody {
    /// As an API error, with `code` when the body has none.
    pub fn into_error(self, code: u16, retry_after: Option<Duration>) -> ReflectorError {
        let retry_after = retry_after.or_else(|| {
            self.details
                .and_then(|d| d.retry_after_seconds)
                .map(Duration::from_secs)
        });
        ReflectorError::Api {
            code: if self.code == 0 { code } else { self.code },
            reason: self.reason,
            message: self.message,
            retry_after,
        }
    }
}

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
    if body.starts_with(crate::protobuf::MAGIC) {
        // A protobuf `Status` (the answer to a request that accepted protobuf).
        return Err(match crate::protobuf::watch::status_error(body) {
            Ok(ReflectorError::Api {
                code,
                reason,
                message,
                retry_after: from_details,
            }) => ReflectorError::Api {
                code: if code == 0 { status.as_u16() } else { code },
                reason,
                message,
                retry_after: retry_after.or(from_details),
            },
            Ok(other) | Err(other) => other,
        });
    }
    let st: StatusBody = serde_json::from_slice(&body).unwrap_or_else(|_| StatusBody {
        message: String::from_utf8_lossy(&body).trim().to_string(),
        ..StatusBody::default()
    });
    Err(st.into_error(status.as_u16(), retry_after))
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

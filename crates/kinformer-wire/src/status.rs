//! A `metav1.Status`: the body of an error answer and the object of a
//! watch `ERROR` event, read as [`StatusBody`] and kept as [`ApiStatus`].

use std::time::Duration;

use serde::Deserialize;

/// An error status from the server: an HTTP error answer or a watch
/// `ERROR` event.
///
/// ```
/// use kinformer_wire::ApiStatus;
/// let st = ApiStatus { code: 410, reason: "Expired".into(), ..ApiStatus::default() };
/// assert!(st.is_expired());
/// assert!(!st.is_too_many_requests());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApiStatus {
    /// HTTP status code (from the `Status` object for watch events).
    pub code: u16,
    /// `Status.reason`, e.g. `Expired`.
    pub reason: String,
    /// `Status.message`.
    pub message: String,
    /// `Retry-After`, when the server sent one (the header, or the
    /// status's `details.retryAfterSeconds`).
    pub retry_after: Option<Duration>,
}

impl ApiStatus {
    /// 410 Gone / `Expired`: the requested resourceVersion is no longer available.
    pub fn is_expired(&self) -> bool {
        self.code == 410 || self.reason == "Expired" || self.reason == "Gone"
    }

    /// The requested resourceVersion is newer than the server's.
    pub fn is_too_large_resource_version(&self) -> bool {
        (self.code == 504 || self.reason == "Timeout")
            && self.message.contains("Too large resource version")
    }

    /// 429 TooManyRequests.
    pub fn is_too_many_requests(&self) -> bool {
        self.code == 429
    }
}

impl std::fmt::Display for ApiStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

/// The parts of a `metav1.Status` that are read.
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
    /// As an [`ApiStatus`]: `code` when the body has none, `retry_after`
    /// (a `Retry-After` header) before the body's `retryAfterSeconds`.
    pub fn into_status(self, code: u16, retry_after: Option<Duration>) -> ApiStatus {
        let retry_after = retry_after.or_else(|| {
            self.details
                .and_then(|d| d.retry_after_seconds)
                .map(Duration::from_secs)
        });
        ApiStatus {
            code: if self.code == 0 { code } else { self.code },
            reason: self.reason,
            message: self.message,
            retry_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> ApiStatus {
        ApiStatus {
            code,
            reason: reason.into(),
            message: message.into(),
            retry_after: None,
        }
    }

    #[test]
    fn classifies_statuses() {
        assert!(api(410, "Expired", "too old").is_expired());
        assert!(api(500, "Gone", "").is_expired());
        assert!(!api(500, "InternalError", "").is_expired());
        assert!(
            api(504, "Timeout", "Too large resource version: 9, current: 3")
                .is_too_large_resource_version()
        );
        assert!(!api(504, "Timeout", "other").is_too_large_resource_version());
        assert!(api(429, "TooManyRequests", "").is_too_many_requests());
    }

    #[test]
    fn a_body_takes_the_answer_code_and_header_first() {
        let body = StatusBody {
            code: 0,
            reason: "TooManyRequests".into(),
            message: "slow down".into(),
            details: Some(StatusDetails {
                retry_after_seconds: Some(3),
            }),
        };
        let st = body.into_status(429, None);
        assert_eq!(st.code, 429);
        assert_eq!(st.retry_after, Some(Duration::from_secs(3)));
        let header = StatusBody::default().into_status(503, Some(Duration::from_secs(1)));
        assert_eq!(
            (header.code, header.retry_after),
            (503, Some(Duration::from_secs(1)))
        );
    }
}

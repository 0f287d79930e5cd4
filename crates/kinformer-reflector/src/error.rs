//! Typed errors of the reflector. None of them stops it: each is reported to
//! the watch-error callback, logged and counted, then the reflector recovers
//! (re-watch, relist or back off) as client-go does.

use std::time::Duration;

use kinformer_core::InformerError;
use kinformer_wire::{ApiStatus, WireError};
use thiserror::Error;

/// Something went wrong while listing or watching.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReflectorError {
    /// The request could not be sent or no response arrived (includes
    /// connection refused; see [`ReflectorError::is_connection_refused`]).
    #[error("request failed: {0}")]
    Transport(#[source] kube::Error),
    /// The server answered with an error status (HTTP or a watch `ERROR` event).
    #[error("API error {code} {reason}: {message}")]
    Api {
        /// HTTP status code (from the `Status` object for watch events).
        code: u16,
        /// `Status.reason`, e.g. `Expired`.
        reason: String,
        /// `Status.message`.
        message: String,
        /// `Retry-After`, when the server sent one.
        retry_after: Option<Duration>,
    },
    /// Reading a response body failed midway.
    #[error("reading the response failed: {0}")]
    Body(String),
    /// The server sent nothing for the idle timeout: no response head to a
    /// LIST or WATCH request, no more of a LIST's body, or no watch event
    /// (not even a bookmark).
    #[error("no answer from the server for {0:?}")]
    IdleTimeout(Duration),
    /// A watch line is not a JSON watch event.
    #[error("malformed watch event: {0}")]
    MalformedEvent(String),
    /// A watch event of a type this reflector does not know.
    #[error("unknown watch event type {0:?}")]
    UnknownEventType(String),
    /// An ADDED/MODIFIED/DELETED event without an object.
    #[error("watch event {0} without an object")]
    MissingObject(String),
    /// An object that could not be decoded as the informer's type.
    #[error("could not decode object: {0}")]
    DecodeObject(String),
    /// An object without `metadata.name` (it cannot be cached).
    #[error("object without metadata.name (namespace {namespace:?})")]
    MissingName {
        /// The namespace the object claimed.
        namespace: Option<String>,
    },
    /// A LIST answer that is not a list.
    #[error("malformed list response: {0}")]
    MalformedList(String),
    /// The stream ended in the middle of a line.
    #[error("watch stream ended in the middle of an event")]
    TruncatedEvent,
    /// The watch closed very soon without any event (client-go relists).
    #[error("very short watch: closed after {0:?} without any event")]
    VeryShortWatch(Duration),
    /// A WatchList stream ended before its initial-events-end bookmark.
    #[error("watch-list stream ended before the initial-events-end bookmark")]
    WatchListIncomplete,
    /// The server does not support WatchList; the reflector lists instead.
    #[error("watch-list not supported by the server: {0}")]
    WatchListUnsupported(String),
    /// A request could not be built (invalid selector characters, ...).
    #[error("could not build request: {0}")]
    Request(String),
    /// Decoding one object panicked (a poison object): the object is
    /// skipped and counted.
    #[error("decoding an object panicked: {0}")]
    DecodePanicked(String),
    /// A decode worker went away without answering (it panicked or its
    /// pool was shut down).
    #[error("a decode worker was lost")]
    DecodeWorkerLost,
    /// What was asked for is not supported by this build or transport.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The queue refused an object.
    #[error(transparent)]
    Fifo(#[from] InformerError),
}

impl From<ApiStatus> for ReflectorError {
    fn from(st: ApiStatus) -> Self {
        Self::Api {
            code: st.code,
            reason: st.reason,
            message: st.message,
            retry_after: st.retry_after,
        }
    }
}

/// Each decode error as the reflector's error of the same name (and the
/// same metrics label).
impl From<WireError> for ReflectorError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::MalformedEvent(m) => Self::MalformedEvent(m),
            WireError::UnknownEventType(t) => Self::UnknownEventType(t),
            WireError::MissingObject(t) => Self::MissingObject(t),
            WireError::DecodeObject(m) => Self::DecodeObject(m),
            WireError::MissingName { namespace } => Self::MissingName { namespace },
            WireError::MalformedList(m) => Self::MalformedList(m),
            other => Self::DecodeObject(other.to_string()),
        }
    }
}

impl ReflectorError {
    /// The HTTP code of an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// 410 Gone / `Expired`: the requested resourceVersion is no longer available.
    pub fn is_expired(&self) -> bool {
        matches!(self, Self::Api { code, reason, .. }
            if *code == 410 || reason == "Expired" || reason == "Gone")
    }

    /// The requested resourceVersion is newer than the server's.
    pub fn is_too_large_resource_version(&self) -> bool {
        matches!(self, Self::Api { code, message, reason, .. }
            if (*code == 504 || reason == "Timeout")
                && message.contains("Too large resource version"))
    }

    /// 429 TooManyRequests.
    pub fn is_too_many_requests(&self) -> bool {
        matches!(self, Self::Api { code: 429, .. })
    }

    /// The server refused the connection (nothing listens yet).
    pub fn is_connection_refused(&self) -> bool {
        let Self::Transport(e) = self else {
            return false;
        };
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = cur {
            if let Some(io) = err.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::ConnectionRefused
            {
                return true;
            }
            if err.to_string().contains("Connection refused") {
                return true;
            }
            cur = err.source();
        }
        false
    }

    /// Short label used for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Transport(_) => "transport",
            Self::Api { .. } => "api",
            Self::Body(_) => "body",
            Self::IdleTimeout(_) => "idle_timeout",
            Self::MalformedEvent(_) => "malformed_event",
            Self::UnknownEventType(_) => "unknown_event_type",
            Self::MissingObject(_) => "missing_object",
            Self::DecodeObject(_) => "decode_object",
            Self::MissingName { .. } => "missing_name",
            Self::MalformedList(_) => "malformed_list",
            Self::TruncatedEvent => "truncated_event",
            Self::VeryShortWatch(_) => "very_short_watch",
            Self::WatchListIncomplete => "watch_list_incomplete",
            Self::WatchListUnsupported(_) => "watch_list_unsupported",
            Self::Request(_) => "request",
            Self::DecodePanicked(_) => "decode_panicked",
            Self::DecodeWorkerLost => "decode_worker_lost",
            Self::Unsupported(_) => "unsupported",
            Self::Fifo(_) => "fifo",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, reason: &str, message: &str) -> ReflectorError {
        ReflectorError::Api {
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
        assert!(api(429, "TooManyRequests", "").is_too_many_requests());
        assert!(!api(429, "", "").is_connection_refused());
    }
}

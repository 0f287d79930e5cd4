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
    /// The server answered with an error status (HTTP or a watch `ERROR`
    /// event).
    #[error("API error {0}")]
    Api(ApiStatus),
    /// Reading a response body failed midway.
    #[error("reading the response failed: {0}")]
    Body(String),
    /// The server sent nothing for the idle timeout: no response head to a
    /// LIST or WATCH request, no more of a LIST's body, or no watch event
    /// (not even a bookmark).
    #[error("no answer from the server for {0:?}")]
    IdleTimeout(Duration),
    /// Bytes from the server that could not be decoded: a malformed watch
    /// event or LIST page, an unknown event type, an event without an
    /// object, an object that is not of the informer's type or has no name
    /// ([`WireError`]).
    #[error(transparent)]
    Wire(#[from] WireError),
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
    /// An object outside the informer's shard, which the server sent
    /// because it did not apply the `shardSelector` (a server without the
    /// `ShardedListAndWatch` gate): left out of the cache, and counted in
    /// [`ReflectorMetrics::shard_filtered`](crate::ReflectorMetrics::shard_filtered).
    /// A watch event's resourceVersion still moves the watch on.
    #[error("object outside the shard")]
    OutsideShard {
        /// The object's resourceVersion, when it was read.
        resource_version: Option<String>,
    },
}

impl From<ApiStatus> for ReflectorError {
    fn from(st: ApiStatus) -> Self {
        Self::Api(st)
    }
}

impl ReflectorError {
    /// The HTTP code of an API error.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api(st) => Some(st.code),
            _ => None,
        }
    }

    /// The server's status, for an API error.
    pub fn status(&self) -> Option<&ApiStatus> {
        match self {
            Self::Api(st) => Some(st),
            _ => None,
        }
    }

    /// 410 Gone / `Expired` (see [`ApiStatus::is_expired`]).
    pub fn is_expired(&self) -> bool {
        self.status().is_some_and(ApiStatus::is_expired)
    }

    /// The requested resourceVersion is newer than the server's (see
    /// [`ApiStatus::is_too_large_resource_version`]).
    pub fn is_too_large_resource_version(&self) -> bool {
        self.status()
            .is_some_and(ApiStatus::is_too_large_resource_version)
    }

    /// 429 TooManyRequests.
    pub fn is_too_many_requests(&self) -> bool {
        self.status().is_some_and(ApiStatus::is_too_many_requests)
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
            Self::Api(_) => "api",
            Self::Body(_) => "body",
            Self::IdleTimeout(_) => "idle_timeout",
            Self::Wire(e) => e.kind(),
            Self::TruncatedEvent => "truncated_event",
            Self::VeryShortWatch(_) => "very_short_watch",
            Self::WatchListIncomplete => "watch_list_incomplete",
            Self::WatchListUnsupported(_) => "watch_list_unsupported",
            Self::Request(_) => "request",
            Self::DecodePanicked(_) => "decode_panicked",
            Self::DecodeWorkerLost => "decode_worker_lost",
            Self::Unsupported(_) => "unsupported",
            Self::Fifo(_) => "fifo",
            Self::OutsideShard { .. } => "outside_shard",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_answers_for_its_status() {
        let st = |code: u16, reason: &str| ApiStatus {
            code,
            reason: reason.into(),
            ..ApiStatus::default()
        };
        assert!(ReflectorError::from(st(410, "Expired")).is_expired());
        assert!(ReflectorError::from(st(429, "TooManyRequests")).is_too_many_requests());
        assert_eq!(ReflectorError::from(st(503, "")).code(), Some(503));
        let wire = ReflectorError::from(WireError::MalformedList("x".into()));
        assert_eq!((wire.kind(), wire.code()), ("malformed_list", None));
        assert!(!wire.is_expired() && !wire.is_connection_refused());
    }
}

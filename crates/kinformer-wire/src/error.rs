//! Typed decode errors ([`WireError`]): what a watch line or frame, an
//! object or a LIST page can be wrong with. Untrusted bytes give one of
//! these, never a panic.

use thiserror::Error;

/// Bytes from the server that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WireError {
    /// A watch line (or protobuf frame) is not a watch event.
    #[error("malformed watch event: {0}")]
    MalformedEvent(String),
    /// A watch event of a type this decoder does not know.
    #[error("unknown watch event type {0:?}")]
    UnknownEventType(String),
    /// An ADDED/MODIFIED/DELETED (or BOOKMARK) event without an object.
    #[error("watch event {0} without an object")]
    MissingObject(String),
    /// An object that could not be decoded as the wanted type.
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
    /// A shard selector that does not parse (see [`crate::shard`]).
    #[error("invalid shard selector: {0}")]
    ShardSelector(String),
}

impl WireError {
    /// Short label used for logs and metrics (the same labels as the
    /// reflector's errors of the same names).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MalformedEvent(_) => "malformed_event",
            Self::UnknownEventType(_) => "unknown_event_type",
            Self::MissingObject(_) => "missing_object",
            Self::DecodeObject(_) => "decode_object",
            Self::MissingName { .. } => "missing_name",
            Self::MalformedList(_) => "malformed_list",
            Self::ShardSelector(_) => "shard_selector",
        }
    }
}

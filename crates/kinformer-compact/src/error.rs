//! The crate's one error type.

/// What can fail when an object is packed into its compact form or decoded
/// from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompactError {
    /// The object could not be encoded (its `Serialize` impl failed).
    #[error("could not encode the object: {0}")]
    Encode(String),
    /// The compact bytes are corrupt or truncated: the compression frame is
    /// invalid, or its length disagrees with the recorded one.
    #[error("corrupt compact bytes: {0}")]
    Corrupt(String),
    /// The bytes decompressed, but do not decode as the object's type.
    #[error("could not decode the object: {0}")]
    Decode(String),
}

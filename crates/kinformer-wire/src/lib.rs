//! kinformer-wire: Kubernetes' wire formats as kinformer reads them. Watch
//! events, objects and LIST pages in JSON and in protobuf, decoded from
//! untrusted bytes into typed values or a [`WireError`] (never a panic), and
//! the protobuf encoders the simulator serves with. No tokio, no HTTP: the
//! reflector feeds it bytes, the simulator takes its encoders.
//!
//! Module map:
//! - [`event`]: one JSON watch event line ([`WatchEvent`]);
//! - `event_line`: a watch line read in one pass (type first, then the object);
//! - [`json`]: one object (simd-json; lists at their exact size);
//! - [`list`]: a JSON LIST page split into its items;
//! - [`prune`]: decoding without `metadata.managedFields`;
//! - `managed_fields`: finding that field in raw JSON, to leave it out of the parse;
//! - [`partial_meta`]: kube's `PartialObjectMeta` without serde's `flatten`;
//! - [`dynamic_object`]: the same for kube's `DynamicObject`;
//! - `type_meta`: their `apiVersion` and `kind`, read as the derived impls read them;
//! - [`object_decode`]: which decoder a type uses ([`Decoders`]);
//! - [`protobuf`]: metadata-only objects, watch frames and lists in Kubernetes' protobuf encoding, and their encoders;
//! - [`status`]: a `metav1.Status` ([`ApiStatus`]);
//! - [`shard`]: shard selectors of sharded LIST and WATCH (KEP-5866);
//! - [`error`]: the decode errors ([`WireError`]).

pub mod dynamic_object;
pub mod error;
pub mod event;
mod event_line;
pub mod json;
pub mod list;
mod managed_fields;
pub mod object_decode;
pub mod partial_meta;
pub mod protobuf;
pub mod prune;
pub mod shard;
pub mod status;
#[cfg(test)]
mod testing;
mod type_meta;

pub use error::WireError;
pub use event::{INITIAL_EVENTS_END_ANNOTATION, WatchEvent};
pub use object_decode::Decoders;
pub use status::ApiStatus;

//! kinformer-reflector: a thin async LIST/WATCH loop over [`kube`] that feeds a
//! [`kinformer_core::DeltaFifo`], with client-go's recovery semantics.
//!
//! ```text
//!  kube-apiserver ──LIST (paged) / WATCH (lines)──► Reflector (tokio task) ──add/update/delete/replace──► DeltaFifo
//! ```
//!
//! Module map:
//! - [`reflector`]: the [`Reflector`] and its run loop (watch, WatchList, recover);
//! - `list`: the paged LIST path, streamed into the queue;
//! - [`decode`]: the [`DecodePool`] of OS threads that decode objects;
//! - [`shard`]: which decode thread owns a key (objects are freed where decoded);
//! - [`events`]: the ordered decode pipeline (raw lines and items in, objects out);
//! - [`json`]: decoding one object (simd-json; lists at their exact size);
//! - [`prune`]: decoding without `metadata.managedFields`;
//! - [`object_decode`]: which decoder a reflector uses for its type ([`Decoders`]);
//! - [`partial_meta`]: decoding kube's `PartialObjectMeta` without serde's `flatten`;
//! - [`protobuf`]: metadata-only objects, watch frames and lists in Kubernetes' protobuf encoding;
//! - [`dynamic_object`]: the same for kube's `DynamicObject`;
//! - `type_meta`: their `apiVersion` and `kind`, read as the derived impls read them;
//! - `managed_fields`: finding that field in raw JSON, to leave it out of the parse;
//! - [`target`]: what is listed and watched ([`ListWatchTarget`]) and how requests are built;
//! - [`config`]: [`ReflectorConfig`] (page size, WatchList, timeouts, backoff);
//! - [`backoff`]: client-go's exponential backoff with jitter and reset;
//! - [`event`]: decoding one watch event line;
//! - `event_line`: a watch line read in one pass (type first, then the object);
//! - [`lines`]: splitting a response body into lines with an idle timeout;
//! - [`transport`]: sending requests and classifying failures;
//! - [`direct`]: watches read straight from their connections ([`DirectWatch`]);
//! - [`error`]: typed errors ([`ReflectorError`]);
//! - `fuzzing`: entry points of the fuzz targets (only under `--cfg fuzzing`);
//! - [`metrics`]: [`ReflectorMetrics`] counters;
//! - [`health`]: what a reflector is doing now ([`ReflectorStatus`], [`Phase`]).
//!
//! The reflector lists and watches; decoding runs on a [`DecodePool`] (one
//! thread per core) in batches whose results come back in arrival order;
//! caching and handler dispatch happen in [`kinformer_core`].

pub mod backoff;
pub mod config;
pub mod decode;
pub mod direct;
pub mod dynamic_object;
pub mod error;
pub mod event;
mod event_line;
pub mod events;
#[cfg(fuzzing)]
pub mod fuzzing;
pub mod health;
pub mod json;
pub mod lines;
mod list;
mod managed_fields;
pub mod metrics;
pub mod object_decode;
pub mod partial_meta;
pub mod protobuf;
pub mod prune;
pub mod reflector;
pub mod shard;
pub mod target;
pub mod transport;
mod type_meta;

pub use backoff::{Backoff, BackoffConfig};
pub use config::ReflectorConfig;
pub use decode::DecodePool;
pub use direct::DirectWatch;
pub use error::ReflectorError;
pub use event::{INITIAL_EVENTS_END_ANNOTATION, WatchEvent};
pub use health::{Phase, ReflectorStatus};
pub use metrics::{MetricsHandle, ReflectorMetrics};
pub use object_decode::Decoders;
pub use reflector::{Reflector, WatchErrorHandler};
pub use target::ListWatchTarget;
pub use tokio_util::sync::CancellationToken;

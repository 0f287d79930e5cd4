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
//! - [`whole`]: which types may be released whole, and [`DecodePool::release_whole_into`];
//! - [`decode_thread`]: which decode thread owns a key (objects are freed where decoded);
//! - [`reshard`]: moving a running reflector to another shard ([`ShardControl`]);
//! - `shard_filter`: objects outside the shard told from their raw bytes;
//! - [`events`]: the ordered decode pipeline (raw lines and items in, objects out);
//! - [`target`]: what is listed and watched ([`ListWatchTarget`]) and how requests are built;
//! - [`config`]: [`ReflectorConfig`] (page size, WatchList, timeouts, backoff);
//! - [`backoff`]: client-go's exponential backoff with jitter and reset;
//! - [`lines`]: splitting a response body into lines with an idle timeout;
//! - [`transport`]: sending requests and classifying failures;
//! - [`direct`]: watches read straight from their connections ([`DirectWatch`]);
//! - [`error`]: typed errors ([`ReflectorError`]);
//! - `fuzzing`: entry points of the fuzz targets (only under `--cfg fuzzing`);
//! - [`metrics`]: [`ReflectorMetrics`] counters;
//! - [`health`]: what a reflector is doing now ([`ReflectorStatus`], [`Phase`]).
//!
//! Decoding the bytes (JSON and protobuf watch events, objects, LIST pages)
//! is [`kinformer_wire`]'s; its modules are re-exported here under their
//! names ([`json`], [`event`], [`protobuf`], ...).
//!
//! The reflector lists and watches; decoding runs on a [`DecodePool`] (one
//! thread per core) in batches whose results come back in arrival order;
//! caching and handler dispatch happen in [`kinformer_core`].

pub mod backoff;
pub mod config;
pub mod decode;
pub mod decode_thread;
pub mod direct;
pub mod error;
pub mod events;
#[cfg(fuzzing)]
pub mod fuzzing;
pub mod health;
pub mod lines;
mod list;
pub mod metrics;
pub mod reflector;
pub mod reshard;
mod shard_filter;
pub mod target;
pub mod transport;
pub mod whole;

pub use backoff::{Backoff, BackoffConfig};
pub use config::ReflectorConfig;
pub use decode::DecodePool;
pub use direct::DirectWatch;
pub use error::ReflectorError;
pub use health::{Phase, ReflectorStatus};
pub use kinformer_wire::Decoders;
pub use kinformer_wire::shard::ShardSelector;
pub use kinformer_wire::{
    ApiStatus, INITIAL_EVENTS_END_ANNOTATION, WatchEvent, WireError, dynamic_object, event, json,
    object_decode, partial_meta, protobuf, prune,
};
pub use metrics::{MetricsHandle, ReflectorMetrics};
pub use reflector::{Reflector, WatchErrorHandler};
pub use reshard::ShardControl;
pub use target::ListWatchTarget;
pub use tokio_util::sync::CancellationToken;
pub use whole::OwnsPartsAlone;

//! kinformer-reflector: a thin async LIST/WATCH loop over [`kube`] that feeds a
//! [`kinformer_core::DeltaFifo`], with client-go's recovery semantics.
//!
//! ```text
//!  kube-apiserver ──LIST (paged) / WATCH (lines)──► Reflector (tokio task) ──add/update/delete/replace──► DeltaFifo
//! ```
//!
//! Module map:
//! - [`reflector`]: the [`Reflector`] and its run loop (list, watch, recover);
//! - [`target`]: what is listed and watched ([`ListWatchTarget`]) and how requests are built;
//! - [`config`]: [`ReflectorConfig`] (page size, WatchList, timeouts, backoff);
//! - [`backoff`]: client-go's exponential backoff with jitter and reset;
//! - [`event`]: decoding one watch event line;
//! - [`lines`]: splitting a response body into lines with an idle timeout;
//! - [`transport`]: sending requests and classifying failures;
//! - [`error`]: typed errors ([`ReflectorError`]);
//! - [`metrics`]: [`ReflectorMetrics`] counters.
//!
//! The reflector does nothing but list and watch: decoding, caching and handler
//! dispatch happen in [`kinformer_core`].

pub mod backoff;
pub mod config;
pub mod error;
pub mod event;
pub mod lines;
pub mod metrics;
pub mod reflector;
pub mod target;
pub mod transport;

pub use backoff::{Backoff, BackoffConfig};
pub use config::ReflectorConfig;
pub use error::ReflectorError;
pub use event::{INITIAL_EVENTS_END_ANNOTATION, WatchEvent};
pub use metrics::{MetricsHandle, ReflectorMetrics};
pub use reflector::{Reflector, WatchErrorHandler};
pub use target::ListWatchTarget;
pub use tokio_util::sync::CancellationToken;

//! Controller building blocks on top of kinformer, starting with the work
//! queue: client-go's `util/workqueue` semantics (stingy, fair, never one item
//! to two workers at once), two priorities without starvation, delayed and
//! rate-limited adds, and client-go's metrics.
//!
//! | module | concept |
//! | --- | --- |
//! | `queue` | [`WorkQueue`]: dirty and processing sets, get/next/done, shutdown |
//! | `priority` | [`Priority`]: Normal before Low, with ageing |
//! | `delay` | [`WorkQueue::add_after`]: one deadline heap and one thread per queue |
//! | `rate_limit` | [`RateLimiter`] and client-go's limiters |
//! | `metrics` | [`WorkQueueMetrics`], [`WorkQueueCollector`] |
//! | `builder` | [`WorkQueueBuilder`] |
//!
//! Keys are [`ObjectKey`]s by default; any `Eq + Hash + Clone + Send + Sync`
//! type works.

mod builder;
mod delay;
mod metrics;
mod priority;
mod queue;
mod rate_limit;

pub use builder::WorkQueueBuilder;
pub use kinformer_core::ObjectKey;
pub use metrics::{DurationStats, WorkQueueCollector, WorkQueueMetrics};
pub use priority::{DEFAULT_MAX_LOW_PRIORITY_WAIT, Priority};
pub use queue::WorkQueue;
pub use rate_limit::{
    ItemExponential, MaxOf, RateLimiter, TokenBucket, default_controller_rate_limiter,
};

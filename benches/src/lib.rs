//! Shared fixtures of the benchmarks: small Pods, the baseline stores the
//! Indexer is compared with, a counting allocator, and the command line's
//! benchmark filter.

pub mod alloc;
pub mod baseline;
pub mod filter;
pub mod fixtures;

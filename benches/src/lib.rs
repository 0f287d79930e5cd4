//! Shared fixtures of the benchmarks: small Pods, the baseline stores the
//! Indexer is compared with, and a counting allocator.

pub mod alloc;
pub mod baseline;
pub mod fixtures;

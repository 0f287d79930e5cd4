//! Shared helpers of the kinformer examples.

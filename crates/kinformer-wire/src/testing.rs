//! Fixtures of the unit tests (`tests/fixtures/json/`).

/// A load-test Pod as the simulator serves it, `managedFields` included.
pub(crate) const POD: &str = include_str!("../tests/fixtures/json/pod.json");

/// The same Pod as a `PartialObjectMetadata`.
pub(crate) const POD_METADATA: &str = include_str!("../tests/fixtures/json/pod-metadata.json");

//! The durable crate's tests: one test binary, one module per subject, so that they link once
//! and run in parallel. Each test has a database of its own (`common`).

#[path = "../common/mod.rs"]
mod common;

// The instruments need the feature; `cargo test --workspace` turns it on (the examples use it).
// Each test's recorder is set for its own thread (`metrics::with_local_recorder`), so the other
// tests of this binary do not count into it.
#[cfg(feature = "metrics")]
mod metrics;
mod queue;

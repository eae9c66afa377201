//! The examples' tests that can share a process: one test binary, one module per subject, so
//! that their tests run in parallel (most of their time is spent waiting on child processes: the
//! payment service, the portal, Prometheus) and the examples link once for all of them.
//!
//! `tests/metrics_docs.rs` stays a binary of its own: it installs the process's global metrics
//! recorder, and its scenario drives the portal's breaker and budget, statics of the process that
//! `queue_portal` drives too.

#[path = "../common/mod.rs"]
mod common;

mod payments_faults;
mod portal_config;
// What a scrape of `/metrics` shows, so the runtime's instruments must be compiled in.
#[cfg(feature = "metrics")]
mod prometheus;
mod queue_faults;
mod queue_portal;
#[cfg(feature = "rehearse")]
mod rehearsal;

//! Runnable examples: `cargo run --example portal`, `cargo run --example payments`, and what
//! their processes share with the fault tests:
//!
//! - the portal, which keeps the checks it cannot make now in `retry_durable`'s job queue, and
//!   crash points (`examples/tests/it/queue_*.rs`);
//! - [`payments`], the payment service of `cargo run --example payments`, which the
//!   `payments-service` binary runs on its own for the fault tests
//!   (`examples/tests/it/payments_faults.rs`) and the benchmark in `bench/`;
//! - [`metrics`], the `/metrics` page both serve when asked to (`--metrics`), which the
//!   Prometheus test (`examples/tests/it/prometheus.rs`) scrapes.

pub mod crash;
/// The guides whose code blocks need the portal: their doctests run here.
pub mod guide {
    // retry-durable's queue guide, published with that crate (which shows it without running
    // its block: the block uses this package's portal).
    #[doc = include_str!("../../retry-durable/docs/queue.md")]
    pub mod queue {}
}
pub mod metrics;
pub mod payments;
pub mod portal;

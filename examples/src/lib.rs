//! Runnable examples: `cargo run --example portal`, `cargo run --example payments`, and what
//! their processes share with the fault tests:
//!
//! - the portal, its durable job queue, and crash points (`examples/tests/queue_*.rs`);
//! - [`payments`], the payment service of `cargo run --example payments`, which the
//!   `payments-service` binary runs on its own for the fault tests
//!   (`examples/tests/payments_faults.rs`) and the benchmark in `bench/`.

pub mod crash;
/// The guides of this package, Markdown files under `examples/docs/` whose code blocks run as
/// doctests.
pub mod guide {
    #[doc = include_str!("../docs/queue.md")]
    pub mod queue {}
}
pub mod payments;
pub mod portal;
pub mod queue;

//! Runnable examples: `cargo run --example portal`, and what its processes share with the fault
//! tests (`examples/tests/queue_*.rs`): the portal, its durable job queue, and crash points.

pub mod crash;
pub mod portal;
pub mod queue;

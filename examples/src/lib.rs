//! Runnable examples: `cargo run --example portal`, `cargo run --example payments`.
//!
//! The library holds what an example shares with a binary or a test: [`payments`], the payment
//! service of `cargo run --example payments`, which the `payments-service` binary runs on its
//! own for the fault tests (`examples/tests/payments_faults.rs`) and the benchmark in `bench/`.

pub mod payments;

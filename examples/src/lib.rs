//! Runnable examples: `cargo run --example portal`.

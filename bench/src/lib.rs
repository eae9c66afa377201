//! Load simulations of `#[retry]` and what they need in common: the `storm` binary
//! is a thin wrapper around [`storm`], and draws with [`plot`].
//!
//! Not published: this package exists to produce the numbers and pictures in `RESULTS.md`.

pub mod cli;
pub mod plot;
pub mod storm;

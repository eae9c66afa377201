//! Load simulations of `#[retry]` and what they need in common: the `storm` and `occ` binaries
//! are thin wrappers around [`storm`] and [`occ`], draw with [`plot`], and write CSV with
//! [`records`]; the `metrics` binary draws the portal's long outage from its scraped metrics
//! ([`outage`]).
//!
//! Not published: this package exists to produce the numbers and pictures in `RESULTS.md`.

pub mod cli;
pub mod gate;
pub mod occ;
pub mod outage;
pub mod plot;
pub mod records;
pub mod storm;
pub mod tail;

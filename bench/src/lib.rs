//! Load simulations of `#[retry]` and what they need in common: the `storm`, `occ`,
//! `amplification` and `collapse` binaries are thin wrappers around [`storm`], [`occ`],
//! [`amplification`] and [`collapse`] (the last two Marc Brooker's simulators, on tokio's paused
//! clock through [`virtual_time`]), draw with [`plot`], and write CSV with [`records`]; the
//! `metrics` binary draws the portal's long outage from its scraped metrics ([`outage`]). The
//! admission gate's rows in each simulation go through [`gate`].
//!
//! Not published: this package exists to produce the numbers and pictures in `RESULTS.md`.

pub mod amplification;
pub mod cli;
pub mod collapse;
pub mod gate;
pub mod occ;
pub mod outage;
pub mod plot;
pub mod records;
pub mod storm;
pub mod tail;
pub mod virtual_time;

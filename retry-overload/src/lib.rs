//! Client-side overload control, the algorithms behind `#[retry(gate = ...)]` and the retry quota
//! of `#[retry(aws2026 = ...)]` in [`retry-runtime`](https://docs.rs/retry-runtime), which
//! re-exports every item here at its own root (`retry_runtime::AdmissionGate`, ...) and plugs
//! them into its loop. Use them through the runtime; this crate alone has the algorithms without
//! the attribute.
//!
//! - An admission gate asked before every attempt, first tries included ([`AdmissionGate`]), in
//!   four modes: client-side adaptive throttling ([`AdaptiveThrottling`], Google's SRE book), the
//!   AWS SDKs' CUBIC client rate limiter ([`ClientRateLimit`]), and Netflix's adaptive
//!   concurrency limits ([`Aimd`], [`Gradient2`]). A retry budget bounds retries and a breaker
//!   stops calls to a service that is down; neither sheds first tries, which are what keeps a
//!   struggling service down once the retries are bounded (the sustaining load of a metastable
//!   failure). The gate does, and learns from each attempt's answer.
//! - The retry quota and the kinds of failure of the AWS SDKs' standard mode as updated in 2026
//!   ([`RetryQuota`], [`FailureKind`]). The mode's delays and the order of its decisions
//!   (`Aws2026`, `Aws2026Standard`) stay in retry-runtime, beside the `Verdict` they read.
//!
//! Each type is `const`-constructible, for a `static`; nothing here reads a clock (every
//! method takes the time) or allocates.
//!
//! # Why a crate of its own, not a feature of the runtime
//!
//! Issue 40 asked for a small runtime, with the overload modes "from a crate of their own or a
//! feature off by default (measure both, choose, say why)". Measured on 7 December 2026 (debug
//! build, `CARGO_INCREMENTAL=0`, 2 cores, the best of five rebuilds of the one crate):
//!
//! MEASUREMENTS
//!
//! The crate, because what a feature off by default would save a user who wants only the
//! attribute is small next to what it would cost everyone else: REASONS

#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[macro_use]
mod macros;

mod bounds;
mod concurrency;
mod gate;
mod quota;
mod random;
mod rate;
mod sync;
mod throttling;

#[cfg(test)]
mod tests;

use bounds::{at_least_one, clamp_or, clamp_u32};

pub use concurrency::{Aimd, Gradient2};
pub use gate::{
    AdmissionGate, GateMode, GateOutcome, GatePermit, GateState, RejectReason, Rejected,
};
pub use quota::{FailureKind, RetryQuota};
pub use rate::ClientRateLimit;
pub use throttling::AdaptiveThrottling;

/// For retry-runtime only: not part of this crate's API, and not covered by its version.
#[doc(hidden)]
pub mod __runtime {
    /// Makes `source`, a uniform draw in [0, 1), the source of adaptive throttling's draws (the
    /// first call wins): retry-runtime hands over its own when a `testing::record` begins, so
    /// that a recorded run draws from the recording's seeded generator.
    pub fn set_random_source(source: fn() -> f64) {
        crate::random::set_source(source);
    }
}

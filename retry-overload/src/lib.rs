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
//! Each type is `const`-constructible, for a `static`; nothing here reads a clock of its own
//! (every method takes the time from its caller) or allocates.
//!
//! # Why a crate of its own, not a feature of the runtime
//!
//! Issue 40 asked for a small runtime, with the overload modes "from a crate of their own or a
//! feature off by default (measure both, choose, say why)". Both were measured on 7 December 2026
//! on 2 shared cores (`CARGO_INCREMENTAL=0`, Rust 1.95): each crate rebuilt alone after a `touch`
//! of its `lib.rs`, CPU time (user) of `cargo build -p CRATE [--release]`, best of five, the
//! runtime before and after the split built in turn in the same rounds:
//!
//! | what is compiled | debug | release |
//! |---|---:|---:|
//! | `retry-runtime` with the overload code inside (before, c3655d8) | 0.87 s | 1.70 s |
//! | `retry-runtime` without it (after) | 0.74 s | 1.45 s |
//! | `retry-overload` alone | 0.20 s | 0.38 s |
//!
//! So a feature off by default would save a user who wants only the attribute about 0.13–0.20 s
//! of CPU in a debug build (0.25–0.38 s in release), 2 % of the 9–10 s of CPU the runtime adds
//! to a service from clean (the README's figure), and no waiting: from clean
//! (`cargo build -p retry-runtime --timings`, debug) this crate builds from 6.4 s to 7.2 s
//! beside syn (4.3 s to 10.6 s), the critical path, and the runtime starts at 11.2 s when the
//! macro is done, as it would without it.
//!
//! The crate, because that saving is small next to what the feature would cost everyone else:
//!
//! - The gate and `aws2026` are slots of every door (`#[retry(gate = ..., aws2026 = ...)]`,
//!   `retry_block!`, the `Retrier`, the engine's `Settings`, retry-http's `HttpRetry`). Behind a
//!   feature, each door's API, the macro's keys and their errors would differ by feature, every
//!   one of them tested both ways, and a library that names a gate would turn it on for every
//!   crate beside it anyway.
//! - The crate gives what the issue measures, the runtime's own size (8,506 lines of code before,
//!   7,280 after; this crate 1,387, as `python3 ../shared/tools/codelines.py --total DIR`
//!   counts them), without a `cfg` in the loop; the algorithms are tested alone
//!   (`cargo test -p retry-overload`) and usable without the attribute, and they cannot reach
//!   back into the loop: this crate depends on nothing of the runtime.
//!
//! What the crate costs: one more package beneath the runtime, 0.07 s more CPU in debug than
//! the same code inside it (0.74 + 0.20 against 0.87), and three items public only for the
//! runtime (`#[doc(hidden)]`: the loop's two calls into the gate, and the hand-over of the
//! random source of `testing::record`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[macro_use]
mod macros;

mod bounds;
mod concurrency;
#[cfg(feature = "serde")]
mod config;
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

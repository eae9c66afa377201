//! Fault injection for retry-runtime's doors, to rehearse a retry policy before an outage does:
//! errors of the call's own type and latencies injected by the loop before each attempt (the
//! attribute, `retry_block!`, the `Retrier`, every door on `retry_runtime::engine`), and
//! answers the doors read as the server's (an HTTP status with `Retry-After`, a gRPC status
//! with `grpc-retry-pushback-ms`) made up by a chaos layer under the door
//! (`tower::ChaosLayer`, `reqwest::ChaosMiddleware`, features `tower` and `reqwest`).
//!
//! A [`Site`] holds the faults of one call site, found by its name (the function's name for the
//! attribute, the `name` of a block, a `Retrier` or a door): its [`Rule`]s, each with an
//! injection rate and an attempt filter ([`Attempts`]), and a seed, printed as the site is
//! installed, so that a run can be replayed (`RETRY_CHAOS_SEED`). A switch turns every site off
//! or on at run time without a rebuild: the environment variable `RETRY_CHAOS=off|on`, read
//! again before every attempt, or [`switch`]; each site has its own
//! ([`Installed::disable`]). A request may ask for a fault on itself with a header
//! (`ABORT_HEADER`, with those features), only at a site that allowed it.
//!
//! Every injected fault is an [`Event::Injected`](retry_runtime::engine::Event::Injected): logged
//! at `INFO` (feature `tracing`), counted on `retry_door_events_total{event="injected_error"}`
//! (`injected_latency`, `injected_outcome`) with the runtime's `metrics` feature, so that a
//! dashboard tells injected failures from real ones, and handed to the door's sink (its
//! `Counters::injected`).
//!
//! An error fault needs the error type to say what an injected error is, as it says what a
//! timed-out attempt is: `impl From<Injected> for MyError`. The attribute and `retry_block!`
//! find that impl themselves; a `Retrier` is told with `.injectable()`, a door on the engine
//! with `DynHooks::injectable`. An error type without it gets latencies only.
//!
//! This crate turns on retry-runtime's `faults` feature, which compiles the injection point in:
//! without an installed site, each attempt reads one atomic, but the call that may follow
//! changes the code around it (`bench/RESULTS.md` §3 has the rows with the feature compiled in
//! and switched off, several times those without it). Depend on this crate in staging builds
//! only (the guide shows a feature of your own for it); without it, nothing is compiled in.
//!
//! The guide, "Rehearsing a policy in staging": `docs/guide.md` beside this crate's manifest.
//!
//! ```
//! use retry_chaos::{Attempts, Injected, Rule, Site};
//! use retry_runtime::{retry, Transient};
//! use std::time::Duration;
//!
//! #[derive(Debug, PartialEq)]
//! enum PayError { Unavailable, Declined }
//! impl Transient for PayError {
//!     fn is_transient(&self) -> bool { *self == PayError::Unavailable }
//! }
//! // What an injected error is, in this error type.
//! impl From<Injected> for PayError {
//!     fn from(_: Injected) -> Self { PayError::Unavailable }
//! }
//!
//! #[retry(max = 3, base = "100ms", jitter = none)]
//! async fn charge(cents: u32) -> Result<u32, PayError> {
//!     if cents == 0 { return Err(PayError::Declined) }
//!     Ok(cents)
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // The first two attempts of every call of `charge` fail, as if the service were down.
//! let site = Site::new("charge")
//!     .seed(7)
//!     .rule(Rule::error().attempts(Attempts::Only(1)))
//!     .rule(Rule::error().attempts(Attempts::Only(2)))
//!     .install();
//! let started = tokio::time::Instant::now();
//! assert_eq!(charge(500).await, Ok(500));
//! // Two retries, after 100 ms and 200 ms: the policy met the outage it was written for.
//! assert_eq!(started.elapsed(), Duration::from_millis(300));
//! assert_eq!(site.stats().errors, 2);
//!
//! // Switched off at run time: the next call runs as in production.
//! site.disable();
//! let started = tokio::time::Instant::now();
//! assert_eq!(charge(500).await, Ok(500));
//! assert_eq!(started.elapsed(), Duration::ZERO);
//! site.remove();
//! # }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(any(feature = "tower", feature = "reqwest"))]
mod answer;
mod registry;
mod site;

#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "tower")]
pub mod tower;

#[cfg(any(feature = "tower", feature = "reqwest"))]
pub use answer::{ABORT_HEADER, GRPC_ABORT_HEADER};
pub use registry::{ENV_SEED, ENV_SWITCH, Switch, enabled, switch};
pub use retry_runtime::faults::Injected;
pub use site::{Attempts, Installed, Kind, Rule, Site, Stats};

/// The guide, "Rehearsing a policy in staging", whose examples are tested as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/guide.md")]
struct GuideDoctests;

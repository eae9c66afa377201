//! The guides: each capability of `#[retry]` with its examples, which are compiled and run as
//! doctests. The arguments are in the table on [`retry`](crate::retry); the types each guide
//! names are documented where they are defined.
//!
//! | guide | what it covers |
//! |---|---|
//! | [`behaviour`] | what the attribute does to a function, its cost, the code it writes, durations, the jitter forms, the rules across arguments |
//! | [`transient`] | which errors are retried: `Transient`, `Verdict`, `Retry-After`, the classifiers for `std::io`, HTTP, reqwest, tonic, sqlx and tokio-postgres |
//! | [`keys`] | calls with a side effect: `#[non_idempotent]` and the idempotency key every attempt sends |
//! | [`attempts`] | control over each attempt: timeouts, hooks, logging, the attempt context, policies chosen at run time or named in configuration, other runtimes |
//! | [`protecting`] | protecting the service that is called: retry budget, circuit breaker, admission gate, one retrying layer, and which fits when |
//! | [`hedging`] | slow rather than failed calls: `hedge`, a copy of a slow attempt beside it, and what wins |
//! | [`fallback`] | what the caller gets after the last attempt |
//! | [`blocks`] | the same loop for a block (`retry_block!`), for a closure with a policy chosen at run time (`Retrier`), and for a loop that runs for hours (`reset_after`) |
//! | [`testing`] | tests that assert pauses and calls without waiting |
//! | [`doors`] | a door of your own (a client over a protocol of yours) on the engine's two seams: the decider and the sink |
//! | `configuration` | with the `serde` feature: policies, budgets, breakers, hedges and timeouts read from TOML, YAML, JSON or the environment with the attribute's keys and rules, and written back |
//! | `metrics` | with the `metrics` feature: the instruments the loop, the doors, breakers and budgets record, and every event once for every door |
//!
//! The same loop for every request of a client (a tower layer, a reqwest middleware: bodies, keys,
//! never-sent requests) is the crate `retry-http`, built on [`engine`](crate::engine), as an
//! integration of your own would be. The idempotency stores and the durable job queue are
//! documented in their own crate, `retry-durable` (`retry_durable::store`,
//! `retry_durable::queue`).

#[doc = include_str!("../docs/behaviour.md")]
pub mod behaviour {}

#[doc = include_str!("../docs/transient.md")]
pub mod transient {}

#[doc = include_str!("../docs/keys.md")]
pub mod keys {}

#[doc = include_str!("../docs/attempts.md")]
pub mod attempts {}

#[doc = include_str!("../docs/protecting.md")]
pub mod protecting {}

#[doc = include_str!("../docs/hedging.md")]
pub mod hedging {}

#[doc = include_str!("../docs/fallback.md")]
pub mod fallback {}

#[doc = include_str!("../docs/testing.md")]
pub mod testing {}

#[doc = include_str!("../docs/blocks.md")]
pub mod blocks {}

#[doc = include_str!("../docs/doors.md")]
pub mod doors {}

#[cfg(feature = "serde")]
#[doc = include_str!("../docs/configuration.md")]
pub mod configuration {}

#[cfg(feature = "metrics")]
#[doc = include_str!("../docs/metrics.md")]
pub mod metrics {}

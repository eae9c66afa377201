//! Retry with backoff and jitter, written as an attribute on the function that may fail.
//!
//! ```
//! use retry_runtime::{retry, Transient};
//!
//! #[derive(Debug, PartialEq)]
//! enum ContractError {
//!     Overloaded,
//!     InvalidClaim,
//! }
//!
//! fn is_transient(error: &ContractError) -> bool {
//!     matches!(error, ContractError::Overloaded)
//! }
//!
//! # let mut answers = vec![Ok("covered"), Err(ContractError::Overloaded)];
//! // Up to 3 retries, pauses of about 1 ms, 2 ms and 4 ms plus up to half of each at random.
//! #[retry(max = 3, base = "1ms", jitter, on = is_transient)]
//! fn check_coverage(answers: &mut Vec<Result<&'static str, ContractError>>) -> Result<&'static str, ContractError> {
//!     answers.pop().unwrap_or(Err(ContractError::InvalidClaim))
//! }
//!
//! assert_eq!(check_coverage(&mut answers), Ok("covered")); // failed once, then answered
//! ```
//!
//! # When to retry, and when not
//!
//! - **Only passing, technical errors.** An overloaded service, a dropped connection, a timeout.
//!   A business answer ("not covered") is a valid result and belongs in `Ok`; invalid input or a
//!   missing permission will not change by waiting. Say which errors are passing with
//!   `on = predicate` or by implementing [`Transient`] for the error type.
//! - **Growing, randomised pauses.** Without jitter, thousands of callers that failed together
//!   come back together, at about 1, 3 and 7 s after the outage began. The default adds up to
//!   half of each pause at random; see [`Jitter`] for the other forms.
//! - **State-changing calls only with an idempotency key.** A payout whose response was lost
//!   looks like a failure; a retry without a key pays twice. Mark such functions
//!   `#[non_idempotent]` and `#[retry]` refuses to compile them without an [`IdempotencyKey`]
//!   parameter. The receiving service's side, which executes once per key and answers a
//!   repeat with the stored response, is the module `store` (feature `idempotency-store`).
//! - **One retrying layer.** A portal retrying 4 times a service that tries its database 3 times
//!   makes 12 database calls out of one request. Retry where the decision is made, not in every
//!   layer.
//! - **Not through a long outage.** Longer waits do not help a service that is down: fail fast
//!   with a circuit breaker, or put the work in a queue.
//!
//! # The attribute's arguments
//!
//! All optional, in any order, each at most once; every value is checked at compile time.
//!
//! | key | value | meaning | default |
//! |---|---|---|---|
//! | `max` | integer ≥ 0 | retries after the first call: `max = 3` means at most 4 calls | 3 |
//! | `attempts` | integer ≥ 1 | the same limit counted as total calls (`attempts = 4` ≡ `max = 3`) | — |
//! | `base` | duration string | the pause before the first retry | `"1s"` |
//! | `factor` | number ≥ 1 | growth of the pause per retry (exponential only) | 2 |
//! | `backoff` | `exponential`, `linear`, `constant` | pause n: `base·factor^(n−1)`, `base·n`, `base` | `exponential` |
//! | `max_delay` | duration string | no single pause is longer, jitter included | `"30s"`, or `base` if longer |
//! | `deadline` | duration string | total time budget from the first call; a pause that would end past it is not taken | none |
//! | `jitter` | `jitter`, a number in (0, 1], a duration string, `full`, `equal`, `decorrelated`, `none` | see [`Jitter`] | `jitter` (`d + U[0, d/2)`) |
//! | `on` | an expression callable as `Fn(&E) -> bool` | which errors are worth retrying | [`Transient`] |
//!
//! Duration strings are an unsigned decimal number and a unit: `ns`, `us`, `µs`, `ms`, `s`, `m`
//! or `h` (`"250ms"`, `"1.5s"`, `"2m"`).
//!
//! # What the attribute does to a function
//!
//! It keeps the signature and rewrites only the body into a loop: each attempt runs the body,
//! an `Ok` or a non-transient `Err` is returned at once, a transient `Err` pauses and runs the
//! body again until the retries or the deadline run out, and then the last `Err` is returned
//! unchanged. `?` and `return` in the body end the attempt, not the function. Each attempt
//! borrows the parameters, so a retry clones nothing; a body that consumes an owned parameter
//! does not compile (clone it inside the body, or take a reference).
//!
//! Sync functions pause with [`std::thread::sleep`]; async functions with tokio's timer
//! (feature `tokio`, on by default), so `tokio::time::pause()` makes tests instant. When the
//! first attempt succeeds the loop allocates nothing and reads no clock (unless `deadline` is
//! set).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod breaker;
mod budget;
mod context;
mod duration;
mod key;
mod policy;
mod random;
mod state;
#[cfg(feature = "idempotency-store")]
pub mod store;
pub mod testing;
mod timer;
mod transient;

#[doc(hidden)]
pub mod __private;

pub use breaker::{Admission, BreakerState, CircuitBreaker, CircuitOpen};
pub use budget::RetryBudget;
pub use context::{Attempt, attempt, scope};
pub use key::IdempotencyKey;
pub use policy::{Backoff, Jitter, Policy, PolicyError};
pub use state::RetryEvent;
pub use timer::Elapsed;
pub use transient::{Transient, Verdict};

pub use retry_macro::{non_idempotent, retry};

//! Retry with backoff and jitter, written as an attribute on the function that may fail.
//!
//! ```
//! use retry_runtime::retry;
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
//! The arguments, the rules and the code the attribute writes are documented on [`retry`].
//!
//! # When to retry
//!
//! Retry only **technical, passing** failures: an overloaded service, a dropped connection, a
//! timeout. Say which errors those are with `on = predicate`, or once for the error type with
//! [`Transient`]. Everything else is returned at once.
//!
//! ```
//! use retry_runtime::{retry, testing, Transient};
//!
//! #[derive(Debug, PartialEq)]
//! enum ContractError {
//!     Overloaded,     // passing: worth another try
//!     InvalidClaim,   // will not change by waiting
//!     Forbidden,      // will not change by waiting
//! }
//!
//! impl Transient for ContractError {
//!     fn is_transient(&self) -> bool {
//!         matches!(self, ContractError::Overloaded)
//!     }
//! }
//!
//! #[retry(max = 3, base = "1s")]
//! fn check(answer: &dyn Fn() -> Result<bool, ContractError>) -> Result<bool, ContractError> {
//!     answer()
//! }
//!
//! // Overloaded throughout: three pauses, then the last error.
//! let (result, pauses) = testing::record(|| check(&|| Err(ContractError::Overloaded)));
//! assert_eq!((result, pauses.len()), (Err(ContractError::Overloaded), 3));
//!
//! // Invalid input: returned at once, no pause.
//! let (result, pauses) = testing::record(|| check(&|| Err(ContractError::InvalidClaim)));
//! assert_eq!((result, pauses.len()), (Err(ContractError::InvalidClaim), 0));
//! ```
//!
//! # A business answer is not an error
//!
//! "Not covered" is a valid answer to "is claim 4711 covered?": return it in `Ok`, and it is never
//! retried. Then the caller can tell the two outcomes apart, and never says "not covered" when the
//! question could not be answered:
//!
//! ```
//! # use retry_runtime::{retry, testing, Transient};
//! # #[derive(Debug)] struct Overloaded;
//! # impl Transient for Overloaded { fn is_transient(&self) -> bool { true } }
//! #[derive(Debug, PartialEq)]
//! enum Coverage {
//!     Covered,
//!     NotCovered,
//! }
//!
//! #[retry(max = 3, base = "1s")]
//! fn check_coverage(service_up: bool) -> Result<Coverage, Overloaded> {
//!     if service_up { Ok(Coverage::NotCovered) } else { Err(Overloaded) }
//! }
//!
//! fn tell_customer(result: Result<Coverage, Overloaded>) -> &'static str {
//!     match result {
//!         Ok(Coverage::Covered) => "Your claim is covered.",
//!         Ok(Coverage::NotCovered) => "Your policy does not cover this claim.",
//!         Err(_) => "The coverage check is not possible right now; your details are saved.",
//!     }
//! }
//!
//! let (down, _) = testing::record(|| check_coverage(false));
//! assert_eq!(tell_customer(down), "The coverage check is not possible right now; your details are saved.");
//! let (up, pauses) = testing::record(|| check_coverage(true));
//! assert_eq!((tell_customer(up), pauses.len()), ("Your policy does not cover this claim.", 0));
//! ```
//!
//! # Pauses that grow, with jitter
//!
//! Without jitter, thousands of callers that failed together come back together, at about 1, 3
//! and 7 s after the outage began, and knock the service over again. The default pause is
//! exponential (`base·2^(n−1)`) plus up to half of it at random; see [`Jitter`] for the other
//! forms and [`Policy`] for the arithmetic.
//!
//! # Calls with a side effect: only with an idempotency key
//!
//! A payout whose response was lost looks like a failure to the caller; a retry without a key
//! pays twice. Mark such functions `#[non_idempotent]`: `#[retry]` then refuses to compile them
//! unless they take an [`IdempotencyKey`], which the caller creates once and every attempt sends,
//! so the receiver recognises the repeat (or a parameter that already identifies the operation,
//! such as an order number, marked `#[idempotency_key]`). The receiving service's side, which
//! executes once per key and answers a repeat with the stored response, is the crate
//! `retry-durable` (`retry_durable::store`): keys in memory, in a SQLite file or in PostgreSQL,
//! where the service's own writes and the key's completion commit in one transaction.
//!
//! ```
//! use retry_runtime::{non_idempotent, retry, IdempotencyKey};
//! use std::collections::HashMap;
//! use std::io;
//!
//! struct PaymentService {
//!     receipts: HashMap<String, u32>, // by idempotency key
//!     payouts: u32,
//!     lose_next_response: bool,
//! }
//!
//! #[non_idempotent]
//! #[retry(max = 2, base = "1ms", jitter = full)]
//! fn pay_out(service: &mut PaymentService, key: &IdempotencyKey) -> io::Result<u32> {
//!     let receipt = match service.receipts.get(key.as_str()) {
//!         Some(receipt) => *receipt, // a repeat: answer again, pay nothing
//!         None => {
//!             service.payouts += 1;
//!             service.receipts.insert(key.to_string(), service.payouts);
//!             service.payouts
//!         }
//!     };
//!     if std::mem::take(&mut service.lose_next_response) {
//!         return Err(io::ErrorKind::ConnectionReset.into()); // paid, but the answer is lost
//!     }
//!     Ok(receipt)
//! }
//!
//! let mut service = PaymentService { receipts: HashMap::new(), payouts: 0, lose_next_response: true };
//! let key = IdempotencyKey::new();
//! assert_eq!(pay_out(&mut service, &key).unwrap(), 1);
//! assert_eq!(service.payouts, 1); // retried, paid once
//! ```
//!
//! # One retrying layer
//!
//! A portal that retries 4 times a service that tries its database 3 times makes 12 database
//! calls out of one request. An annotated function called inside another that is retrying makes
//! a single attempt and leaves the retrying to the outer one (`nested = retry` to opt out); a
//! service whose caller retries uses [`scope::caller_retries`].
//!
//! ```
//! use retry_runtime::retry;
//! use std::cell::Cell;
//! use std::io;
//!
//! #[retry(max = 2, base = "1ms", jitter = none)]
//! fn query_database(calls: &Cell<u32>) -> io::Result<()> {
//!     calls.set(calls.get() + 1);
//!     Err(io::ErrorKind::TimedOut.into())
//! }
//!
//! #[retry(max = 3, base = "1ms", jitter = none)]
//! fn handle_request(calls: &Cell<u32>) -> io::Result<()> {
//!     query_database(calls)
//! }
//!
//! let calls = Cell::new(0);
//! assert!(handle_request(&calls).is_err());
//! assert_eq!(calls.get(), 4); // not 4 × 3 = 12
//! ```
//!
//! # Long outages: a circuit breaker, not longer waits
//!
//! Longer pauses do not help a service that is down; they only keep the customer waiting. A
//! [`CircuitBreaker`] fails at once for a while after repeated failures, and a [`RetryBudget`]
//! bounds retries to a share of the traffic, so retries cannot keep a struggling service down.
//!
//! ```
//! use retry_runtime::{retry, CircuitBreaker, CircuitOpen};
//! use std::time::Duration;
//!
//! #[derive(Debug, PartialEq)]
//! enum ContractError {
//!     Overloaded,
//!     Unavailable(CircuitOpen),
//! }
//!
//! impl From<CircuitOpen> for ContractError {
//!     fn from(open: CircuitOpen) -> Self {
//!         ContractError::Unavailable(open)
//!     }
//! }
//!
//! static CONTRACT_BREAKER: CircuitBreaker =
//!     CircuitBreaker::new().consecutive_failures(2).open_for(Duration::from_secs(30));
//!
//! #[retry(max = 1, base = "1ms", on = |e| *e == ContractError::Overloaded, breaker = CONTRACT_BREAKER)]
//! fn check_coverage() -> Result<(), ContractError> {
//!     Err(ContractError::Overloaded)
//! }
//!
//! assert_eq!(check_coverage(), Err(ContractError::Overloaded)); // two failures: the circuit opens
//! assert!(matches!(check_coverage(), Err(ContractError::Unavailable(_)))); // at once, no call
//! ```
//!
//! # Fallback: after the last attempt
//!
//! `fallback = f` decides what the caller gets once the loop gives up: `f(last_error, why)` is
//! called, with a [`GiveUp`] that says why (retries used up, the deadline, a server's pause beyond
//! `max_delay`, the budget empty, the breaker open), and its result is the function's. With
//! `on_result`, whose rejected `Ok` can end the loop too, it takes the outcome instead of the
//! error: `f(last_outcome, why)`, an `Ok` that `on_result` rejected as well. It is not called for
//! an accepted `Ok`, for a permanent error (an answer the caller must see), when the future is
//! dropped, or in a nested function that makes a single attempt. The expression is evaluated
//! inside the function, so a closure can use the parameters; in an `async fn` it may be async.
//!
//! ```
//! use retry_runtime::{retry, testing, GiveUp, GiveUpReason};
//! use std::io;
//!
//! /// Keeps the claim for later and tells the customer so.
//! fn save_for_later(saved: &mut Vec<u32>, claim: u32, why: GiveUp) -> io::Result<&'static str> {
//!     assert_eq!(why.reason, GiveUpReason::Exhausted);
//!     saved.push(claim);
//!     Ok("your details are saved")
//! }
//!
//! #[retry(max = 2, base = "1s", fallback = |_error, why| save_for_later(saved, claim, why))]
//! fn check_coverage(claim: u32, saved: &mut Vec<u32>) -> io::Result<&'static str> {
//!     Err(io::ErrorKind::ConnectionReset.into())
//! }
//!
//! let mut saved = Vec::new();
//! let (answer, _) = testing::record(|| check_coverage(4711, &mut saved));
//! assert_eq!(answer.unwrap(), "your details are saved");
//! assert_eq!(saved, [4711]);
//! ```
//!
//! With `on_result`, the fallback hears the rejected `Ok` too:
//!
//! ```
//! use retry_runtime::{retry, testing, GiveUp};
//! use std::io;
//!
//! /// A server that keeps answering 429; the page is served from the cache instead.
//! #[retry(max = 2, base = "1s", on_result = |status: &u16| *status == 429,
//!         fallback = |outcome: io::Result<u16>, why: GiveUp| {
//!             assert_eq!((outcome.ok(), why.attempts), (Some(429), 3));
//!             Ok(200)
//!         })]
//! fn get_page() -> io::Result<u16> {
//!     Ok(429)
//! }
//!
//! let (status, pauses) = testing::record(get_page);
//! assert_eq!((status.unwrap(), pauses.len()), (200, 2));
//! ```
//!
//! # Logging
//!
//! With the `tracing` feature (on by default), each failed attempt that will be retried is an
//! `INFO` event with the function's name, the attempt, the pause and the error. A call that fails
//! after at least one retry ends with exactly one more event, whatever ended it (the limit, the
//! deadline, a permanent error, the breaker, the budget), at `ERROR` or the level
//! `log_level = "warn"` names; so does a call the loop gives up on at its first attempt. A
//! permanent error on the first call, and a call that succeeds, log nothing. The error is shown
//! with `Debug`, or by its type name when it has none: the attribute adds no `Debug` bound, not
//! even to a generic error type. For your own reporting, `notify = f` hears every pause and
//! `on_give_up = f` the give-up, each the error or, in their outcome forms, an `Ok` that
//! `on_result` rejected as well.
//!
//! With the `attempt-spans` feature as well, a call that retries is one span, `retry`, with one
//! child span per attempt, `attempt`, as gRPC's tracing shows a call and its attempts: each
//! carries `attempt` (1 for the first), `resend_count` (0 for the first, as OpenTelemetry's
//! `http.request.resend_count`) and the `pause` before it, and the body runs inside it, so that
//! its own events and spans (an HTTP client's, a database driver's) nest under the attempt that
//! made them. The events above stay as they are.
//!
//! # Features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `tokio` | on | async functions pause with tokio's timer and read tokio's clock |
//! | `tracing` | on | an `INFO` event per retried failure and one final event (`ERROR` by default) for a call that failed after retrying; errors without `Debug` are shown by their type name |
//! | `http` | off | in `integrations::http`, a classifier for `http::StatusCode` and `http::Response`, with `Retry-After` (the header's parser is there without the feature) |
//! | `reqwest` | off | `Transient for reqwest::Error` |
//! | `hyper` | off | `integrations::http::connection_broke` also sees a connection that broke under a hyper client (`hyper::Error`), the rule `retry-http`'s doors use; on with `reqwest` |
//! | `tonic` | off | `Transient for tonic::Status`, with `grpc-retry-pushback-ms` |
//! | `sqlx` | off | `Transient for sqlx::Error`, by SQLSTATE, SQLite result code and kind |
//! | `tokio-postgres` | off | `Transient for tokio_postgres::Error`: SQLSTATE, closed connection, I/O cause |
//! | `attempt-spans` | off | with `tracing`: one span per call (`retry`, with `function`) and one child span per attempt (`attempt`, with `function`, `attempt` from 1, `resend_count` from 0 as OpenTelemetry's `http.request.resend_count`, and the `pause` before it), entered around the attempt's body (on every poll of an async one); off by default, because every call would then carry and make its spans |
//! | `metrics` | off | calls by outcome, retries, attempts, pauses, breaker states and budget tokens through the `metrics` facade, for any recorder (Prometheus, OpenTelemetry, ...): the table is in `guide::metrics` |
//! | `serde` | off | `Deserialize` and `Serialize` for `Policy`, `RetryBudget`, `CircuitBreaker`, `Hedge`, a per-attempt `config::Timeout` and `AdmissionGate`: the attribute's keys, units and rules, read by its grammar from TOML, YAML, JSON or environment variables, and written back: the guide is `guide::configuration` |
//! | `faults` | off | fault injection's one point in the loop ([`faults`]): before each attempt of every door, an installed injector (the crate `retry-chaos`, which turns this on) may fail it with an error of the call's type (`E: From<faults::Injected>`) or add a latency inside its timeout; for staging builds: compiled in, it costs the happy path several times its instructions even with no injector (`bench/RESULTS.md` §3) |
//!
//! The crate builds on Rust 1.85 (its `rust-version`), with every feature but the one that
//! builds on sqlx 0.9, which needs Rust 1.94: `sqlx`. The idempotency stores and the durable job
//! queue, which run queries, are the crate `retry-durable`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[macro_use]
mod macros;

mod bounds;
mod breaker;
mod budget;
#[cfg(feature = "serde")]
pub mod config;
mod context;
#[cfg(test)]
mod doc_tables;
pub mod engine;
pub mod faults;
pub mod guide;
mod hedge;
pub mod hooks;
mod key;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod named;
mod overload;
mod policy;
mod random;
mod retrier;
mod state;
mod sync;
pub mod testing;
mod timer;
mod transient;

pub mod headers;
pub mod integrations;

#[doc(hidden)]
pub mod __private;

/// The examples of the registry page (`README.md` beside this crate's manifest) compile.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub use breaker::{Admission, BreakerState, CircuitBreaker, CircuitOpen};
pub use budget::RetryBudget;
pub use context::{Attempt, attempt, scope};
pub use hedge::Hedge;
pub use key::IdempotencyKey;
// The overload items of the next three re-exports are the crate retry-overload's, except
// `Aws2026`, `Aws2026Decision` and `Aws2026Standard`, which read this crate's `Verdict` and are
// this crate's own (`overload/aws2026.rs`).
/// In this crate, every door asks the gate before each attempt when it names one:
/// `#[retry(gate = G)]`, `retry_block!`, the [`Retrier`]'s [`gate`](Retrier::gate) and the
/// engine's [`DynHooks::gate`](engine::DynHooks::gate). It is shared like a [`RetryBudget`], and
/// its rejection ([`Rejected`]) is carried by the call's error type like a [`CircuitOpen`].
/// Inside [`testing::record`] adaptive throttling draws from the recording's seeded generator,
/// the source of the loop's jitter. (The gate is the crate retry-overload's; its docs follow.)
pub use overload::AdmissionGate;
/// An attempt shed by a gate that a door of this crate names: the loop gives up with it
/// ([`GiveUpReason::GateRejected`]), through the call's error type (`From<Rejected>`), like a
/// [`CircuitOpen`]. (From the crate retry-overload; its docs follow.)
pub use overload::Rejected;
pub use overload::{
    AdaptiveThrottling, Aimd, Aws2026, Aws2026Decision, Aws2026Standard, ClientRateLimit,
    FailureKind, GateMode, GateOutcome, GatePermit, GateState, Gradient2, RejectReason, RetryQuota,
};
pub use policy::{Backoff, Jitter, Policy, PolicyError};
pub use retrier::Retrier;
pub use state::{GiveUp, GiveUpReason, LogLevel, RetryEvent};

/// The levels of [`Retrier::log_level`], as `log_level = "warn"` names them in the attribute.
pub use state::level;
#[cfg(feature = "tokio")]
pub use timer::TokioTimer;
pub use timer::{Elapsed, Sleeper};
pub use transient::{Transient, Verdict, has_transient_io_cause};

/// Turns a function that returns `Result` into a retry loop with backoff and jitter.
///
/// ```
/// use retry_runtime::retry;
/// use std::io;
///
/// #[retry(max = 2, base = "50ms")]
/// fn read_tariffs(path: &std::path::Path) -> io::Result<String> {
///     std::fs::read_to_string(path)
/// }
///
/// // NotFound is not transient (see `Transient for io::Error`): returned after one call.
/// assert!(read_tariffs("no/such/file".as_ref()).is_err());
/// ```
///
/// # Arguments
///
/// All optional, in any order, each at most once. Values are checked when the macro expands: a
/// bad value is a compile error pointing at it.
///
/// | key | value | meaning | default |
/// |---|---|---|---|
/// | `max` | integer ≥ 0 | retries after the first call: `max = 3` means at most 4 calls, pauses ≈ 1 s, 2 s, 4 s with `base = "1s"` | 3 |
/// | `attempts` | integer ≥ 1 | the same limit counted as total calls (`attempts = 4` ≡ `max = 3`); giving both is an error | — |
/// | `base` | duration string | the pause before the first retry | `"1s"` |
/// | `factor` | number ≥ 1 | growth of the pause per retry (exponential only) | 2 |
/// | `backoff` | `exponential`, `linear`, `constant` | pause n (n = 1, 2, …): `base·factor^(n−1)`, `base·n`, `base` | `exponential` |
/// | `max_delay` | duration string | no single pause is ever longer, jitter and server-suggested pauses included (cap applied last) | `"30s"`, or `base` if that is longer |
/// | `throttle_base` | duration string | the pause before a retry after a throttled attempt (`Verdict::Throttled`: a 429, a 503 with `Retry-After`, `RESOURCE_EXHAUSTED`), growing from there as `base` does | `base` |
/// | `deadline` | duration string | total time budget from the first call, calls and pauses included, on the clock of the pauses: tokio's for async functions (so a paused test clock governs both), `std::time::Instant` for sync ones and for `sleep = f`, a [`Sleeper`] type's own; a pause that would end past it is not taken and the loop gives up with the last error at once | none |
/// | `jitter` | bare `jitter`, a number in (0, 1], a duration string, `full`, `equal`, `decorrelated`, `none` | randomises each pause; the forms are in the [`Jitter`] table | bare `jitter` (`d + U[0, d/2)`) |
/// | `policy` | a name, `"contract-service"` (ASCII letters, digits, `-`, `_`, `.`); or an expression giving a [`Policy`] or `&Policy` | a name: the policy of that name in the process's registry (`retry_runtime::named`), looked up once per call and kept for all its attempts; the timing keys written beside it are the default when the name is not there; the name's budget replaces a written `budget`, and its breaker a written `breaker` (without one, which shows that `E` can carry a [`CircuitOpen`], the name's breaker is not used). An expression: timings chosen at run time (a `const`, or a string from configuration read with `Policy::from_str`), which excludes the timing keys above | — |
/// | `on` | an expression callable as `Fn(&E) -> bool` or `Fn(&E) -> Verdict` | which errors are worth retrying; everything else is returned at once | the error type's [`Transient`] impl |
/// | `on_result` | `Fn(&T) -> bool` or `Fn(&T) -> Verdict` | an `Ok` value it marks (`true`, or a [`Verdict`] that retries) is a transient failure, an HTTP 503 that arrives as `Ok(response)`; `RetryAfter` is honoured as for errors; when the loop gives up the last `Ok` is returned, or handed to `fallback` | — |
/// | `timeout` | duration string > 0, `async fn` only | each attempt is cut off after this long (clipped to the time left before `deadline`) and counts as a transient failure; needs `E: From<retry_runtime::Elapsed>` | — |
/// | `notify` | `Fn(&E, &RetryEvent)` or `Fn(Result<&T, &E>, &RetryEvent)`; in an async function also async | called before each pause with the error (or, in the second form, the outcome, which also carries an `Ok` that `on_result` rejected), the attempt number, the real pause (jitter included) and the time since the first call; an async hook is awaited before the pause, its time taken out of the pause and bounded by the deadline | — |
/// | `on_give_up` | `Fn(&E)`, `Fn(&E, &GiveUp)` or `Fn(Result<&T, &E>, &GiveUp)`; in an async function also async | called once when the loop gives up on a failure it could have retried (retries used up, deadline, a server-suggested pause too long, the budget empty, the breaker open), with the last error (or outcome) and, in the two-argument forms, why, the attempts and the time spent; an async hook is awaited before the fallback and the return | — |
/// | `sleep` | `Fn(Duration) -> impl Future<Output = ()>` or a [`Sleeper`] type, `async fn` only | pause with another runtime's timer; the deadline is then measured on its clock (`Sleeper::now`; `std::time::Instant` for a function) | tokio's |
/// | `budget` | a [`RetryBudget`] (usually a `static`) | retries draw from a shared token bucket; when it is empty the loop gives up with the current error at once | — |
/// | `breaker` | a [`CircuitBreaker`] (usually a `static`) | while open, the function returns `E::from(CircuitOpen)` at once without calling the body; a failure after which it is open ends the loop at once with that failure, without a pause; needs `E: From<retry_runtime::CircuitOpen>` | — |
/// | `gate` | an `AdmissionGate` (usually a `static`) | asked before every attempt, the first included: while it sheds load (adaptive throttling, a CUBIC rate limit, an AIMD or Gradient2 concurrency limit), the function returns `E::from(Rejected)` at once without calling the body, and a `fallback` hears `GiveUpReason::GateRejected`; every attempt reports its answer to it (a throttling verdict as shed load); needs `E: From<retry_runtime::Rejected>` | — |
/// | `aws2026` | an `Aws2026Standard` (usually a `static`) | the AWS SDKs' updated standard retry mode decides after each failure, in place of `max` and the pauses: at most 3 attempts, a retry quota of 500 tokens shared by every call that names it (14 a retry, 5 after a throttling verdict; a success gives back the last retry's cost), pauses of `random × min(base × 2^(n−1), 20 s)` from 50 ms, or 1 s after a throttling verdict, a server's pause held to [computed, computed + 5 s] | — |
/// | `nested` | `retry` or `single` | inside another annotated function that retries: retry here too, or make one attempt | `single` |
/// | `fallback` | `FnOnce(E, GiveUp) -> Result<T, E>`; with `on_result`, `FnOnce(Result<T, E>, GiveUp) -> Result<T, E>`; in an `async fn` also async | called once when the loop gives up, with why (a [`GiveUp`]) and the last error, or with `on_result` the last outcome (an `Ok` it rejected as well); what it returns is the function's result. Not called for an accepted `Ok`, a permanent error, a dropped future, or under a layer that retries | — |
/// | `log_level` | `error`, `warn`, `info`, `debug` or `trace` | with the `tracing` feature, the level of the one event logged when a call fails after retrying or the loop gives up | `"error"` |
/// | `hedge` | duration string > 0, or a percentile of the observed latency: `"p95"`, `"p99.9"`, `async fn` only | an attempt that has not answered after this long gets a copy running beside it (a hedge), and the first acceptable answer wins (an `Ok`, or an error not worth retrying) while the others are dropped; `"p95"` waits for the 95th percentile of this function's observed latency; each hedge withdraws a token from `budget` and asks `breaker`; only for a body that may run twice at once (no `&mut` parameter; a `#[non_idempotent]` function sends its key on every copy) | — |
/// | `max_hedges` | integer ≥ 1, `async fn` only | with `hedge`, the most copies started beside each attempt, one per delay | 1 |
/// | `crate` | a path | where the runtime is, for a renamed dependency (`rt = { package = "retry-runtime", ... }`, then `crate = rt`) or one re-exported by another crate; every generated path goes through it | `::retry_runtime` |
///
/// Duration strings are an unsigned decimal number and a unit: `ns`, `us`, `µs`, `ms`, `s`, `m`
/// or `h` (`"250ms"`, `"1.5s"`, `"2m"`), exact to the nanosecond: a finer value (`"1.5ns"`) is
/// refused rather than rounded.
///
/// Each of these is a compile error pointing at the offending token, and
/// [`Policy::from_str`](std::str::FromStr) refuses the same in a policy string:
///
/// | refused | the error points at |
/// |---|---|
/// | `max` with `attempts` | `attempts` |
/// | `max_delay` below `base` | `max_delay`'s value |
/// | `deadline` below `base` when `max > 0` | `deadline`'s value |
/// | `factor` with `backoff = linear` or `backoff = constant` | `factor` |
/// | `policy` given as an expression, with a timing key (`max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`); beside a name they are the default | the timing key |
/// | `timeout`, `sleep`, `hedge` or `max_hedges` on a sync function | the key |
/// | `max_hedges` without `hedge` | `max_hedges` |
/// | a value its key does not take: `factor` below 1, a jitter number outside (0, 1], `timeout = "0s"`, a duration finer than a nanosecond, a string where a number belongs | the value |
/// | an unknown key (the message lists the valid keys and suggests the closest, or the one that does that job: `retries` → `max`) | the key |
/// | a repeated key | the second one |
///
/// # A policy by name
///
/// `policy = "contract-service"` names a policy looked up at run time in the process's registry
/// ([`named`]), once per call, and held for all the call's attempts; the timing keys written
/// beside it, checked at compile time, are the policy when the name is not there (no resolver
/// installed, or an unknown name). The name's budget replaces a `budget` written beside it; its
/// breaker replaces a written `breaker`, and is used only with one, which shows that `E` can
/// carry a [`CircuitOpen`]. The guide: [`guide::attempts`], "Policies by name".
///
/// ```
/// use retry_runtime::{retry, testing};
/// use std::io;
///
/// // No resolver is installed here: one retry after 1 s, as written.
/// #[retry(policy = "contract-service", max = 1, base = "1s")]
/// fn check_coverage() -> io::Result<bool> {
///     Err(io::ErrorKind::TimedOut.into())
/// }
///
/// let (_, pauses) = testing::record(check_coverage);
/// assert_eq!(pauses.len(), 1);
/// ```
///
/// # Semantics
///
/// It keeps the signature and rewrites only the body: each attempt runs the body; `Ok` and a
/// non-transient `Err` are returned at once; a transient `Err` pauses and runs the body again
/// until the loop gives up (the retries or the deadline run out, a server's pause beyond
/// `max_delay`, the budget empty, the breaker open), and then the last `Err` (or with
/// `on_result` the last rejected `Ok`) is returned unchanged, or what `fallback` makes of it. `?`
/// and `return` in the body end the attempt, not the function. Each attempt borrows the
/// parameters, so a retry clones nothing; a body that consumes an owned parameter does not
/// compile (clone it at the top of the body, or take a reference). Sync functions pause with
/// [`std::thread::sleep`], async functions with tokio's timer; dropping the future during a pause
/// stops it. When the first call succeeds nothing is allocated, and no clock is read unless
/// `deadline` is set (read once, as the call starts), or a hook that hears the time (`notify`,
/// `fallback`, or `on_give_up` taking a [`GiveUp`]: read once, as the first attempt starts), or
/// `breaker` (as each attempt starts and ends); `timeout` with a `deadline` reads it again as
/// each attempt starts, to clip it. The clock is the one of the pauses ([`Sleeper::now`]).
///
/// Return types: `Result<T, E>`, or any path whose last segment ends in `Result` (`io::Result<T>`,
/// an alias). `const fn`, `extern "C" fn` and other return types are compile errors.
///
/// # What it writes
///
/// ```text
/// #[retry(max = 3, base = "1s", jitter, on = is_transient)]
/// async fn check_coverage(client: &ContractClient, claim: &Claim) -> Result<Coverage, ContractError> {
///     client.coverage(claim).await
/// }
/// ```
///
/// becomes (as `cargo expand` prints it)
///
/// ```text
/// async fn check_coverage(client: &ContractClient, claim: &Claim) -> Result<Coverage, ContractError> {
///     use ::retry_runtime::__private as __retry_rt;
///     const __RETRY_POLICY: __retry_rt::Policy = __retry_rt::Policy::new()
///         .max(3)
///         .base(__retry_rt::Duration::from_secs(1))
///         .jitter(__retry_rt::Jitter::Proportional(0.5));
///     let mut __retry = __retry_rt::Shape::<Result<Coverage, ContractError>>::new()
///         .start(&__RETRY_POLICY, "check_coverage", is_transient, __retry_rt::ASYNC);
///     loop {
///         let __retry_outcome = __retry
///             .run(async {
///                 if false {
///                     return __retry_rt::output_type::<Result<Coverage, ContractError>>();
///                 }
///                 { client.coverage(claim).await }
///             })
///             .await;
///         #[allow(unreachable_code)]
///         {
///             __retry = match __retry.next(__retry_outcome) {
///                 __retry_rt::ControlFlow::Break(__retry_result) => return __retry_result,
///                 __retry_rt::ControlFlow::Continue(__retry_next) => __retry_next,
///             };
///             __retry.pause().await;
///         }
///     }
/// }
/// ```
#[doc(inline)]
pub use retry_macro::retry;

/// Retries a block, sync or async, with the attribute's arguments: the block borrows its
/// surroundings, and runs the same loop as [`retry`].
///
/// ```
/// use retry_runtime::retry_block;
/// use std::io;
///
/// fn is_transient(error: &io::Error) -> bool {
///     error.kind() == io::ErrorKind::Interrupted
/// }
///
/// let mut answers = vec![Ok("tariffs"), Err(io::Error::from(io::ErrorKind::Interrupted))];
/// let tariffs = retry_block!(max = 3, base = "1ms", on = is_transient => {
///     answers.pop().unwrap_or_else(|| Err(io::ErrorKind::NotFound.into()))
/// });
/// assert_eq!(tariffs.unwrap(), "tariffs"); // failed once, then answered
/// assert!(answers.is_empty());
/// ```
///
/// An async block is written `async { ... }` and the whole is awaited:
/// `retry_block!(max = 3, on = is_transient => async { client.coverage(&claim).await }).await`.
/// The arguments, their values and the rules across them are those of [`retry`], checked when
/// the macro expands, with the same messages; a block also takes `non_idempotent` (it then
/// needs `key = ...`, the idempotency key every attempt sends, or it does not compile) and
/// `key = value`, and `name = "..."`, its name in the events and the metrics' `function` label
/// (without it, the block's module and line, which an edit above the block changes: name a
/// block whose series a dashboard reads). The macro is not called `retry!` because an
/// attribute and a function-like macro cannot share a name. The guide: [`guide::blocks`].
#[doc(inline)]
pub use retry_macro::retry_block;

/// Marks a function whose repetition would have a second effect: a payment, an email.
///
/// On its own it only adds a line to the function's documentation. Together with [`retry`], in
/// either order, the function must take an idempotency key that every attempt sends:
///
/// - a parameter of type [`IdempotencyKey`] (by value or by reference, any path ending in
///   `IdempotencyKey`), which counts without a mark; with two of them, mark the one to send;
/// - or a parameter marked `#[idempotency_key]`, of any type that implements
///   [`Display`](std::fmt::Display) and owns its data (no lifetime of its own), by value or by
///   reference: an order number (`u64`), a `Uuid`, a `&str` or `String`, a type of your own.
///   Its text is the key. The mark needs a plain name (`order: Order`, not a pattern), and one
///   parameter at most carries it.
///
/// Otherwise it does not compile: a lost response followed by a retry must not pay twice. A
/// marked parameter whose type has no `Display` is a compile error that names the rule.
///
/// Inside the body, [`attempt()`](crate::attempt)`.key()` gives the key as an
/// [`IdempotencyKey`], for code below the function that sends it (an HTTP layer setting the
/// `Idempotency-Key` header). The attempts only borrow the key parameter; it is rendered with
/// its `Display` when `attempt()` is called, so a keyed function that does not ask allocates
/// nothing for its key.
///
/// ```
/// use retry_runtime::{attempt, non_idempotent, retry, IdempotencyKey};
/// use std::io;
///
/// #[non_idempotent]
/// #[retry(max = 2, base = "500ms", jitter = full)]
/// fn pay_out(claim: u32, key: &IdempotencyKey) -> io::Result<String> {
///     Ok(format!("paid claim {claim} once under key {key}"))
/// }
///
/// #[non_idempotent]
/// #[retry(max = 2, base = "500ms")]
/// fn send_email(to: &str, #[idempotency_key] message_id: &str) -> io::Result<()> {
///     let _ = (to, message_id);
///     Ok(())
/// }
///
/// // The shop's order number is the key: every attempt of this order's charge sends it.
/// #[non_idempotent]
/// #[retry(max = 2, base = "500ms")]
/// fn charge(#[idempotency_key] order: u64, cents: u64) -> io::Result<String> {
///     let key = attempt().key().map(|k| k.to_string());
///     assert_eq!(key.as_deref(), Some("4711"));
///     Ok(format!("charged {cents} for order {order}"))
/// }
///
/// let key = IdempotencyKey::new();
/// assert!(pay_out(4711, &key).is_ok());
/// assert!(charge(4711, 1999).is_ok());
/// ```
///
/// ```compile_fail
/// use retry_runtime::{non_idempotent, retry};
///
/// #[non_idempotent]
/// #[retry(max = 2)]
/// fn pay_out(claim: u32) -> std::io::Result<()> { Ok(()) } // error: no idempotency key
/// ```
#[doc(inline)]
pub use retry_macro::non_idempotent;

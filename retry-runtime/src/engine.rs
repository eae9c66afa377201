//! The engine: the face an integration builds a door on, over the one loop every door of this
//! crate drives (the runtime's `state/drive.rs`).
//!
//! Every door ends in the same loop: the attribute and `retry_block!` write its steps out in your
//! code (so that `?`, `return` and borrows in the body work as written); the
//! [`Retrier`](crate::Retrier) and every integration run it in [`drive`] (or [`drive_blocking`],
//! [`drive_hedged`]). The loop is the decision after each attempt (the classifier's
//! [`Verdict`](crate::Verdict), the [`Policy`](crate::Policy)'s pause, the deadline, the budget,
//! the breaker), the attempt context ([`attempt()`](crate::attempt), one retrying layer, the
//! idempotency key), the events (the logs, the metrics, the spans, the hooks) and the fallback.
//!
//! # Building a door
//!
//! A door configured at run time (an HTTP layer, a gRPC channel, a queue consumer) keeps its
//! configuration where its calls can borrow it, and per call makes [`Settings`] (the policy,
//! the name, `budget`, `breaker`, `timeout`, `hedge`, the door's `sink`, ...) and [`DynHooks`] (how errors and
//! answers are judged, who hears the pauses and the end, the gate), both borrowed, then drives
//! its [`Operation`] (a closure that returns a future, or a struct of its own) with a timer
//! ([`TokioTimer`], or any [`Sleeper`]). The door's error type `E` takes what the loop makes of
//! a timed-out attempt and of an open breaker (`From<Elapsed>`, `From<CircuitOpen>`), and of a
//! gate's rejection (`From<Rejected>`) only if the door gives one ([`DynHooks::gate`]). A name
//! read from configuration is made a `&'static str` once with [`interned`]. An attempt's future
//! may be dropped before it ends: see [`Operation`], "Cancellation".
//!
//! A walk-through: [`guide::doors`](crate::guide::doors), a client for a line protocol over TCP
//! built on these items alone (its operation, its settings, its decider, its sink), with doctests
//! against a loopback server.
//!
//! ```
//! use retry_runtime::engine::{self, DynHooks, Settings};
//! use retry_runtime::{attempt, CircuitOpen, Elapsed, Jitter, Policy, TokioTimer, Verdict};
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! // The door's error: its own failures, and what the loop makes of a timed-out attempt and of
//! // an open breaker. (A door that calls `DynHooks::gate` also turns a gate's `Rejected` into it.)
//! #[derive(Debug)]
//! enum CallError { Busy, Timeout(Elapsed), Open(CircuitOpen) }
//! impl From<Elapsed> for CallError { fn from(e: Elapsed) -> Self { CallError::Timeout(e) } }
//! impl From<CircuitOpen> for CallError { fn from(o: CircuitOpen) -> Self { CallError::Open(o) } }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let policy = Policy::new().max(3).jitter(Jitter::None);
//! let calls = AtomicU32::new(0);
//! let classify = |error: &CallError| Verdict::from(matches!(error, CallError::Busy));
//! let hooks = DynHooks::new(&classify);
//! let answer = engine::drive(&Settings::new(&policy).name("quotes"), hooks, TokioTimer, || async {
//!     // The attempt's number, as a header would carry it.
//!     let n = attempt().number();
//!     calls.fetch_add(1, Ordering::Relaxed);
//!     if n < 3 { Err(CallError::Busy) } else { Ok(n) }
//! })
//! .await;
//! assert_eq!(answer.unwrap(), 3);
//! assert_eq!(calls.load(Ordering::Relaxed), 3);
//! # }
//! ```
//!
//! A door whose happy path must not pay for the loop's future (a tower service, whose future
//! would otherwise be the boxed loop) makes the first attempt itself ([`first`]), and hands an
//! outcome it does not accept to the loop.
//!
//! The attempt closure runs inside the attempt's context: [`attempt()`](crate::attempt) there (and
//! in its future) gives the attempt's number, for a header such as gRPC's
//! `grpc-previous-rpc-attempts` or OpenTelemetry's `http.request.resend_count`.
//!
//! # Deciding: the decision seam
//!
//! What follows an attempt that did not end in an accepted answer is the
//! [`Policy`](crate::Policy)'s to say (`max`, the pauses, the jitter), unless the door hands
//! the call a decider of its own: an implementation of [`Decide`], per call, with
//! [`DynHooks::decide`]. The decider sees each [`Failure`] (its attempt, the verdict, the error, the pause before it, the time since the
//! call began) and answers with a [`Next`]: retry after a pause, return the failure as the
//! answer, give up (and why), pause and give up ([`Next::Linger`]), or send the same attempt
//! again without counting a retry ([`Next::Resend`]: gRPC's transparent retry). It hears when the call's
//! `Ok` is accepted ([`Decide::accepted`]: a quota gives back its cost there) and, with
//! [`drive_hedged`], when a copy fails ([`Decide::copy_failed`]: the next copy on schedule, at
//! once, after a pause, or never; or the failed copy itself again, not counted as a new copy:
//! [`NextCopy::Resend`], a hedged copy's transparent retry) and whether a copy due on its timer
//! may go ([`Decide::copy_due`]). The AWS SDKs' standard mode
//! ([`Settings::aws2026`]) is one such decider; the gRPC door's retry and hedging policies are
//! others.
//!
//! The rest stays the engine's: a retry a decider asks for still draws from the budget, is held
//! to the policy's deadline, and is admitted by the breaker and the gate; the hooks, the events
//! and the metrics hear it as any other. While the breaker is open after an attempt the decider
//! is not asked.
//!
//! ```
//! use retry_runtime::engine::{
//!     self, Decide, DynHooks, Failure, Next, Settings,
//! };
//! use retry_runtime::{attempt, CircuitOpen, Elapsed, GiveUpReason, Policy, TokioTimer, Verdict};
//! use std::time::Duration;
//!
//! #[derive(Debug)]
//! enum CallError { Busy { wait_ms: u64 }, Timeout(Elapsed), Open(CircuitOpen) }
//! impl From<Elapsed> for CallError { fn from(e: Elapsed) -> Self { CallError::Timeout(e) } }
//! impl From<CircuitOpen> for CallError { fn from(o: CircuitOpen) -> Self { CallError::Open(o) } }
//!
//! /// The protocol's own rule: wait as long as the server says, at most four attempts, and give
//! /// up on a wait longer than 10 s.
//! struct AsTheServerSays;
//!
//! impl Decide<CallError> for AsTheServerSays {
//!     fn next(&mut self, failure: &Failure<'_, CallError>) -> Next {
//!         match failure.error {
//!             _ if failure.attempt >= 4 => Next::GiveUp(GiveUpReason::Exhausted),
//!             Some(CallError::Busy { wait_ms }) if *wait_ms > 10_000 => {
//!                 Next::GiveUp(GiveUpReason::SuggestedTooLong(Duration::from_millis(*wait_ms)))
//!             }
//!             Some(CallError::Busy { wait_ms }) => Next::Retry(Duration::from_millis(*wait_ms)),
//!             _ if failure.verdict.is_retry() => Next::Retry(Duration::from_millis(100)),
//!             _ => Next::Return,
//!         }
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // The policy's deadline still holds; its `max` and pauses are the decider's to say.
//! let policy = Policy::new().deadline(Duration::from_secs(30));
//! let classify = |error: &CallError| Verdict::from(matches!(error, CallError::Busy { .. }));
//! let mut decider = AsTheServerSays;
//! let hooks = DynHooks::new(&classify).decide(&mut decider);
//! let started = tokio::time::Instant::now();
//! let answer = engine::drive(&Settings::new(&policy), hooks, TokioTimer, || async {
//!     match attempt().number() {
//!         n @ 1..=2 => Err(CallError::Busy { wait_ms: 250 * u64::from(n) }),
//!         n => Ok(n),
//!     }
//! })
//! .await;
//! assert_eq!(answer.unwrap(), 3);
//! // The server's pauses, 250 ms then 500 ms, exactly.
//! assert_eq!(started.elapsed(), Duration::from_millis(750));
//! # }
//! ```
//!
//! # Events
//!
//! Every event is one [`Event`], and a door's sink (a [`Sink`], usually the [`Counters`] it
//! hands its users) hears each once. The loop reports its own (each retry, each hedged copy it
//! starts, each attempt the gate sheds, the end of a call) to the logs and the metrics, and,
//! when the door hands it its sink with [`Settings::sink`], to that sink as [`Event::Retry`],
//! [`Event::HedgedCopy`] and [`Event::GateRejected`]. A door reports its own (a call, an
//! attempt, a request sent once, a transparent retry, a throttled call, a deadline) with
//! [`report`], to the same logs and metrics and to its sink; it does not report the loop's. A
//! call without a sink (the attribute, `retry_block!`, a door that hands none) reports to none,
//! and pays nothing for it. The guide's metrics table lists every event once, for every door.
//!
//! # Stability
//!
//! This module is the seam for integrations, and part of the crate's public API: it follows the
//! crate's semantic versioning like everything else here, and its changes are in the
//! CHANGELOG. The `__private` module, which the macros' expansions use, is not: nothing outside
//! the expansions may use it.

use crate::CircuitOpen;
use crate::state::{self, DynHooks as Hooks, Retry, Settings as Set, Site};
use crate::timer::{Elapsed, Sleeper};
use std::fmt;
use std::future::Future;

pub mod first;

pub use crate::state::dynamic::{AsyncHookFn, HookFuture};
pub use crate::state::observe::{Counters, Event, Injection, Sink, report};
pub use crate::state::{Decide, DynHooks, Failure, Next, NextCopy, Settings};

/// The operation a call retries: what each of its attempts runs, as a future that may borrow
/// the operation (and through it the door's state, such as a client or a pool) for as long as
/// the attempt runs.
///
/// A door implements it on a struct that holds what its attempts need; a closure that returns a
/// future (`|| async move { ... }`) is one.
/// The attempt runs inside its context: [`attempt()`](crate::attempt) in `attempt` (and in its
/// future) gives the attempt's number.
///
/// # Cancellation
///
/// An attempt's future may be dropped before it ends, at any `.await` in it, and nothing of it
/// runs after that but destructors:
///
/// - when [`Settings::timeout`] cuts the attempt off (the loop then judges the `Elapsed` error
///   and may make another attempt);
/// - when a hedged copy loses to another ([`drive_hedged`]: the first acceptable answer wins,
///   the other copies are dropped);
/// - when the caller drops the call's future (a `select!`, a timeout around the whole call, a
///   client that went away).
///
/// So an attempt must not leave half-changed what a later attempt uses. Take what belongs to
/// one exchange (a connection, a stream, a transaction) into the attempt's future, and give it
/// back only once the exchange is complete: dropped halfway, it is dropped with the future,
/// and closed. A connection kept in the operation and borrowed by each attempt would reach the
/// next attempt with a request sent and its answer unread, and that attempt would read the
/// previous answer, or wait for one that never comes.
///
/// ```
/// use retry_runtime::engine::Operation;
/// use std::future::Future;
/// use std::io;
/// use std::sync::Mutex;
///
/// /// An open connection; dropping it closes it.
/// struct Connection { /* a socket */ }
///
/// impl Connection {
///     async fn open() -> io::Result<Connection> { Ok(Connection {}) }
///     /// Sends `request` and reads its answer: cancelled between the two, the connection
///     /// holds an answer that no one has read.
///     async fn exchange(&mut self, request: &str) -> io::Result<usize> { Ok(request.len()) }
/// }
///
/// /// Each attempt takes a connection of its own from the door's idle ones (or opens one),
/// /// and puts it back only after a whole exchange.
/// struct Send<'d> {
///     idle: &'d Mutex<Vec<Connection>>,
///     request: &'d str,
/// }
///
/// impl Operation<usize, io::Error> for Send<'_> {
///     fn attempt(&mut self) -> impl Future<Output = io::Result<usize>> {
///         let (idle, request) = (self.idle, self.request);
///         async move {
///             let taken = idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
///             let mut connection = match taken {
///                 Some(connection) => connection,
///                 None => Connection::open().await?,
///             };
///             // Dropped here (a timeout, a lost hedge, the caller gone), `connection` is
///             // dropped with the future: closed, never put back half-used.
///             let answer = connection.exchange(request).await?;
///             idle.lock().unwrap_or_else(|e| e.into_inner()).push(connection);
///             Ok(answer)
///         }
///     }
/// }
/// ```
///
/// A trait rather than an async closure bound: rustc cannot yet prove that the future of an
/// async closure that borrows its captures is `Send` (it reports "implementation of `Send` is not
/// general enough"), and a door's future (a tower service's, an `async_trait` method's) must be.
/// A struct's `attempt` has no such trouble.
pub trait Operation<T, E> {
    /// The future of one attempt.
    fn attempt(&mut self) -> impl Future<Output = Result<T, E>>;
}

/// A closure that returns a future is an operation (`|| async move { ... }`): each attempt's
/// future is the closure's, and borrows nothing from the closure itself, so that it is `Send`
/// whenever what it holds is.
impl<T, E, B, Fut> Operation<T, E> for B
where
    B: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    fn attempt(&mut self) -> impl Future<Output = Result<T, E>> {
        self()
    }
}

/// An async closure as an [`Operation`] (`async || { ... }`), whose attempts may borrow its
/// captures mutably: the [`Retrier`](crate::Retrier)'s `run_async`. rustc cannot yet prove such
/// a future `Send` (rust-lang/rust#100013), so a door's calls take a closure that returns a
/// future, or an [`Operation`] of their own.
pub(crate) struct AsyncFnOperation<B>(pub(crate) B);

impl<T, E, B: AsyncFnMut() -> Result<T, E>> Operation<T, E> for AsyncFnOperation<B> {
    fn attempt(&mut self) -> impl Future<Output = Result<T, E>> {
        (self.0)()
    }
}

/// `name` as a `&'static str`, for [`Settings::name`] (and the other names that are labels:
/// `retry-http`'s `HttpRetry::name`, a gate's, a breaker's) when it is read at
/// run time, from configuration: the first call with a name copies it and keeps the copy for
/// the rest of the process; every later call with the same text returns that copy, allocating
/// nothing. So a door configured again with the same name (a reload) keeps one copy, and one
/// set of metric handles (found by the name's address).
///
/// Names are labels, a small set (the metrics guide asks it of every label value): a name made
/// per request (an id, a URL) would be kept as many times as there are distinct ones.
///
/// ```
/// use retry_runtime::engine::{self, Settings};
/// use retry_runtime::Policy;
///
/// // Read from configuration.
/// let configured = String::from("payments");
/// let name: &'static str = engine::interned(&configured);
/// assert!(std::ptr::eq(name, engine::interned("payments")));
///
/// let policy = Policy::new();
/// let settings = Settings::new(&policy).name(name);
/// # let _ = settings;
/// ```
pub fn interned(name: &str) -> &'static str {
    use std::collections::BTreeSet;
    use std::sync::{Mutex, PoisonError};
    static NAMES: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    // A panic while the lock was held cannot leave the set half-changed (an insert is one
    // step), so a poisoned lock is taken as it is.
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(kept) = names.get(name) {
        return kept;
    }
    let kept: &'static str = Box::leak(Box::from(name));
    names.insert(kept);
    kept
}

/// tokio's timer: now [`retry_runtime::TokioTimer`](crate::TokioTimer), beside
/// [`Sleeper`](crate::Sleeper); kept here for the doors written before.
#[cfg(feature = "tokio")]
#[doc(hidden)]
pub use crate::timer::TokioTimer;

/// The loop state of one call of a door configured at run time, with the options `opts`.
fn state<'a, T, E, S: Sleeper, O>(
    settings: &Set<'a>,
    opts: O,
    maker: crate::faults::Maker<E>,
) -> Retry<'a, T, E, O> {
    let clock = crate::timer::clock_of::<S>;
    Retry {
        site: Site {
            policy: settings.policy,
            name: settings.name,
            clock,
        },
        progress: state::Progress::idle(settings.level),
        value: crate::faults::Carried::NONE.with(maker),
        opts,
        spans: Default::default(),
    }
}

/// Runs the loop with the attempts `each`: with the slots that await an async hook if `hooks`
/// has one (the state then holds the outcome across the pause), else with the sync ones.
async fn run<'a, T, E, S: Sleeper>(
    settings: &Set<'a>,
    hooks: Hooks<'a, T, E>,
    timer: S,
    each: impl state::drive::Attempts<T, E>,
) -> Result<T, E>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
{
    let maker = hooks.maker();
    if hooks.awaits() {
        let opts = hooks.options_async(settings, timer);
        state::drive(state::<T, E, S, _>(settings, opts, maker), None, each).await
    } else {
        let opts = hooks.options(settings, timer);
        state::drive(state::<T, E, S, _>(settings, opts, maker), None, each).await
    }
}

/// Runs a call to its end with the loop: `operation` once per attempt (inside the attempt's
/// context), the decision after each, the pauses on `timer`, until an attempt's outcome is
/// accepted (an `Ok` that `on_result` does not reject, or an error the classifier says not to
/// retry) or the loop gives up; then that outcome, or the last one.
///
/// A breaker's refusal and a timed-out attempt are the call's error through `E`'s `From` impls,
/// and with a [`gate`](DynHooks::gate) a gate's rejection too (`From<Rejected>`, asked by
/// `gate`); the events show errors with `E`'s `Debug`. A timed-out attempt's error is judged by
/// `hooks`' classifier, as any other ([`Settings::timeout`]).
pub async fn drive<'a, T, E, S>(
    settings: &Settings<'a>,
    hooks: DynHooks<'a, T, E>,
    timer: S,
    operation: impl Operation<T, E>,
) -> Result<T, E>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
    S: Sleeper,
{
    run(settings, hooks, timer, state::Plain(operation)).await
}

/// [`drive`] with the settings' [`hedge`](Settings::hedge): each attempt that has not answered
/// after the [`Hedge`](crate::Hedge)'s delay gets copies running beside it (each with the
/// attempt's context, `attempt().hedge()` its index), and the first acceptable answer wins; the
/// others are dropped. Without a hedge in `settings`, it is [`drive`]: one attempt at a time.
/// `attempt` makes one copy's future, possibly while another copy runs, so it is `Fn`: a closure
/// that returns a future (`|| async move { ... }`), with what each copy needs cloned into it (a
/// tonic client, an `Arc`).
pub async fn drive_hedged<'a, T, E, S, Fut>(
    settings: &Settings<'a>,
    hooks: DynHooks<'a, T, E>,
    timer: S,
    attempt: impl Fn() -> Fut,
) -> Result<T, E>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
    S: Sleeper,
    Fut: Future<Output = Result<T, E>>,
{
    match settings.hedge {
        Some(hedge) => run(settings, hooks, timer, state::Hedged(hedge, attempt)).await,
        None => run(settings, hooks, timer, state::Plain(attempt)).await,
    }
}

/// [`drive`] for a blocking call: the pauses block the thread (`std::thread::sleep`), the
/// deadline is measured on [`Instant::now`](std::time::Instant::now). `settings`' `timeout` and
/// `hedge` are not honoured here: a blocking call cannot be cut off, or raced, from outside.
pub fn drive_blocking<'a, T, E>(
    settings: &Settings<'a>,
    hooks: DynHooks<'a, T, E>,
    mut attempt: impl FnMut() -> Result<T, E>,
) -> Result<T, E>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
{
    let settings = settings.timeout(None);
    let maker = hooks.maker();
    let opts = hooks.options(&settings, crate::timer::NoTimer);
    let mut state = state::<T, E, crate::timer::NoTimer, _>(&settings, opts, maker);
    state.site.clock = state::std_now;
    state::drive_blocking(state, None, None, |state| state.attempt(&mut attempt))
}

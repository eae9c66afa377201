//! The engine: the one loop every door of this crate drives, and the face an integration builds a
//! door on.
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
//! the name, `budget`, `breaker`, `gate`, `timeout`, `hedge`, ...) and [`DynHooks`] (how errors and
//! answers are judged, who hears the pauses and the end), both borrowed, then drives its
//! [`Operation`]. The door's error type `E` takes what the loop makes of a timed-out attempt
//! and of an open breaker (`From<Elapsed>`, `From<CircuitOpen>`), and of a gate's rejection
//! (`From<Rejected>`) only if the door calls [`Settings::gate`]. A name read from configuration
//! is made a `&'static str` once with [`interned`]. An attempt's future may be dropped before
//! it ends: see [`Operation`], "Cancellation".
//!
//! ```
//! use retry_runtime::engine::{self, AsyncFnOperation, DynHooks, Settings, TokioTimer};
//! use retry_runtime::{attempt, CircuitOpen, Elapsed, Jitter, Policy, Verdict};
//! use std::sync::atomic::{AtomicU32, Ordering};
//!
//! // The door's error: its own failures, and what the loop makes of a timed-out attempt and of
//! // an open breaker. (A door that calls `Settings::gate` also turns a gate's `Rejected` into it.)
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
//! let answer = engine::drive(&Settings::new(&policy).name("quotes"), hooks, TokioTimer, AsyncFnOperation(async || {
//!     // The attempt's number, as a header would carry it.
//!     let n = attempt().number();
//!     calls.fetch_add(1, Ordering::Relaxed);
//!     if n < 3 { Err(CallError::Busy) } else { Ok(n) }
//! }))
//! .await;
//! assert_eq!(answer.unwrap(), 3);
//! assert_eq!(calls.load(Ordering::Relaxed), 3);
//! # }
//! ```
//!
//! A door whose happy path must not pay for the loop's future (a tower service, whose future
//! would otherwise be the boxed loop) makes the first attempt itself with [`FirstAttempt`], and
//! hands an outcome it does not accept to [`drive_after`].
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
//! answer, give up (and why), or pause and give up ([`Next::Linger`]). It hears when the call's
//! `Ok` is accepted ([`Decide::accepted`]: a quota gives back its cost there) and, with
//! [`drive_hedged`], when a copy fails ([`Decide::copy_failed`]: the next copy on schedule, at
//! once, after a pause, or never) and whether a copy due on its timer may go
//! ([`Decide::copy_due`]). The AWS SDKs' standard mode
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
//!     self, Decide, DynHooks, Failure, FnOperation, Next, Settings, TokioTimer,
//! };
//! use retry_runtime::{attempt, CircuitOpen, Elapsed, GiveUpReason, Policy, Verdict};
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
//! let answer = engine::drive(&Settings::new(&policy), hooks, TokioTimer, FnOperation(|| async {
//!     match attempt().number() {
//!         n @ 1..=2 => Err(CallError::Busy { wait_ms: 250 * u64::from(n) }),
//!         n => Ok(n),
//!     }
//! }))
//! .await;
//! assert_eq!(answer.unwrap(), 3);
//! // The server's pauses, 250 ms then 500 ms, exactly.
//! assert_eq!(started.elapsed(), Duration::from_millis(750));
//! # }
//! ```
//!
//! # Events
//!
//! The loop reports its own events (each retry, each hedge, the end of a call) to the logs and
//! the metrics. A door reports its own ([`Event`]: a call, an attempt, a request sent once, a
//! transparent retry, a hedged copy, a throttled call, a deadline) with [`report`], to the same
//! logs and metrics and to a [`Sink`] of its own, usually the [`Counters`] it hands its users.
//! The guide's metrics table lists every event once, for every door.
//!
//! # Stability
//!
//! This module is the seam for integrations, and part of the crate's public API: it follows the
//! crate's semantic versioning like everything else here, and its changes are in the
//! CHANGELOG. The `__private` module, which the macros' expansions use, is not: nothing outside
//! the expansions may use it.

use crate::context::{self, Enter, Frame, KeyKind, Packed};
use crate::state::{self, DynHooks as Hooks, Retry, Settings as Set, Site};
use crate::timer::{Elapsed, Sleeper};
use crate::{CircuitOpen, Hedge};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

pub use crate::state::observe::{Counters, Event, Sink, report};
pub use crate::state::{
    Decide, DynHooks, Failure, Gate, GateFor, GateSlot, Next, NextCopy, NoGate, Settings,
};

/// The operation a call retries: what each of its attempts runs, as a future that may borrow
/// the operation (and through it the door's state, such as a client or a pool) for as long as
/// the attempt runs.
///
/// A door implements it on a struct that holds what its attempts need; a closure is one through
/// [`FnOperation`] (a closure that returns a future) or [`AsyncFnOperation`] (an async closure).
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

/// A closure that returns a future as an [`Operation`] (`|| async move { ... }`): each
/// attempt's future is the closure's, and borrows nothing from the closure itself, so that it is
/// `Send` whenever what it holds is.
#[derive(Clone, Copy, Debug)]
pub struct FnOperation<B>(pub B);

impl<T, E, B, Fut> Operation<T, E> for FnOperation<B>
where
    B: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    #[inline]
    fn attempt(&mut self) -> impl Future<Output = Result<T, E>> {
        (self.0)()
    }
}

/// An async closure as an [`Operation`] (`async || { ... }`), whose attempts may borrow its
/// captures mutably: a `&mut` database client that begins a transaction per attempt (a
/// transaction dropped unfinished rolls back). What one exchange leaves half-done must not be
/// borrowed across attempts: see [`Operation`], "Cancellation".
///
/// rustc cannot yet prove such a future `Send` (rust-lang/rust#100013: "lifetime bound not
/// satisfied", "implementation of `Send` is not general enough"), so a call that is spawned takes
/// an [`FnOperation`], or an [`Operation`] of its own.
#[derive(Clone, Copy, Debug)]
pub struct AsyncFnOperation<B>(pub B);

impl<T, E, B: AsyncFnMut() -> Result<T, E>> Operation<T, E> for AsyncFnOperation<B> {
    #[inline]
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

/// tokio's timer, for [`drive`]: pauses with `tokio::time::sleep`, on tokio's clock (which a
/// paused test clock governs).
#[cfg(feature = "tokio")]
pub use crate::timer::TokioTimer;

/// The loop state of one call of a door configured at run time.
fn state<'a, T, E, S: Sleeper, G: GateFor<'a, E>>(
    settings: &Set<'a, G>,
    hooks: Hooks<'a, T, E>,
    timer: S,
) -> Retry<'a, T, E, state::DynOptions<'a, T, E, S>>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
{
    let clock = crate::timer::clock_of::<S>;
    Retry {
        site: Site {
            policy: settings.policy,
            name: settings.name,
            clock,
        },
        progress: state::Progress::idle(settings.level),
        opts: hooks.options(settings, timer),
        spans: Default::default(),
        value: PhantomData,
    }
}

/// Runs a call to its end with the loop: `operation` once per attempt (inside the attempt's
/// context), the decision after each, the pauses on `timer`, until an attempt's outcome is
/// accepted (an `Ok` that `on_result` does not reject, or an error the classifier says not to
/// retry) or the loop gives up; then that outcome, or the last one.
///
/// A breaker's refusal and a timed-out attempt are the call's error through `E`'s `From` impls,
/// and with a [`gate`](Settings::gate) a gate's rejection too (`G` is then [`Gate`], which asks
/// `E: From<Rejected>`; without one it is [`NoGate`], which asks nothing); the events show
/// errors with `E`'s `Debug`. A timed-out attempt's error is judged by `hooks`' classifier, as
/// any other ([`Settings::timeout`]).
pub async fn drive<'a, T, E, S, G>(
    settings: &Settings<'a, G>,
    hooks: DynHooks<'a, T, E>,
    timer: S,
    operation: impl Operation<T, E>,
) -> Result<T, E>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
    S: Sleeper,
    G: GateFor<'a, E>,
{
    let state = state(settings, hooks, timer);
    state::drive(state, None, state::Plain(operation)).await
}

/// The first attempt of a call, made by the door before the loop and without it, so that a call
/// whose first answer is accepted (the happy path) never builds the loop's future: a tower
/// service returns a named future for it instead of a boxed loop. When the answer is not
/// accepted, [`drive_after`] takes it over as the loop's first attempt.
///
/// Only for a call that nothing has to see before its first attempt:
/// [`new`](FirstAttempt::new) says `None` when the settings have a budget (it takes a deposit),
/// a breaker or a gate (they admit the attempt), `aws2026`, a `timeout` (the attempt races a
/// timer), a hedge, a policy with a deadline (the clock is read as the call starts), or the
/// feature `attempt-spans` is on (the attempt has a span). The door's hooks must not hear the
/// time either (a [`DynHooks::notify`] that is not
/// [`notify_untimed`](DynHooks::notify_untimed), an `on_give_up`, a decider's
/// [`Failure::elapsed`]): their times would start after the first attempt.
///
/// ```
/// use retry_runtime::engine::{self, DynHooks, FirstAttempt, FnOperation, Settings, TokioTimer};
/// use retry_runtime::{attempt, CircuitOpen, Elapsed, Jitter, Policy, Verdict};
///
/// #[derive(Debug)]
/// enum CallError { Busy, Timeout(Elapsed), Open(CircuitOpen) }
/// impl From<Elapsed> for CallError { fn from(e: Elapsed) -> Self { CallError::Timeout(e) } }
/// impl From<CircuitOpen> for CallError { fn from(o: CircuitOpen) -> Self { CallError::Open(o) } }
///
/// async fn call() -> Result<u32, CallError> {
///     // The attempt's number, as a header would carry it.
///     match attempt().number() {
///         1 => Err(CallError::Busy),
///         n => Ok(n),
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let policy = Policy::new().max(3).jitter(Jitter::None);
/// let settings = Settings::new(&policy).name("quotes");
/// let classify = |error: &CallError| Verdict::from(matches!(error, CallError::Busy));
/// let answer = match FirstAttempt::new(&settings) {
///     Some(first) => match first.run(call).await {
///         Ok(n) => {
///             first.accepted();
///             Ok(n)
///         }
///         failed => {
///             let hooks = DynHooks::new(&classify);
///             engine::drive_after(&settings, hooks, TokioTimer, failed, FnOperation(call)).await
///         }
///     },
///     // Something has to see the first attempt (here only with the feature `attempt-spans`,
///     // whose span the loop opens): the loop makes every attempt.
///     None => engine::drive(&settings, DynHooks::new(&classify), TokioTimer, FnOperation(call)).await,
/// };
/// assert_eq!(answer.unwrap(), 2);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FirstAttempt {
    frame: Packed,
    name: &'static str,
    /// The policy retries (`max` above 0): the attempt's part of `retried_above`.
    retries: bool,
}

impl FirstAttempt {
    /// The first attempt of a call with `settings`, if it may run outside the loop (see
    /// [`FirstAttempt`]). Reads whether a layer above retries, as the loop does when it starts.
    #[inline]
    pub fn new<'a, G: GateSlot<'a>>(settings: &Settings<'a, G>) -> Option<Self> {
        let plain = settings.budget.is_none()
            && settings.breaker.is_none()
            && settings.gate.get().is_none()
            && settings.aws.is_none()
            && settings.timeout.is_none()
            && settings.hedge.is_none()
            && settings.policy.get_deadline().is_none()
            && !cfg!(feature = "attempt-spans");
        let retries = settings.policy.get_max() > 0;
        plain.then(|| FirstAttempt {
            frame: Packed::new(Frame {
                attempt: 1,
                key: KeyKind::None,
                retried_above: context::retried_above() || retries,
                hedge: 0,
            }),
            name: settings.name,
            retries,
        })
    }

    /// The first attempt of another call with the same settings, as [`new`](FirstAttempt::new)
    /// would make it now: whether a layer above retries is read again, the settings are not (a
    /// tower layer asks `new` once, when it is made, and `again` on each request).
    #[inline]
    pub fn again(&self) -> Self {
        let mut first = *self;
        first.frame = self
            .frame
            .retried_above(context::retried_above() || self.retries);
        first
    }

    /// Runs the attempt: `make` makes its future inside the attempt's context, and the future is
    /// polled inside it, so that [`attempt()`](crate::attempt) gives attempt 1 in both.
    #[inline]
    pub fn run<F: Future>(&self, make: impl FnOnce() -> F) -> InAttempt<F> {
        let future = {
            let _entered = Enter::packed(self.frame);
            make()
        };
        InAttempt {
            frame: self.frame,
            future,
        }
    }

    /// The attempt's answer was accepted: the call ends here, as the loop would end it (the
    /// metrics count a first try).
    #[inline]
    pub fn accepted(self) {
        state::observe::accepted(self.name, 0);
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`FirstAttempt`]: the attempt's own, polled inside the attempt's context.
    #[derive(Debug)]
    pub struct InAttempt<F> {
        frame: Packed,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for InAttempt<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = Enter::packed(*this.frame);
        this.future.poll(cx)
    }
}

/// [`drive`] after a [`FirstAttempt`] whose outcome was not accepted: `first` is the loop's
/// first attempt (judged by `hooks` as any other), and `operation` makes the attempts after it.
/// `settings` and `hooks` are the ones the first attempt was made with.
pub async fn drive_after<'a, T, E, S, G>(
    settings: &Settings<'a, G>,
    hooks: DynHooks<'a, T, E>,
    timer: S,
    first: Result<T, E>,
    operation: impl Operation<T, E>,
) -> Result<T, E>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
    S: Sleeper,
    G: GateFor<'a, E>,
{
    let operation = After {
        first: Some(first),
        operation,
    };
    drive(settings, hooks, timer, operation).await
}

/// The operation of [`drive_after`]: the first attempt's outcome as it was, then `operation`'s.
struct After<T, E, O> {
    first: Option<Result<T, E>>,
    operation: O,
}

impl<T, E, O: Operation<T, E>> Operation<T, E> for After<T, E, O> {
    fn attempt(&mut self) -> impl Future<Output = Result<T, E>> {
        let first = self.first.take();
        let operation = &mut self.operation;
        async move {
            match first {
                Some(outcome) => outcome,
                None => operation.attempt().await,
            }
        }
    }
}

/// [`drive`] with `hedge`: each attempt that has not answered after the [`Hedge`]'s delay gets
/// copies running beside it (each with the attempt's context, `attempt().hedge()` its index),
/// and the first acceptable answer wins; the others are dropped. `attempt` makes one copy's
/// future, possibly while another copy runs, so it is `Fn`: a closure that returns a future
/// (`|| async move { ... }`), with what each copy needs cloned into it (a tonic client, an
/// `Arc`).
pub async fn drive_hedged<'a, T, E, S, G, Fut>(
    settings: &Settings<'a, G>,
    hooks: DynHooks<'a, T, E>,
    timer: S,
    hedge: &Hedge,
    attempt: impl Fn() -> Fut,
) -> Result<T, E>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
    S: Sleeper,
    G: GateFor<'a, E>,
    Fut: Future<Output = Result<T, E>>,
{
    let state = state(settings, hooks, timer);
    state::drive(state, None, state::Hedged(hedge, attempt)).await
}

/// [`drive`] for a blocking call: the pauses block the thread (`std::thread::sleep`), the
/// deadline is measured on [`Instant::now`](std::time::Instant::now). `settings`' `timeout` and
/// `hedge` are not honoured here: a blocking call cannot be cut off, or raced, from outside.
pub fn drive_blocking<'a, T, E, G>(
    settings: &Settings<'a, G>,
    hooks: DynHooks<'a, T, E>,
    mut attempt: impl FnMut() -> Result<T, E>,
) -> Result<T, E>
where
    E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
    G: GateFor<'a, E>,
{
    let settings = settings.timeout(None);
    let mut state = state(&settings, hooks, Blocking);
    state.site.clock = state::std_now;
    state::drive_blocking(state, None, None, |state| state.attempt(&mut attempt))
}

/// The "timer" of [`drive_blocking`], whose pauses block: never used to sleep.
struct Blocking;

impl Sleeper for Blocking {
    type Sleep = std::future::Ready<()>;
    fn sleep(&self, _: std::time::Duration) -> Self::Sleep {
        std::future::ready(())
    }
}

#[cfg(test)]
mod tests {
    use super::{FirstAttempt, Settings};
    use crate::Policy;
    use crate::context::{self, scope};

    /// Whether a layer above retries, as the first attempt made by `first` sees it.
    fn seen(first: FirstAttempt) -> bool {
        let mut seen = None;
        let _attempt = first.run(|| {
            seen = Some(context::current().retried_above);
            std::future::ready(())
        });
        seen.unwrap_or_default()
    }

    #[test]
    fn again_reads_the_caller_anew_and_keeps_the_policy() {
        if cfg!(feature = "attempt-spans") {
            // The attempt has a span, which the loop opens: no first attempt outside it.
            assert!(FirstAttempt::new(&Settings::new(&Policy::new())).is_none());
            return;
        }
        let once = Policy::new().max(0);
        let made_inside = scope::caller_retries(|| FirstAttempt::new(&Settings::new(&once)));
        let Some(first) = made_inside else {
            panic!("plain settings make a first attempt");
        };
        assert!(seen(first));
        assert!(!seen(first.again()));
        assert!(seen(scope::caller_retries(|| first.again())));

        let retrying = Policy::new().max(2);
        let Some(first) = FirstAttempt::new(&Settings::new(&retrying)) else {
            panic!("plain settings make a first attempt");
        };
        assert!(seen(first.again()));
    }
}

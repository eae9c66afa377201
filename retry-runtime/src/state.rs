//! The loop's state machine: one decision per attempt outcome.

use crate::breaker::FromCircuitOpen;
use crate::context::{self, Enter, Frame, Scoped};
use crate::timer::{Elapsed, FromElapsed, SleepFuture, Sleeper, Timed};
use crate::{Admission, CircuitBreaker, CircuitOpen, IdempotencyKey, Policy, RetryBudget, Verdict};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// A hook that was not given.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unset;

/// What `notify` hears before each pause.
///
/// ```
/// use retry_runtime::{retry, RetryEvent};
/// use std::io;
/// use std::sync::Mutex;
///
/// static HEARD: Mutex<Vec<(u32, u128)>> = Mutex::new(Vec::new());
///
/// fn remember(_: &io::Error, event: &RetryEvent) {
///     HEARD.lock().unwrap().push((event.attempt, event.pause.as_millis()));
/// }
///
/// #[retry(max = 2, base = "1ms", jitter = none, notify = remember)]
/// fn flaky() -> io::Result<()> {
///     Err(io::ErrorKind::TimedOut.into())
/// }
///
/// assert!(flaky().is_err());
/// assert_eq!(*HEARD.lock().unwrap(), [(1, 1), (2, 2)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryEvent {
    /// The name of the annotated function.
    pub function: &'static str,
    /// The attempt that failed: 1 for the first call.
    pub attempt: u32,
    /// The pause about to be taken, jitter and any server-suggested pause included.
    pub pause: Duration,
    /// Time since the first call began, on the loop's clock.
    pub elapsed: Duration,
}

/// `E: Debug` when the `tracing` feature logs errors; every type otherwise.
#[cfg(feature = "tracing")]
#[diagnostic::on_unimplemented(
    message = "`{Self}` must implement `Debug` so that `#[retry]` can log failed attempts",
    label = "`{Self}` does not implement `Debug`",
    note = "add `#[derive(Debug)]` to `{Self}`, or turn off the `tracing` feature of `retry-runtime`"
)]
pub trait LoggableError: fmt::Debug {}
#[cfg(feature = "tracing")]
impl<E: fmt::Debug + ?Sized> LoggableError for E {}

/// `E: Debug` when the `tracing` feature logs errors; every type otherwise.
#[cfg(not(feature = "tracing"))]
pub trait LoggableError {}
#[cfg(not(feature = "tracing"))]
impl<E: ?Sized> LoggableError for E {}

/// What a classifier (`on = ...`) may return: `bool` or a [`Verdict`], with an error message
/// that says so.
#[diagnostic::on_unimplemented(
    message = "`on = ...` must return `bool` or `retry_runtime::Verdict`, not `{Self}`",
    label = "this classifier returns `{Self}`",
    note = "return `true` to retry the error and `false` to return it at once, or a `Verdict`: `Retry`, `RetryAfter(pause)` or `Fail`"
)]
pub trait IntoVerdict {
    /// The classifier's answer as a [`Verdict`].
    fn into_verdict(self) -> Verdict;
}

impl IntoVerdict for bool {
    fn into_verdict(self) -> Verdict {
        Verdict::from(self)
    }
}

impl IntoVerdict for Verdict {
    fn into_verdict(self) -> Verdict {
        self
    }
}

/// The two sides of a function's `Result`, so the state can name them.
pub trait Outcome {
    /// `T` in `Result<T, E>`.
    type Value;
    /// `E` in `Result<T, E>`.
    type Error;
}

impl<T, E> Outcome for Result<T, E> {
    type Value = T;
    type Error = E;
}

/// A parameter that can carry the idempotency key: an [`IdempotencyKey`], a string, or a
/// reference to one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an idempotency key parameter",
    note = "take the key as `&IdempotencyKey`, `IdempotencyKey`, `&str` or `String`"
)]
pub trait KeyParam {
    /// The key, for `attempt().key()`.
    fn to_key(&self) -> IdempotencyKey;
}
impl KeyParam for IdempotencyKey {
    fn to_key(&self) -> IdempotencyKey {
        self.clone()
    }
}
impl KeyParam for str {
    fn to_key(&self) -> IdempotencyKey {
        IdempotencyKey::from(self)
    }
}
impl KeyParam for String {
    fn to_key(&self) -> IdempotencyKey {
        IdempotencyKey::from(self.as_str())
    }
}
impl<K: KeyParam + ?Sized> KeyParam for &K {
    fn to_key(&self) -> IdempotencyKey {
        (**self).to_key()
    }
}

/// The state of one call of an annotated function, across its attempts.
///
/// Built once per call with the function's return type, its classifier and any hooks; then
/// each attempt runs through [`attempt`](Retry::attempt) or [`run`](Retry::run), and
/// [`next`](Retry::next) decides what follows: `Break` carries the function's result,
/// `Continue` the pause before the next attempt. Starting reads no clock unless the policy has
/// a deadline or a hook needs the elapsed time, and an `Ok` outcome is decided without any work.
///
/// Each user-supplied callable is stored with a function pointer that calls it, made where its
/// bound is checked (in `start` and the builders): a mistyped classifier or hook is one error
/// there, not a second one at every use.
pub struct Retry<'p, Out: Outcome, C = Unset, S = Unset, R = Unset, N = Unset, G = Unset> {
    core: Core<'p>,
    classify: C,
    judge: fn(&C, &Out::Error) -> Verdict,
    sleeper: S,
    on_result: R,
    check_result: Option<fn(&R, &Out::Value) -> bool>,
    notify: N,
    call_notify: Option<fn(&N, &Out::Error, &RetryEvent)>,
    on_give_up: G,
    call_give_up: Option<fn(&G, &Out::Error)>,
    timeout: Option<Timeout<Out>>,
    open_error: Option<fn(CircuitOpen) -> Out>,
    _out: PhantomData<fn() -> Out>,
}

/// A per-attempt time limit, and how to turn its expiry into the function's error.
type Timeout<Out> = (Duration, fn(Elapsed) -> Out);

/// The part of the state that does not depend on the function's types.
struct Core<'p> {
    policy: &'p Policy,
    name: &'static str,
    /// Retries taken so far; the attempt that just ended is number `retries + 1`.
    retries: u32,
    previous_pause: Duration,
    started: Option<Instant>,
    clock: fn() -> Instant,
    /// The function's key parameter, turned into an [`IdempotencyKey`] only while an attempt runs.
    key: Option<&'p (dyn KeyParam + Sync)>,
    /// An enclosing annotated function or `scope::caller_retries` retries this work.
    retried_above: bool,
    /// `nested = retry`: retry even when a layer above does.
    nested_retry: bool,
    /// The attempt that just ended was cut off by the timeout.
    timed_out: bool,
    budget: Option<&'p RetryBudget>,
    breaker: Option<&'p CircuitBreaker>,
    /// The breaker's permission for the attempt under way, recorded when the attempt ends; a
    /// trial dropped unrecorded (a cancelled call) counts as failed, by `Admission`'s own drop.
    admission: Option<Admission<'p>>,
    /// The breaker refused the attempt that just "ended": return its error at once.
    refused: bool,
}

fn std_now() -> Instant {
    crate::testing::virtual_now().unwrap_or_else(Instant::now)
}

#[cfg(feature = "tokio")]
fn tokio_now() -> Instant {
    crate::testing::virtual_now().unwrap_or_else(|| tokio::time::Instant::now().into_std())
}

impl<'p, T, E> Retry<'p, Result<T, E>> {
    /// For a sync function: pauses with `std::thread::sleep`, and measures the deadline on
    /// [`Instant::now`].
    #[inline(always)]
    pub fn start<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(Core::new(policy, name, std_now), classify, Unset)
    }

    /// For an async function: pauses with tokio's timer and measures the deadline on tokio's
    /// clock, so a paused test clock governs both.
    #[cfg(feature = "tokio")]
    #[inline(always)]
    pub fn start_async<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, crate::timer::TokioTimer>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(
            Core::new(policy, name, tokio_now),
            classify,
            crate::timer::TokioTimer,
        )
    }

    /// For an async function without the `tokio` feature: a compile error that asks for the
    /// feature or `sleep = ...` (with `sleep`, the expansion calls [`start`](Retry::start)).
    #[cfg(not(feature = "tokio"))]
    #[inline]
    pub fn start_async<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, crate::timer::NoTimer>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
        crate::timer::NoTimer: crate::timer::TimerFor<T>,
    {
        Retry::with_parts(
            Core::new(policy, name, std_now),
            classify,
            crate::timer::NoTimer,
        )
    }
}

impl<'p> Core<'p> {
    #[inline(always)]
    fn new(policy: &'p Policy, name: &'static str, clock: fn() -> Instant) -> Self {
        Core {
            policy,
            name,
            retries: 0,
            previous_pause: Duration::ZERO,
            started: policy.time_budget().map(|_| clock()),
            clock,
            key: None,
            retried_above: context::current().retried_above,
            nested_retry: false,
            timed_out: false,
            budget: None,
            breaker: None,
            admission: None,
            refused: false,
        }
    }

    /// Asks the breaker, if any, to let the next attempt through.
    #[inline]
    fn admit(&mut self) -> Result<(), CircuitOpen> {
        let Some(breaker) = self.breaker else {
            return Ok(());
        };
        match breaker.admit((self.clock)()) {
            Ok(admission) => {
                self.admission = Some(admission);
                Ok(())
            }
            Err(open) => {
                self.refused = true;
                Err(open)
            }
        }
    }

    /// Tells the breaker, if any, how the attempt went: a transient failure counts against the
    /// service; a success or a permanent error (the service answered) counts for it.
    #[inline]
    fn record(&mut self, service_failed: bool) {
        if let Some(admission) = self.admission.take() {
            admission.record(!service_failed, (self.clock)());
        }
    }

    fn elapsed(&self) -> Duration {
        self.started.map_or(Duration::ZERO, |t| {
            (self.clock)().saturating_duration_since(t)
        })
    }

    #[inline]
    fn frame(&self) -> Frame {
        Frame {
            attempt: self.retries + 1,
            has_key: self.key.is_some(),
            retried_above: self.retried_above || self.policy.retries() > 0,
        }
    }
}

impl<'p, T, E, C, S> Retry<'p, Result<T, E>, C, S> {
    #[inline(always)]
    /// `classify`'s bound is checked here, once, and turned into `judge`, which `next` calls
    /// without a bound of its own.
    fn with_parts<V>(core: Core<'p>, classify: C, sleeper: S) -> Self
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry {
            core,
            classify,
            judge: |c, e| c(e).into_verdict(),
            sleeper,
            on_result: Unset,
            check_result: None,
            notify: Unset,
            call_notify: None,
            on_give_up: Unset,
            call_give_up: None,
            timeout: None,
            open_error: None,
            _out: PhantomData,
        }
    }
}

impl<'p, T, E, C, S, R, N, G> Retry<'p, Result<T, E>, C, S, R, N, G> {
    /// `on_result = f`: an `Ok` value that `f` marks is treated as a transient failure; when the
    /// retries run out, the last `Ok` value is returned.
    pub fn on_result<F: Fn(&T) -> bool>(self, f: F) -> Retry<'p, Result<T, E>, C, S, F, N, G> {
        Retry {
            core: self.core,
            classify: self.classify,
            judge: self.judge,
            sleeper: self.sleeper,
            on_result: f,
            check_result: Some(|f, value| f(value)),
            notify: self.notify,
            call_notify: self.call_notify,
            on_give_up: self.on_give_up,
            call_give_up: self.call_give_up,
            timeout: self.timeout,
            open_error: self.open_error,
            _out: PhantomData,
        }
    }

    /// `notify = f`: called before each pause with the error and a [`RetryEvent`].
    pub fn notify<F: Fn(&E, &RetryEvent)>(
        mut self,
        f: F,
    ) -> Retry<'p, Result<T, E>, C, S, R, F, G> {
        if self.core.started.is_none() {
            self.core.started = Some((self.core.clock)());
        }
        Retry {
            core: self.core,
            classify: self.classify,
            judge: self.judge,
            sleeper: self.sleeper,
            on_result: self.on_result,
            check_result: self.check_result,
            notify: f,
            call_notify: Some(|f, error, event| f(error, event)),
            on_give_up: self.on_give_up,
            call_give_up: self.call_give_up,
            timeout: self.timeout,
            open_error: self.open_error,
            _out: PhantomData,
        }
    }

    /// `on_give_up = f`: called once with the last error when the loop stops retrying a
    /// transient failure (retries used up, deadline, a server-suggested pause too long).
    pub fn on_give_up<F: Fn(&E)>(self, f: F) -> Retry<'p, Result<T, E>, C, S, R, N, F> {
        Retry {
            core: self.core,
            classify: self.classify,
            judge: self.judge,
            sleeper: self.sleeper,
            on_result: self.on_result,
            check_result: self.check_result,
            notify: self.notify,
            call_notify: self.call_notify,
            on_give_up: f,
            call_give_up: Some(|f, error| f(error)),
            timeout: self.timeout,
            open_error: self.open_error,
            _out: PhantomData,
        }
    }

    /// `sleep = f`: pause with `f` instead of tokio's timer; the deadline is then measured on
    /// [`Instant::now`].
    pub fn sleep<F, Fut>(mut self, f: F) -> Retry<'p, Result<T, E>, C, F, R, N, G>
    where
        F: Fn(Duration) -> Fut,
        Fut: SleepFuture,
    {
        self.core.clock = std_now;
        Retry {
            core: self.core,
            classify: self.classify,
            judge: self.judge,
            sleeper: f,
            on_result: self.on_result,
            check_result: self.check_result,
            notify: self.notify,
            call_notify: self.call_notify,
            on_give_up: self.on_give_up,
            call_give_up: self.call_give_up,
            timeout: self.timeout,
            open_error: self.open_error,
            _out: PhantomData,
        }
    }

    /// `timeout = "2s"`: each attempt is cut off after `limit` (clipped to the time left before
    /// the deadline) and counts as a transient failure.
    pub fn timeout(mut self, limit: Duration) -> Self
    where
        E: FromElapsed,
    {
        if self.core.started.is_none() && self.core.policy.time_budget().is_some() {
            self.core.started = Some((self.core.clock)());
        }
        self.timeout = Some((limit, |elapsed| Err(E::from_elapsed(elapsed))));
        self
    }

    /// The idempotency key of a `#[non_idempotent]` function, for [`attempt()`](crate::attempt).
    pub fn key<K: KeyParam + Sync>(mut self, key: &'p K) -> Self {
        self.core.key = Some(key);
        self
    }

    /// `budget = B`: retries draw from a shared [`RetryBudget`]; this call's first attempt
    /// deposits into it. When it is empty the loop returns the current error at once.
    pub fn budget(mut self, budget: &'p RetryBudget) -> Self {
        budget.deposit();
        self.core.budget = Some(budget);
        self
    }

    /// `breaker = B`: while the [`CircuitBreaker`] is open, the function returns
    /// `E::from(CircuitOpen)` at once without running the body; every attempt feeds it.
    pub fn breaker(mut self, breaker: &'p CircuitBreaker) -> Self
    where
        E: FromCircuitOpen,
    {
        self.core.breaker = Some(breaker);
        self.open_error = Some(|open| Err(E::from_circuit_open(open)));
        self
    }

    /// `nested = retry`: keep retrying even inside another retrying function.
    pub fn nested_retry(mut self) -> Self {
        self.core.nested_retry = true;
        self
    }

    /// Runs one attempt of a sync function, with the attempt context in place.
    #[inline(always)]
    pub fn attempt(&mut self, body: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
        if let (Err(open), Some(open_error)) = (self.core.admit(), self.open_error) {
            return open_error(open);
        }
        let frame = self.core.frame();
        let mut owned_key = self.core.key.map(KeyParam::to_key);
        let key = if frame.has_key {
            Some(&mut owned_key)
        } else {
            None
        };
        let _entered = Enter::new(frame, key);
        body()
    }

    /// Runs one attempt of an async function, with the attempt context in place on every poll.
    pub async fn run(&mut self, body: impl Future<Output = Result<T, E>>) -> Result<T, E> {
        if let (Err(open), Some(open_error)) = (self.core.admit(), self.open_error) {
            return open_error(open);
        }
        Scoped::new(self.core.frame(), self.core.key.map(KeyParam::to_key), body).await
    }

    /// [`run`](Retry::run) with `timeout`: the attempt races the timer, whose limit is clipped to
    /// the time left before the deadline. A separate method, so that a function without a
    /// timeout does not carry a timer in its future.
    pub async fn run_timed(&mut self, body: impl Future<Output = Result<T, E>>) -> Result<T, E>
    where
        S: Sleeper,
    {
        if let (Err(open), Some(open_error)) = (self.core.admit(), self.open_error) {
            return open_error(open);
        }
        let attempt = Scoped::new(self.core.frame(), self.core.key.map(KeyParam::to_key), body);
        let Some((limit, on_elapsed)) = self.timeout else {
            return attempt.await;
        };
        let limit = match (self.core.policy.time_budget(), self.core.started) {
            (Some(budget), Some(_)) => limit.min(budget.saturating_sub(self.core.elapsed())),
            _ => limit,
        };
        self.core.timed_out = false;
        match Timed::new(attempt, self.sleeper.sleep(limit), limit).await {
            Ok(outcome) => outcome,
            Err(elapsed) => {
                self.core.timed_out = true;
                on_elapsed(elapsed)
            }
        }
    }

    /// The pause of an async function. The timer is boxed: it is only needed once an attempt
    /// has failed, and inline it would make every call's future several times larger, which
    /// costs the happy path. A zero pause is not slept (tokio's timer would round it up to its
    /// 1 ms tick).
    pub async fn pause(&self, pause: Duration)
    where
        S: Sleeper,
    {
        if crate::testing::record_pause(pause) || pause.is_zero() {
            return;
        }
        Box::pin(self.sleeper.sleep(pause)).await;
    }

    /// The pause of a sync function.
    pub fn pause_blocking(&self, pause: Duration) {
        if !crate::testing::record_pause(pause) && !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }

    /// Decides what follows an attempt: return its result, or pause and try again.
    #[inline(always)]
    pub fn next(&mut self, outcome: Result<T, E>) -> ControlFlow<Result<T, E>, Duration>
    where
        E: LoggableError,
    {
        if self.core.refused {
            return self.refused(outcome);
        }
        match outcome {
            Ok(value) if !self.rejects(&value) => {
                self.core.record(false);
                ControlFlow::Break(Ok(value))
            }
            Ok(value) => self.after_rejected_value(value),
            Err(error) => self.after_error(error),
        }
    }

    #[cold]
    fn refused(&mut self, outcome: Result<T, E>) -> ControlFlow<Result<T, E>, Duration> {
        #[cfg(feature = "tracing")]
        tracing::warn!(
            function = self.core.name,
            "circuit open: not calling the service"
        );
        ControlFlow::Break(outcome)
    }

    #[inline(always)]
    fn rejects(&self, value: &T) -> bool {
        self.check_result
            .is_some_and(|check| check(&self.on_result, value))
    }

    #[cold]
    fn after_error(&mut self, error: E) -> ControlFlow<Result<T, E>, Duration>
    where
        E: LoggableError,
    {
        let verdict = if self.core.timed_out {
            Verdict::Retry
        } else {
            (self.judge)(&self.classify, &error)
        };
        self.core.record(verdict.is_retry());
        match self.after_failure(verdict) {
            Ok(pause) => {
                let event = RetryEvent {
                    function: self.core.name,
                    attempt: self.core.retries,
                    pause,
                    elapsed: self.core.elapsed(),
                };
                log_retry(&event, &error);
                if let Some(notify) = self.call_notify {
                    notify(&self.notify, &error, &event);
                }
                ControlFlow::Continue(pause)
            }
            // Not giving up: a permanent error is an answer, and under a retrying layer that
            // layer decides (`log_nested` said so at debug).
            Err(GiveUp::Permanent | GiveUp::Nested) => ControlFlow::Break(Err(error)),
            Err(reason) => {
                log_give_up(self.core.name, self.core.retries + 1, reason, &error);
                if let Some(give_up) = self.call_give_up {
                    give_up(&self.on_give_up, &error);
                }
                ControlFlow::Break(Err(error))
            }
        }
    }

    /// An `Ok` value that `on_result` marks: a transient failure, but when the loop stops, the
    /// value is what the function returns.
    #[cold]
    fn after_rejected_value(&mut self, value: T) -> ControlFlow<Result<T, E>, Duration> {
        self.core.record(true);
        match self.after_failure(Verdict::Retry) {
            Ok(_pause) => {
                #[cfg(feature = "tracing")]
                tracing::info!(
                    function = self.core.name,
                    attempt = self.core.retries,
                    pause = ?_pause,
                    "result rejected by `on_result`; retrying"
                );
                ControlFlow::Continue(_pause)
            }
            Err(_reason) => {
                #[cfg(feature = "tracing")]
                if _reason != GiveUp::Nested {
                    tracing::warn!(
                        function = self.core.name,
                        attempts = self.core.retries + 1,
                        reason = %_reason,
                        "giving up; returning the last result rejected by `on_result`"
                    );
                }
                ControlFlow::Break(Ok(value))
            }
        }
    }

    /// The pause before the next attempt, or why there is none.
    fn after_failure(&mut self, verdict: Verdict) -> Result<Duration, GiveUp> {
        let core = &mut self.core;
        if !verdict.is_retry() {
            return Err(GiveUp::Permanent);
        }
        if core.retried_above && !core.nested_retry {
            log_nested(core.name);
            return Err(GiveUp::Nested);
        }
        if core.retries >= core.policy.retries() {
            return Err(GiveUp::Exhausted);
        }
        let retry = core.retries + 1;
        let mut pause = core.policy.delay(retry, core.previous_pause);
        if let Some(asked) = verdict.suggested_pause() {
            if asked > core.policy.delay_cap() {
                return Err(GiveUp::SuggestedTooLong(asked));
            }
            pause = pause.max(asked);
        }
        if let Some(budget) = core.policy.time_budget() {
            if core.elapsed().saturating_add(pause) > budget {
                return Err(GiveUp::Deadline);
            }
        }
        if let Some(budget) = core.budget {
            if !budget.try_withdraw((core.clock)()) {
                return Err(GiveUp::Budget);
            }
        }
        core.retries = retry;
        core.previous_pause = pause;
        Ok(pause)
    }

    /// Retries taken so far.
    pub fn retries(&self) -> u32 {
        self.core.retries
    }
}

/// Why the loop stopped retrying.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GiveUp {
    /// Not a transient failure: returned at once, not logged as giving up.
    Permanent,
    Exhausted,
    Deadline,
    SuggestedTooLong(Duration),
    Nested,
    Budget,
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GiveUp::Permanent => f.write_str("not transient"),
            GiveUp::Exhausted => f.write_str("retries used up"),
            GiveUp::Deadline => f.write_str("the next pause would end past the deadline"),
            GiveUp::SuggestedTooLong(d) => write!(
                f,
                "the server asked for a {d:?} pause, longer than `max_delay`"
            ),
            GiveUp::Nested => f.write_str("a layer above retries"),
            GiveUp::Budget => f.write_str("the retry budget is empty"),
        }
    }
}

#[cfg(feature = "tracing")]
fn log_retry<E: fmt::Debug>(event: &RetryEvent, error: &E) {
    tracing::info!(
        function = event.function,
        attempt = event.attempt,
        pause = ?event.pause,
        error = ?error,
        "attempt failed; retrying"
    );
}

#[cfg(not(feature = "tracing"))]
fn log_retry<E>(_: &RetryEvent, _: &E) {}

#[cfg(feature = "tracing")]
fn log_give_up<E: fmt::Debug>(function: &'static str, attempts: u32, reason: GiveUp, error: &E) {
    tracing::warn!(function, attempts, reason = %reason, error = ?error, "giving up");
}

#[cfg(not(feature = "tracing"))]
fn log_give_up<E>(_: &'static str, _: u32, _: GiveUp, _: &E) {}

fn log_nested(_function: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        function = _function,
        "not retrying: a layer above retries this work (write `nested = retry` to retry here too)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Jitter;

    fn transient(_: &&'static str) -> bool {
        true
    }

    #[test]
    fn ok_breaks_at_once() {
        let policy = Policy::new();
        let mut retry = Retry::<Result<i32, &str>>::start(&policy, "f", transient);
        assert_eq!(retry.next(Ok(1)), ControlFlow::Break(Ok(1)));
        assert_eq!(retry.retries(), 0);
    }

    #[test]
    fn transient_errors_pause_until_the_limit() {
        let policy = Policy::new().max_retries(2).jitter(Jitter::None);
        let mut retry = Retry::<Result<(), &str>>::start(&policy, "f", transient);
        let s = Duration::from_secs(1);
        assert_eq!(retry.next(Err("a")), ControlFlow::Continue(s));
        assert_eq!(retry.next(Err("b")), ControlFlow::Continue(2 * s));
        assert_eq!(retry.next(Err("c")), ControlFlow::Break(Err("c")));
    }

    #[test]
    fn permanent_errors_break_at_once() {
        let policy = Policy::new();
        let mut retry = Retry::<Result<(), &str>>::start(&policy, "f", |_: &&str| false);
        assert_eq!(retry.next(Err("no")), ControlFlow::Break(Err("no")));
    }

    #[test]
    fn a_pause_past_the_deadline_is_not_taken() {
        let policy = Policy::new()
            .jitter(Jitter::None)
            .deadline(Duration::from_millis(2500));
        let mut retry = Retry::<Result<(), &str>>::start(&policy, "f", transient);
        // 1 s fits; after 1 s more, 2 s does not.
        assert!(retry.next(Err("a")).is_continue());
        retry.core.started = retry.core.started.map(|t| t - Duration::from_secs(1));
        assert_eq!(retry.next(Err("b")), ControlFlow::Break(Err("b")));
    }

    #[test]
    fn a_suggested_pause_is_a_floor_and_too_long_gives_up() {
        let policy = Policy::new()
            .jitter(Jitter::None)
            .max_delay(Duration::from_secs(10));
        let suggest = |e: &Duration| Verdict::RetryAfter(*e);
        let mut retry = Retry::<Result<(), Duration>>::start(&policy, "f", suggest);
        let s = Duration::from_secs(1);
        assert_eq!(retry.next(Err(3 * s)), ControlFlow::Continue(3 * s));
        assert_eq!(
            retry.next(Err(Duration::ZERO)),
            ControlFlow::Continue(2 * s)
        );
        assert_eq!(retry.next(Err(11 * s)), ControlFlow::Break(Err(11 * s)));
    }
}

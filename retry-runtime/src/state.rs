//! The loop's state machine: one decision per attempt outcome.

use crate::breaker::FromCircuitOpen;
use crate::context::{self, Enter, Frame, KeySlot, Scoped};
use crate::timer::{Elapsed, FromElapsed, SleepFuture, Sleeper, Timed};
use crate::{Admission, CircuitBreaker, CircuitOpen, IdempotencyKey, Policy, RetryBudget, Verdict};
use std::fmt;
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
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
/// The happy path is what the layout serves. Everything an option adds lives in a type
/// parameter that is the zero-sized [`Unset`] when the option is not written (`R`, `N`, `G` for
/// the hooks, `X` for timeout, key, budget, breaker and `nested`), so a function that uses none
/// of them carries only the policy, its name, the classifier and two small words of progress.
/// The decision after a failure is out of line and takes that progress by value, so on the
/// happy path it stays in registers and the compiler folds every constant.
///
/// Each user-supplied callable is stored with a function pointer that calls it, made where its
/// bound is checked (in `start` and the builders): a mistyped classifier or hook is one error
/// there, not a second one at every use.
pub struct Retry<'p, Out: Outcome, C = Unset, S = Unset, R = Unset, N = Unset, G = Unset, X = Unset>
{
    site: Site<'p>,
    progress: Progress,
    classify: C,
    judge: fn(&C, &Out::Error) -> Verdict,
    sleeper: S,
    on_result: R,
    notify: N,
    on_give_up: G,
    extras: X,
}

/// What is fixed for the whole call.
#[derive(Clone, Copy)]
struct Site<'p> {
    policy: &'p Policy,
    name: &'static str,
    clock: fn() -> Instant,
}

/// What changes from attempt to attempt: small and `Copy`, handed by value to the decision after
/// a failure and back, so that nothing of the loop state has to live in memory on the happy
/// path.
#[derive(Clone, Copy)]
struct Progress {
    /// Retries taken so far; the attempt that just ended is number `retries + 1`.
    retries: u32,
    /// An enclosing annotated function or `scope::caller_retries` retries this work.
    retried_above: bool,
    /// The pause `next` decided last, in nanoseconds: the one to take now, and the previous one
    /// for decorrelated jitter. Eight bytes, not a `Duration`'s sixteen, because an async
    /// function's future holds this across every attempt.
    previous_pause: u64,
    started: Option<Instant>,
}

impl Progress {
    fn elapsed(&self, clock: fn() -> Instant) -> Duration {
        self.started
            .map_or(Duration::ZERO, |t| clock().saturating_duration_since(t))
    }
}

/// The options that have no hook of their own: `timeout`, the idempotency key, `budget`,
/// `breaker` and `nested = retry`, with the state they need. Present only when one of them is
/// written; otherwise the loop carries [`Unset`] in its place.
pub struct Extras<'p, Out> {
    /// A per-attempt time limit, and how to turn its expiry into the function's error.
    timeout: Option<Timeout<Out>>,
    /// The function's key parameter, turned into an [`IdempotencyKey`] only while an attempt runs.
    key: Option<&'p (dyn KeyParam + Sync)>,
    budget: Option<&'p RetryBudget>,
    /// The breaker, and how to turn its refusal into the function's error.
    breaker: Option<Guard<'p, Out>>,
    /// The breaker's permission for the attempt under way, recorded when the attempt ends; a
    /// trial dropped unrecorded (a cancelled call) counts as failed, by `Admission`'s own drop.
    admission: Option<Admission<'p>>,
    /// `nested = retry`: retry even when a layer above does.
    nested_retry: bool,
    /// The attempt that just ended was cut off by the timeout.
    timed_out: bool,
    /// The breaker refused the attempt that just "ended": return its error at once.
    refused: bool,
}

/// A per-attempt time limit, and how to turn its expiry into the function's error.
type Timeout<Out> = (Duration, fn(Elapsed) -> Out);

/// A circuit breaker, and how to turn its refusal into the function's error.
type Guard<'p, Out> = (&'p CircuitBreaker, fn(CircuitOpen) -> Out);

impl<Out> Default for Extras<'_, Out> {
    fn default() -> Self {
        Extras {
            timeout: None,
            key: None,
            budget: None,
            breaker: None,
            admission: None,
            nested_retry: false,
            timed_out: false,
            refused: false,
        }
    }
}

impl<'p, Out> Extras<'p, Out> {
    /// Asks the breaker, if any, to let the next attempt through; its refusal as the function's
    /// result.
    #[inline]
    fn admit(&mut self, clock: fn() -> Instant) -> Result<(), Out> {
        let Some((breaker, open_error)) = self.breaker else {
            return Ok(());
        };
        match breaker.admit(clock()) {
            Ok(admission) => {
                self.admission = Some(admission);
                Ok(())
            }
            Err(open) => {
                self.refused = true;
                Err(open_error(open))
            }
        }
    }

    /// Tells the breaker, if any, how the attempt went: a transient failure counts against the
    /// service; a success or a permanent error (the service answered) counts for it.
    #[inline]
    fn record(&mut self, service_failed: bool, clock: fn() -> Instant) {
        if let Some(admission) = self.admission.take() {
            admission.record(!service_failed, clock());
        }
    }
}

/// [`Unset`] or [`Extras`]: the loop asks for the extras through this, so an unset one is
/// `None` at compile time and costs nothing.
pub trait MaybeExtras<'p, Out>: WithKey {
    /// The extras, if any option put them in place.
    fn get(&self) -> Option<&Extras<'p, Out>>;
    /// The extras, mutably.
    fn get_mut(&mut self) -> Option<&mut Extras<'p, Out>>;
    /// The extras, made if none were yet.
    fn into_extras(self) -> Extras<'p, Out>;
}

/// Where an attempt keeps the key: `()` without extras, so a function without a key carries
/// nothing for it. Apart from [`MaybeExtras`] and without its lifetime, so that an async
/// function's future, whose lifetimes the compiler erases, can still name the key's type.
pub trait WithKey {
    /// `()` or `Option<IdempotencyKey>`.
    type Key: KeySlot;
    /// The key for the next attempt.
    fn key(&self) -> Self::Key;
}

impl WithKey for Unset {
    type Key = ();
    #[inline(always)]
    fn key(&self) {}
}

impl<Out> WithKey for Extras<'_, Out> {
    type Key = Option<IdempotencyKey>;
    #[inline]
    fn key(&self) -> Option<IdempotencyKey> {
        self.key.map(KeyParam::to_key)
    }
}

impl<'p, Out> MaybeExtras<'p, Out> for Unset {
    #[inline(always)]
    fn get(&self) -> Option<&Extras<'p, Out>> {
        None
    }
    #[inline(always)]
    fn get_mut(&mut self) -> Option<&mut Extras<'p, Out>> {
        None
    }
    fn into_extras(self) -> Extras<'p, Out> {
        Extras::default()
    }
}

impl<'p, Out> MaybeExtras<'p, Out> for Extras<'p, Out> {
    #[inline(always)]
    fn get(&self) -> Option<&Extras<'p, Out>> {
        Some(self)
    }
    #[inline(always)]
    fn get_mut(&mut self) -> Option<&mut Extras<'p, Out>> {
        Some(self)
    }
    fn into_extras(self) -> Extras<'p, Out> {
        self
    }
}

/// `on_result = f`, with the pointer that calls it.
pub struct OnResult<F, T> {
    f: F,
    call: fn(&F, &T) -> bool,
}

/// [`Unset`] or [`OnResult`]: whether an `Ok` value is to be treated as a failure.
pub trait ResultCheck<T> {
    /// `true` when `on_result` marks the value.
    fn rejects(&self, value: &T) -> bool;
}

impl<T> ResultCheck<T> for Unset {
    #[inline(always)]
    fn rejects(&self, _: &T) -> bool {
        false
    }
}

impl<F, T> ResultCheck<T> for OnResult<F, T> {
    #[inline(always)]
    fn rejects(&self, value: &T) -> bool {
        (self.call)(&self.f, value)
    }
}

/// `notify = f`, with the pointer that calls it.
pub struct Notify<F, E> {
    f: F,
    call: fn(&F, &E, &RetryEvent),
}

/// `on_give_up = f`, with the pointer that calls it.
pub struct OnGiveUp<F, E> {
    f: F,
    call: fn(&F, &E),
}

/// [`Unset`], [`Notify`] or [`OnGiveUp`]: a hook called with the error.
pub trait ErrorHook<E, A> {
    /// Calls the hook, if there is one.
    fn call(&self, error: &E, with: A);
}

impl<E, A> ErrorHook<E, A> for Unset {
    #[inline(always)]
    fn call(&self, _: &E, _: A) {}
}

impl<F, E> ErrorHook<E, &RetryEvent> for Notify<F, E> {
    fn call(&self, error: &E, event: &RetryEvent) {
        (self.call)(&self.f, error, event)
    }
}

impl<F, E> ErrorHook<E, ()> for OnGiveUp<F, E> {
    fn call(&self, error: &E, (): ()) {
        (self.call)(&self.f, error)
    }
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
        Retry::with_parts(policy, name, std_now, classify, Unset)
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
        Retry::with_parts(policy, name, tokio_now, classify, crate::timer::TokioTimer)
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
        Retry::with_parts(policy, name, std_now, classify, crate::timer::NoTimer)
    }
}

impl<'p, T, E, C, S> Retry<'p, Result<T, E>, C, S> {
    /// `classify`'s bound is checked here, once, and turned into `judge`, which `next` calls
    /// without a bound of its own.
    #[inline(always)]
    fn with_parts<V>(
        policy: &'p Policy,
        name: &'static str,
        clock: fn() -> Instant,
        classify: C,
        sleeper: S,
    ) -> Self
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry {
            site: Site {
                policy,
                name,
                clock,
            },
            progress: Progress {
                retries: 0,
                retried_above: context::current().retried_above,
                previous_pause: 0,
                started: policy.get_deadline().map(|_| clock()),
            },
            classify,
            judge: |c, e| c(e).into_verdict(),
            sleeper,
            on_result: Unset,
            notify: Unset,
            on_give_up: Unset,
            extras: Unset,
        }
    }
}

// The builders' return types spell out the state's type parameters; an alias would only hide them.
#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, R, N, G, X> Retry<'p, Result<T, E>, C, S, R, N, G, X> {
    /// The same state with its option parts (sleeper, hooks, extras) replaced by `f`: the one
    /// place that lists every field, for the builders.
    #[inline(always)]
    fn with_options<S2, R2, N2, G2, X2>(
        self,
        f: impl FnOnce(S, R, N, G, X) -> (S2, R2, N2, G2, X2),
    ) -> Retry<'p, Result<T, E>, C, S2, R2, N2, G2, X2> {
        let (sleeper, on_result, notify, on_give_up, extras) = f(
            self.sleeper,
            self.on_result,
            self.notify,
            self.on_give_up,
            self.extras,
        );
        Retry {
            site: self.site,
            progress: self.progress,
            classify: self.classify,
            judge: self.judge,
            sleeper,
            on_result,
            notify,
            on_give_up,
            extras,
        }
    }

    /// The state with its extras in place, to set one of them.
    #[inline(always)]
    fn extended(self) -> Retry<'p, Result<T, E>, C, S, R, N, G, Extras<'p, Result<T, E>>>
    where
        X: MaybeExtras<'p, Result<T, E>>,
    {
        self.with_options(|s, r, n, g, x| (s, r, n, g, x.into_extras()))
    }

    /// `on_result = f`: an `Ok` value that `f` marks is treated as a transient failure; when the
    /// retries run out, the last `Ok` value is returned.
    pub fn on_result<F: Fn(&T) -> bool>(
        self,
        f: F,
    ) -> Retry<'p, Result<T, E>, C, S, OnResult<F, T>, N, G, X> {
        let hook = OnResult {
            f,
            call: |f, value| f(value),
        };
        self.with_options(|s, _, n, g, x| (s, hook, n, g, x))
    }

    /// `notify = f`: called before each pause with the error and a [`RetryEvent`].
    pub fn notify<F: Fn(&E, &RetryEvent)>(
        mut self,
        f: F,
    ) -> Retry<'p, Result<T, E>, C, S, R, Notify<F, E>, G, X> {
        if self.progress.started.is_none() {
            self.progress.started = Some((self.site.clock)());
        }
        let hook = Notify {
            f,
            call: |f, error, event| f(error, event),
        };
        self.with_options(|s, r, _, g, x| (s, r, hook, g, x))
    }

    /// `on_give_up = f`: called once with the last error when the loop stops retrying a
    /// transient failure (retries used up, deadline, a server-suggested pause too long).
    pub fn on_give_up<F: Fn(&E)>(
        self,
        f: F,
    ) -> Retry<'p, Result<T, E>, C, S, R, N, OnGiveUp<F, E>, X> {
        let hook = OnGiveUp {
            f,
            call: |f, error| f(error),
        };
        self.with_options(|s, r, n, _, x| (s, r, n, hook, x))
    }

    /// `sleep = f`: pause with `f` instead of tokio's timer; the deadline is then measured on
    /// [`Instant::now`].
    pub fn sleep<F, Fut>(mut self, f: F) -> Retry<'p, Result<T, E>, C, F, R, N, G, X>
    where
        F: Fn(Duration) -> Fut,
        Fut: SleepFuture,
    {
        self.site.clock = std_now;
        if self.progress.started.is_some() {
            self.progress.started = Some(std_now());
        }
        self.with_options(|_, r, n, g, x| (f, r, n, g, x))
    }

    /// `timeout = "2s"`: each attempt is cut off after `limit` (clipped to the time left before
    /// the deadline) and counts as a transient failure.
    pub fn timeout(
        self,
        limit: Duration,
    ) -> Retry<'p, Result<T, E>, C, S, R, N, G, Extras<'p, Result<T, E>>>
    where
        E: FromElapsed,
        X: MaybeExtras<'p, Result<T, E>>,
    {
        let mut this = self.extended();
        this.extras.timeout = Some((limit, |elapsed| Err(E::from_elapsed(elapsed))));
        this
    }

    /// The idempotency key of a `#[non_idempotent]` function, for [`attempt()`](crate::attempt).
    pub fn key<K: KeyParam + Sync>(
        self,
        key: &'p K,
    ) -> Retry<'p, Result<T, E>, C, S, R, N, G, Extras<'p, Result<T, E>>>
    where
        X: MaybeExtras<'p, Result<T, E>>,
    {
        let mut this = self.extended();
        this.extras.key = Some(key);
        this
    }

    /// `budget = B`: retries draw from a shared [`RetryBudget`]; this call's first attempt
    /// deposits into it. When it is empty the loop returns the current error at once.
    pub fn budget(
        self,
        budget: &'p RetryBudget,
    ) -> Retry<'p, Result<T, E>, C, S, R, N, G, Extras<'p, Result<T, E>>>
    where
        X: MaybeExtras<'p, Result<T, E>>,
    {
        budget.deposit();
        let mut this = self.extended();
        this.extras.budget = Some(budget);
        this
    }

    /// `breaker = B`: while the [`CircuitBreaker`] is open, the function returns
    /// `E::from(CircuitOpen)` at once without running the body; every attempt feeds it.
    pub fn breaker(
        self,
        breaker: &'p CircuitBreaker,
    ) -> Retry<'p, Result<T, E>, C, S, R, N, G, Extras<'p, Result<T, E>>>
    where
        E: FromCircuitOpen,
        X: MaybeExtras<'p, Result<T, E>>,
    {
        let mut this = self.extended();
        this.extras.breaker = Some((breaker, |open| Err(E::from_circuit_open(open))));
        this
    }

    /// `nested = retry`: keep retrying even inside another retrying function.
    pub fn nested_retry(self) -> Retry<'p, Result<T, E>, C, S, R, N, G, Extras<'p, Result<T, E>>>
    where
        X: MaybeExtras<'p, Result<T, E>>,
    {
        let mut this = self.extended();
        this.extras.nested_retry = true;
        this
    }

    /// The frame the next attempt runs in, with its key if the function has one; or the
    /// breaker's refusal.
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    fn enter(&mut self) -> Result<(Frame, X::Key), Result<T, E>>
    where
        X: MaybeExtras<'p, Result<T, E>>,
    {
        if let Some(extras) = self.extras.get_mut() {
            extras.admit(self.site.clock)?;
        }
        let mut key = self.extras.key();
        let frame = Frame {
            attempt: self.progress.retries + 1,
            has_key: key.slot().is_some(),
            retried_above: self.progress.retried_above || self.site.policy.get_max() > 0,
        };
        Ok((frame, key))
    }

    /// Runs one attempt of a sync function, with the attempt context in place.
    #[inline(always)]
    pub fn attempt(&mut self, body: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        X: MaybeExtras<'p, Result<T, E>>,
    {
        let (frame, mut key) = match self.enter() {
            Ok(entered) => entered,
            Err(refused) => return refused,
        };
        let _entered = Enter::new(frame, key.slot());
        body()
    }

    /// Runs one attempt of an async function, with the attempt context in place on every poll.
    /// The returned future holds only the frame, the key if there is one, and the body's
    /// future, not the loop state.
    #[inline(always)]
    pub fn run<F>(&mut self, body: F) -> Run<F, X::Key, Result<T, E>>
    where
        F: Future<Output = Result<T, E>>,
        X: MaybeExtras<'p, Result<T, E>>,
    {
        match self.enter() {
            Ok((frame, key)) => Run::Attempt {
                scoped: Scoped::new(frame, key, body),
            },
            Err(refused) => Run::Refused {
                outcome: Some(refused),
            },
        }
    }

    /// [`run`](Retry::run) with `timeout`: the attempt races the timer, whose limit is clipped to
    /// the time left before the deadline. A separate method, so that a function without a
    /// timeout does not carry a timer in its future.
    pub async fn run_timed(&mut self, body: impl Future<Output = Result<T, E>>) -> Result<T, E>
    where
        S: Sleeper,
        X: MaybeExtras<'p, Result<T, E>>,
    {
        let (frame, key) = match self.enter() {
            Ok(entered) => entered,
            Err(refused) => return refused,
        };
        let attempt = Scoped::new(frame, key, body);
        let Some((limit, on_elapsed)) = self.extras.get().and_then(|x| x.timeout) else {
            return attempt.await;
        };
        let limit = match (self.site.policy.get_deadline(), self.progress.started) {
            (Some(budget), Some(_)) => {
                limit.min(budget.saturating_sub(self.progress.elapsed(self.site.clock)))
            }
            _ => limit,
        };
        let outcome = match Timed::new(attempt, self.sleeper.sleep(limit), limit).await {
            Ok(outcome) => Ok(outcome),
            Err(elapsed) => Err(on_elapsed(elapsed)),
        };
        if let Some(extras) = self.extras.get_mut() {
            extras.timed_out = outcome.is_err();
        }
        outcome.unwrap_or_else(|timed_out| timed_out)
    }

    /// The pause of an async function. The timer is boxed and the future holds nothing else:
    /// it is only needed once an attempt has failed, and anything inline would make every
    /// call's future larger, which costs the happy path. A zero pause is not slept (tokio's
    /// timer would round it up to its 1 ms tick).
    ///
    /// The future is opaque, so that a `sleep = f` that is not an async sleep is one error, at
    /// `sleep`, and not a second one here.
    pub fn pause(&self) -> impl Future<Output = ()> + use<'p, T, E, C, S, R, N, G, X>
    where
        S: Sleeper,
    {
        let pause = self.decided_pause();
        if crate::testing::record_pause(pause) || pause.is_zero() {
            return Pause(None);
        }
        Pause(Some(Box::pin(self.sleeper.sleep(pause))))
    }

    /// The pause before the next attempt, as `next` decided it.
    fn decided_pause(&self) -> Duration {
        Duration::from_nanos(self.progress.previous_pause)
    }

    /// The pause of a sync function.
    pub fn pause_blocking(&self) {
        let pause = self.decided_pause();
        if !crate::testing::record_pause(pause) && !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }

    /// Decides what follows an attempt: `Break` with the function's result, or `Continue` with
    /// the state for the next attempt, whose [`pause`](Retry::pause) is then taken.
    ///
    /// The state is taken and given back by value. An accepted `Ok` is decided here, inline;
    /// anything else goes to `decide`, out of line, with the state taken apart into separate
    /// locals on that branch alone. Nothing of the state has its address taken on the happy path,
    /// so the compiler keeps it in registers and constants instead of storing it up front.
    #[inline(always)]
    pub fn next(mut self, outcome: Result<T, E>) -> ControlFlow<Result<T, E>, Self>
    where
        E: LoggableError,
        R: ResultCheck<T>,
        N: for<'e> ErrorHook<E, &'e RetryEvent>,
        G: ErrorHook<E, ()>,
        X: MaybeExtras<'p, Result<T, E>>,
    {
        let refused = self.extras.get().is_some_and(|x| x.refused);
        match outcome {
            Ok(value) if !refused && !self.on_result.rejects(&value) => {
                if let Some(extras) = self.extras.get_mut() {
                    extras.record(false, self.site.clock);
                }
                ControlFlow::Break(Ok(value))
            }
            outcome => self.after(outcome),
        }
    }

    /// `next` for anything but an accepted `Ok`.
    #[inline(always)]
    fn after(self, outcome: Result<T, E>) -> ControlFlow<Result<T, E>, Self>
    where
        E: LoggableError,
        N: for<'e> ErrorHook<E, &'e RetryEvent>,
        G: ErrorHook<E, ()>,
        X: MaybeExtras<'p, Result<T, E>>,
    {
        let Retry {
            site,
            mut progress,
            classify,
            judge,
            sleeper,
            on_result,
            notify,
            on_give_up,
            mut extras,
        } = self;
        let flow = decide(
            site.policy,
            site.name,
            site.clock,
            &mut progress,
            (&classify, judge),
            &notify,
            &on_give_up,
            extras.get_mut(),
            outcome,
        );
        match flow {
            ControlFlow::Break(result) => ControlFlow::Break(result),
            ControlFlow::Continue(()) => ControlFlow::Continue(Retry {
                site,
                progress,
                classify,
                judge,
                sleeper,
                on_result,
                notify,
                on_give_up,
                extras,
            }),
        }
    }

    /// Retries taken so far.
    pub fn retries(&self) -> u32 {
        self.progress.retries
    }
}

pin_project_lite::pin_project! {
    /// One attempt of an async function: the body with its frame in place, or the breaker's
    /// refusal, returned without running the body.
    #[project = RunProj]
    #[allow(missing_docs)] // the fields are described with their variants
    pub enum Run<F, K, Out> {
        /// The body runs.
        Attempt { #[pin] scoped: Scoped<F, K> },
        /// The breaker refused; its refusal as the function's result, until it is returned.
        Refused { outcome: Option<Out> },
    }
}

impl<F: Future<Output = Out>, K: KeySlot, Out> Future for Run<F, K, Out> {
    type Output = Out;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Out> {
        match self.project() {
            RunProj::Attempt { scoped } => scoped.poll(cx),
            RunProj::Refused { outcome } => match outcome.take() {
                Some(outcome) => Poll::Ready(outcome),
                None => Poll::Pending,
            },
        }
    }
}

/// The pause of an async function: a boxed timer, or nothing for a pause that is not slept.
pub struct Pause<F>(Option<Pin<Box<F>>>);

impl<F: Future<Output = ()>> Future for Pause<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        match &mut self.0 {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }
}

/// What follows an attempt that did not end in an accepted `Ok`: the breaker refused it, it
/// failed, or `on_result` rejected its value. Out of line and cold: the happy path never comes
/// here. Its arguments are separate words rather than one struct, so that they travel in
/// registers and nothing of the loop state has to be stored in memory before the first attempt.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn decide<'p, T, E, C, N, G>(
    policy: &'p Policy,
    name: &'static str,
    clock: fn() -> Instant,
    progress: &mut Progress,
    (classify, judge): (&C, fn(&C, &E) -> Verdict),
    notify: &N,
    on_give_up: &G,
    mut extras: Option<&mut Extras<'p, Result<T, E>>>,
    outcome: Result<T, E>,
) -> ControlFlow<Result<T, E>>
where
    E: LoggableError,
    N: for<'e> ErrorHook<E, &'e RetryEvent>,
    G: ErrorHook<E, ()>,
{
    let site = Site {
        policy,
        name,
        clock,
    };
    if extras.as_ref().is_some_and(|x| x.refused) {
        #[cfg(feature = "tracing")]
        tracing::warn!(
            function = site.name,
            "circuit open: not calling the service"
        );
        return ControlFlow::Break(outcome);
    }
    let error = match outcome {
        Err(error) => error,
        // `on_result` marked the value: a transient failure, but when the loop stops, the
        // value is what the function returns.
        Ok(value) => {
            if let Some(extras) = extras.as_deref_mut() {
                extras.record(true, site.clock);
            }
            return match after_failure(&site, progress, extras, Verdict::Retry) {
                Ok(_pause) => {
                    #[cfg(feature = "tracing")]
                    tracing::info!(
                        function = site.name,
                        attempt = progress.retries,
                        pause = ?_pause,
                        "result rejected by `on_result`; retrying"
                    );
                    ControlFlow::Continue(())
                }
                Err(_reason) => {
                    #[cfg(feature = "tracing")]
                    if _reason != GiveUp::Nested {
                        tracing::warn!(
                            function = site.name,
                            attempts = progress.retries + 1,
                            reason = %_reason,
                            "giving up; returning the last result rejected by `on_result`"
                        );
                    }
                    ControlFlow::Break(Ok(value))
                }
            };
        }
    };
    let timed_out = extras.as_ref().is_some_and(|x| x.timed_out);
    let verdict = if timed_out {
        Verdict::Retry
    } else {
        judge(classify, &error)
    };
    if let Some(extras) = extras.as_deref_mut() {
        extras.record(verdict.is_retry(), site.clock);
    }
    match after_failure(&site, progress, extras, verdict) {
        Ok(pause) => {
            let event = RetryEvent {
                function: site.name,
                attempt: progress.retries,
                pause,
                elapsed: progress.elapsed(site.clock),
            };
            log_retry(&event, &error);
            notify.call(&error, &event);
            ControlFlow::Continue(())
        }
        // Not giving up: a permanent error is an answer, and under a retrying layer that
        // layer decides (`log_nested` said so at debug).
        Err(GiveUp::Permanent | GiveUp::Nested) => ControlFlow::Break(Err(error)),
        Err(reason) => {
            log_give_up(site.name, progress.retries + 1, reason, &error);
            on_give_up.call(&error, ());
            ControlFlow::Break(Err(error))
        }
    }
}

/// The pause before the next attempt, or why there is none.
fn after_failure<Out>(
    site: &Site<'_>,
    progress: &mut Progress,
    extras: Option<&mut Extras<'_, Out>>,
    verdict: Verdict,
) -> Result<Duration, GiveUp> {
    let policy = site.policy;
    if !verdict.is_retry() {
        return Err(GiveUp::Permanent);
    }
    let nested_retry = extras.as_ref().is_some_and(|x| x.nested_retry);
    if progress.retried_above && !nested_retry {
        log_nested(site.name);
        return Err(GiveUp::Nested);
    }
    if progress.retries >= policy.get_max() {
        return Err(GiveUp::Exhausted);
    }
    let retry = progress.retries + 1;
    let mut pause = policy.delay(retry, Duration::from_nanos(progress.previous_pause));
    if let Some(asked) = verdict.suggested_pause() {
        if asked > policy.get_max_delay() {
            return Err(GiveUp::SuggestedTooLong(asked));
        }
        pause = pause.max(asked);
    }
    if let Some(budget) = policy.get_deadline() {
        if progress.elapsed(site.clock).saturating_add(pause) > budget {
            return Err(GiveUp::Deadline);
        }
    }
    if let Some(budget) = extras.and_then(|x| x.budget) {
        if !budget.try_withdraw((site.clock)()) {
            return Err(GiveUp::Budget);
        }
    }
    progress.retries = retry;
    progress.previous_pause = u64::try_from(pause.as_nanos()).unwrap_or(u64::MAX);
    Ok(pause)
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

    /// The pause before the next attempt and the state for it, or the function's result.
    type Step<'p, T, E, C, S> =
        ControlFlow<Result<T, E>, (Duration, Retry<'p, Result<T, E>, C, S>)>;

    /// What the expansion does with `next`: the pause before the next attempt and the state
    /// for it, or the function's result.
    fn step<T, E: LoggableError, C, S>(
        retry: Retry<'_, Result<T, E>, C, S>,
        outcome: Result<T, E>,
    ) -> Step<'_, T, E, C, S> {
        match retry.next(outcome) {
            ControlFlow::Break(result) => ControlFlow::Break(result),
            ControlFlow::Continue(retry) => ControlFlow::Continue((retry.decided_pause(), retry)),
        }
    }

    /// The pause `step` decided; panics on `Break`.
    fn paused<T: fmt::Debug, E: LoggableError + fmt::Debug, C, S>(
        flow: Step<'_, T, E, C, S>,
    ) -> (Duration, Retry<'_, Result<T, E>, C, S>) {
        match flow {
            ControlFlow::Continue(next) => next,
            ControlFlow::Break(result) => panic!("expected a pause, got {result:?}"),
        }
    }

    #[test]
    fn ok_breaks_at_once() {
        let policy = Policy::new();
        let retry = Retry::<Result<i32, &str>>::start(&policy, "f", transient);
        assert_eq!(retry.retries(), 0);
        assert!(matches!(step(retry, Ok(1)), ControlFlow::Break(Ok(1))));
    }

    #[test]
    fn transient_errors_pause_until_the_limit() {
        let policy = Policy::new().max(2).jitter(Jitter::None);
        let retry = Retry::<Result<(), &str>>::start(&policy, "f", transient);
        let s = Duration::from_secs(1);
        let (pause, retry) = paused(step(retry, Err("a")));
        assert_eq!((pause, retry.retries()), (s, 1));
        let (pause, retry) = paused(step(retry, Err("b")));
        assert_eq!((pause, retry.retries()), (2 * s, 2));
        assert!(matches!(
            step(retry, Err("c")),
            ControlFlow::Break(Err("c"))
        ));
    }

    #[test]
    fn permanent_errors_break_at_once() {
        let policy = Policy::new();
        let retry = Retry::<Result<(), &str>>::start(&policy, "f", |_: &&str| false);
        assert!(matches!(
            step(retry, Err("no")),
            ControlFlow::Break(Err("no"))
        ));
    }

    #[test]
    fn a_pause_past_the_deadline_is_not_taken() {
        let policy = Policy::new()
            .jitter(Jitter::None)
            .deadline(Duration::from_millis(2500));
        let retry = Retry::<Result<(), &str>>::start(&policy, "f", transient);
        // 1 s fits; after 1 s more, 2 s does not.
        let (_, mut retry) = paused(step(retry, Err("a")));
        retry.progress.started = retry.progress.started.map(|t| t - Duration::from_secs(1));
        assert!(matches!(
            step(retry, Err("b")),
            ControlFlow::Break(Err("b"))
        ));
    }

    #[test]
    fn a_suggested_pause_is_a_floor_and_too_long_gives_up() {
        let policy = Policy::new()
            .jitter(Jitter::None)
            .max_delay(Duration::from_secs(10));
        let suggest = |e: &Duration| Verdict::RetryAfter(*e);
        let retry = Retry::<Result<(), Duration>>::start(&policy, "f", suggest);
        let s = Duration::from_secs(1);
        let (pause, retry) = paused(step(retry, Err(3 * s)));
        assert_eq!(pause, 3 * s);
        let (pause, retry) = paused(step(retry, Err(Duration::ZERO)));
        assert_eq!(pause, 2 * s);
        assert!(matches!(step(retry, Err(11 * s)), ControlFlow::Break(Err(e)) if e == 11 * s));
    }
}

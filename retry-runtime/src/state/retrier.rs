//! [`Retrier`]: the attribute's options as methods, for a configuration chosen at run time and a
//! closure; it runs the same [`Retry`] loop.

use super::{
    Attempted, Fallback, FallbackInput, FallbackOutput, GiveUp, GiveUpHook, Hook, Hooks,
    IntoFinish, IntoResultVerdict, IntoVerdict, Log, LogDebug, Logs, MaybeExtras, NotifyHook,
    Outcome, Progress, Retry, RetryEvent, Site, Slot, Unset, level, std_now,
};
use super::{Awaits, Extras};
use crate::breaker::FromCircuitOpen;
use crate::context;
use crate::timer::{FromElapsed, IntoSleeper, Sleeper};
use crate::{Backoff, CircuitBreaker, Jitter, Policy, RetryBudget, Transient, Verdict};
use hooks_alias::{Classify, Notify, OnResult};
use std::future::Future;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

mod hooks_alias {
    pub(super) use super::super::hooks::{Classify, Notify, OnResult};
}

/// The timer of [`Retrier::run_async`] until [`sleep`](Retrier::sleep) names another: tokio's
/// with the `tokio` feature, none without (`run_async` then needs `sleep`).
#[cfg(feature = "tokio")]
pub type DefaultSleeper = crate::timer::TokioTimer;
/// The timer of [`Retrier::run_async`] until [`sleep`](Retrier::sleep) names another: tokio's
/// with the `tokio` feature, none without (`run_async` then needs `sleep`).
#[cfg(not(feature = "tokio"))]
pub type DefaultSleeper = Unset;

use super::async_default_clock as default_clock;

/// Retries a closure with a configuration chosen at run time: the options of
/// [`#[retry]`](crate::retry), each one method of the same name, with the same defaults, around
/// the same loop (the attempt context, one retrying layer, the events, the hooks, the budget,
/// the breaker, the fallback, the deadline, the timeout).
///
/// The timings (`max`, `base`, `jitter`, `deadline`, ...) start as the [`Policy`]'s, read from a
/// configuration file with [`Policy::from_str`](std::str::FromStr) or built with its `const`
/// builders; a method of the same name changes one for this retrier only (a per-call
/// [`deadline`](Retrier::deadline)). The error type's [`Transient`] impl
/// decides which errors are retried unless [`on`](Retrier::on) names a classifier.
///
/// ```
/// use retry_runtime::{Policy, Retrier, RetryEvent, testing};
/// use std::io;
///
/// // From a configuration file, at start-up.
/// let policy: Policy = "max = 3, base = 1s, jitter = none".parse().unwrap();
///
/// let mut answers = vec![Ok("tariffs"), Err(io::Error::from(io::ErrorKind::TimedOut))];
/// let (tariffs, pauses) = testing::record(|| {
///     Retrier::new(&policy)
///         .notify(|error: &io::Error, event: &RetryEvent| eprintln!("{error}; again in {:?}", event.pause))
///         .run(|| answers.pop().unwrap())
/// });
/// assert_eq!(tariffs.unwrap(), "tariffs");
/// assert_eq!(pauses, [std::time::Duration::from_secs(1)]);
/// ```
///
/// A closure given to an option names the types of its arguments (`|error: &io::Error| ...`):
/// the loop learns the error type only from the closure that [`run`](Retrier::run) or
/// [`run_async`](Retrier::run_async) is given, after the options. A named function needs
/// nothing. The error type needs `Debug`, with which the events show it (the attribute, which
/// sees the type, adds no such bound).
#[must_use = "a `Retrier` does nothing until `run` or `run_async`"]
pub struct Retrier<
    'p,
    Out: Outcome,
    C = Unset,
    S = DefaultSleeper,
    H = Hooks,
    X = Unset,
    L = LogDebug,
    A = Unset,
> {
    on: C,
    reset_after: Option<Duration>,
    /// The policy as the timing methods (`max`, `deadline`, ...) changed it, once one was
    /// called; until then the loop reads the borrowed one, `state`'s.
    timings: Option<Policy>,
    /// The options, stored in the loop state they will run in.
    state: Retry<'p, Out, Unset, S, H, X, L>,
    only: std::marker::PhantomData<fn() -> A>,
}

/// The extras ([`Unset`], or [`Extras`] once `timeout`, `budget`, `breaker` or `nested_retry`
/// is given) as the loop of one [`Retrier::run`] holds them: their borrows shortened to the
/// run's, which may read a policy of its own (changed by a timing method) rather than the one
/// borrowed for `'p`.
pub trait RunExtras<'p, E>: MaybeExtras<'p, E> {
    /// The extras with borrows of lifetime `'s`.
    type At<'s>: MaybeExtras<'s, E>
    where
        Self: 's;
    /// The same extras, borrowed for `'s` only.
    fn at<'s>(self) -> Self::At<'s>
    where
        Self: 's;
}

impl<'p, E> RunExtras<'p, E> for Unset {
    type At<'s>
        = Unset
    where
        Self: 's;
    #[inline(always)]
    fn at<'s>(self) -> Unset
    where
        Self: 's,
    {
        self
    }
}

impl<'p, E> RunExtras<'p, E> for Extras<'p, E> {
    type At<'s>
        = Extras<'s, E>
    where
        Self: 's;
    #[inline(always)]
    fn at<'s>(self) -> Extras<'s, E>
    where
        Self: 's,
    {
        self
    }
}

/// The mark of a [`Retrier`] with an option that only [`run_async`](Retrier::run_async) can
/// honour: `timeout` or `sleep`.
pub enum AsyncOnly {}

/// What [`Retrier::run`] needs: no option that only an async loop can honour.
#[diagnostic::on_unimplemented(
    message = "`timeout` and `sleep` need `run_async`: a blocking call cannot be cut off from outside, and a sync loop pauses with `std::thread::sleep`",
    label = "this `Retrier` has `timeout` or `sleep`",
    note = "give the call its own timeout (a socket read timeout, a client timeout) and remove `timeout`, or run an async closure: `.run_async(|| async {{ ... }}).await`"
)]
pub trait SyncRun {}
impl SyncRun for Unset {}

/// A classifier, or [`Unset`] for the error type's [`Transient`] impl, as the loop calls it.
pub trait Classifier<E, M> {
    /// The callable in the loop's slot.
    type Call;
    /// The classifier in its slot.
    fn into_classify(self) -> Classify<Self::Call, E>;
}

/// The default classifier's form.
pub enum ByTransient {}

/// A [`Transient`] error of a [`Retrier`] without [`on`](Retrier::on): its message names the
/// method.
#[diagnostic::on_unimplemented(
    message = "this `Retrier` cannot tell which `{Self}` errors are worth retrying",
    label = "the closure's error type `{Self}` does not implement `retry_runtime::Transient`",
    note = "either name a classifier, which works for any error type: `.on(is_transient)` with `fn is_transient(error: &{Self}) -> bool`",
    note = "or, if `{Self}` is defined in your crate, implement `retry_runtime::Transient` for it; a type from another crate cannot implement it in yours (E0117), so wrap such a type in an error type of your own"
)]
pub trait TransientInRetrier: Transient {}

#[diagnostic::do_not_recommend]
impl<E: Transient + ?Sized> TransientInRetrier for E {}

impl<E: TransientInRetrier> Classifier<E, ByTransient> for Unset {
    type Call = fn(&E) -> Verdict;
    #[inline(always)]
    fn into_classify(self) -> Classify<fn(&E) -> Verdict, E> {
        Hook::new(crate::__private::is_transient::<E>, |c, error, ()| c(error))
    }
}

impl<F: Fn(&E) -> V, V: IntoVerdict, E> Classifier<E, V> for F {
    type Call = F;
    #[inline(always)]
    fn into_classify(self) -> Classify<F, E> {
        Hook::new(self, |c, error, ()| c(error).into_verdict())
    }
}

impl<'p, T, E> Retrier<'p, Result<T, E>> {
    /// A retrier with `policy`'s timings and every other option at its default.
    #[inline(always)]
    pub fn new(policy: &'p Policy) -> Self {
        Retrier {
            on: Unset,
            reset_after: None,
            timings: None,
            state: Retry {
                site: Site {
                    policy,
                    name: "retrier",
                    clock: default_clock,
                },
                progress: Progress {
                    retries: 0,
                    retried_above: false,
                    previous_pause: 0,
                    started: None,
                    hedges: 0,
                },
                classify: Hook::new(Unset, |_, _, ()| Verdict::Fail),
                sleeper: DefaultSleeper {},
                hooks: Hooks::default(),
                extras: Unset,
                log: std::marker::PhantomData,
                spans: super::spans::CallSpan::default(),
            },
            only: std::marker::PhantomData,
        }
    }
}

impl<'p, T, E> From<&'p Policy> for Retrier<'p, Result<T, E>> {
    fn from(policy: &'p Policy) -> Self {
        Retrier::new(policy)
    }
}

// The options' return types spell out the retrier's type parameters, as the loop state's do.
#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, H, X, L, A> Retrier<'p, Result<T, E>, C, S, H, X, L, A> {
    /// The same retrier with its loop state replaced by `f`, and its mark by `A2`.
    #[inline(always)]
    fn map<C2, S2, H2, X2, L2, A2>(
        self,
        on: impl FnOnce(C) -> C2,
        f: impl FnOnce(
            Retry<'p, Result<T, E>, Unset, S, H, X, L>,
        ) -> Retry<'p, Result<T, E>, Unset, S2, H2, X2, L2>,
    ) -> Retrier<'p, Result<T, E>, C2, S2, H2, X2, L2, A2> {
        Retrier {
            on: on(self.on),
            reset_after: self.reset_after,
            timings: self.timings,
            state: f(self.state),
            only: std::marker::PhantomData,
        }
    }

    /// The name the events give, where the attribute gives the function's (`"retrier"` unless
    /// named).
    pub fn name(mut self, name: &'static str) -> Self {
        self.state.site.name = name;
        self
    }

    /// The policy with one timing changed, for this retrier only.
    #[inline(always)]
    fn timing(mut self, change: impl FnOnce(Policy) -> Policy) -> Self {
        let policy = self.timings.unwrap_or(*self.state.site.policy);
        self.timings = Some(change(policy));
        self
    }

    /// `max = 3`: retries after the first call, so at most `retries + 1` calls
    /// ([`Policy::max`]). The policy's until then (3 in [`Policy::new`]).
    pub fn max(self, retries: u32) -> Self {
        self.timing(|p| p.max(retries))
    }

    /// `attempts = 4`: the same limit counted as calls, the first one included: `attempts(4)`
    /// is `max(3)`. The attribute refuses `attempts = 0` at compile time; here it makes a single
    /// call, as `attempts(1)` does.
    pub fn attempts(self, calls: u32) -> Self {
        self.timing(|p| p.max(calls.saturating_sub(1)))
    }

    /// `base = "1s"`: the pause before the first retry ([`Policy::base`]; 1 s in
    /// [`Policy::new`]).
    pub fn base(self, base: Duration) -> Self {
        self.timing(|p| p.base(base))
    }

    /// `factor = 2`: the growth of the pause per retry, exponential backoff only
    /// ([`Policy::factor`], which takes a value below 1 as 1; 2 in [`Policy::new`]).
    pub fn factor(self, factor: f64) -> Self {
        self.timing(|p| p.factor(factor))
    }

    /// `backoff = exponential`: how the pause grows ([`Policy::backoff`]; exponential in
    /// [`Policy::new`]).
    pub fn backoff(self, backoff: Backoff) -> Self {
        self.timing(|p| p.backoff(backoff))
    }

    /// `max_delay = "30s"`: no single pause is longer, jitter and a server's suggested pause
    /// included ([`Policy::max_delay`]; 30 s or `base` in [`Policy::new`]).
    pub fn max_delay(self, max_delay: Duration) -> Self {
        self.timing(|p| p.max_delay(max_delay))
    }

    /// `deadline = "10s"`: the time budget of the whole run from its first attempt, attempts
    /// and pauses included; a pause that would end past it is not taken, and the last error is
    /// returned ([`Policy::deadline`]; none in [`Policy::new`]). With
    /// [`timeout`](Retrier::timeout), an attempt is also cut off at the deadline.
    pub fn deadline(self, deadline: Duration) -> Self {
        self.timing(|p| p.deadline(deadline))
    }

    /// `jitter = none`, `jitter = full`, ...: how each pause is randomised ([`Policy::jitter`];
    /// [`Jitter::Proportional(0.5)`](Jitter::Proportional) in [`Policy::new`]).
    pub fn jitter(self, jitter: Jitter) -> Self {
        self.timing(|p| p.jitter(jitter))
    }

    /// For a loop that runs for hours (a consumer, a reconnect loop): an attempt that ran for at
    /// least `healthy` before it failed starts the backoff afresh, as a new call would: the next
    /// pause is the first one (`base`), the retries are counted from zero, and the deadline runs
    /// from then. Without it, a connection that failed a hundred times over a day waits the
    /// longest pause after each drop, and a spent deadline ends the loop.
    pub fn reset_after(mut self, healthy: Duration) -> Self {
        self.reset_after = Some(healthy);
        self
    }

    /// `on = f`: which errors are worth retrying, `Fn(&E) -> bool` or `Fn(&E) -> Verdict`;
    /// everything else is returned at once. The default is the error type's [`Transient`] impl.
    pub fn on<F, V>(self, f: F) -> Retrier<'p, Result<T, E>, F, S, H, X, L, A>
    where
        F: Fn(&E) -> V,
        V: IntoVerdict,
    {
        self.map(|_| f, |s| s)
    }

    /// `timeout = "2s"`: each attempt is cut off after `limit` (clipped to the time left before
    /// the deadline) and counts as a transient failure; needs `E: From<Elapsed>`, and
    /// [`run_async`](Retrier::run_async).
    pub fn timeout(
        self,
        limit: Duration,
    ) -> Retrier<'p, Result<T, E>, C, S, H, Extras<'p, E>, L, AsyncOnly>
    where
        E: FromElapsed,
        X: MaybeExtras<'p, E>,
    {
        self.map(|c| c, |s| s.timeout(limit))
    }

    /// `budget = B`: retries draw from a shared [`RetryBudget`]; when it is empty the loop gives
    /// up with the current error.
    pub fn budget(
        self,
        budget: &'p RetryBudget,
    ) -> Retrier<'p, Result<T, E>, C, S, H, Extras<'p, E>, L, A>
    where
        X: MaybeExtras<'p, E>,
    {
        self.map(|c| c, |s| s.budget(budget))
    }

    /// `breaker = B`: while the [`CircuitBreaker`] is open, the call returns
    /// `E::from(CircuitOpen)` at once; needs `E: From<CircuitOpen>`.
    pub fn breaker(
        self,
        breaker: &'p CircuitBreaker,
    ) -> Retrier<'p, Result<T, E>, C, S, H, Extras<'p, E>, L, A>
    where
        E: FromCircuitOpen,
        X: MaybeExtras<'p, E>,
    {
        self.map(|c| c, |s| s.breaker(breaker))
    }

    /// `nested = retry`: keep retrying even inside another retrying function or block.
    pub fn nested_retry(self) -> Retrier<'p, Result<T, E>, C, S, H, Extras<'p, E>, L, A>
    where
        X: MaybeExtras<'p, E>,
    {
        self.map(|c| c, |s| s.nested_retry())
    }

    /// `sleep = f`: pause with another runtime's timer, `Fn(Duration) -> impl Future` or a
    /// [`Sleeper`]; the deadline is then measured on its clock. For
    /// [`run_async`](Retrier::run_async).
    pub fn sleep<F, M>(self, f: F) -> Retrier<'p, Result<T, E>, C, F::Sleeper, H, X, L, AsyncOnly>
    where
        F: IntoSleeper<M>,
    {
        self.map(|c| c, |s| s.sleep(f))
    }
}

#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, H, X, D, V, A> Retrier<'p, Result<T, E>, C, S, H, X, Log<D, V>, A> {
    /// `log_level = "warn"`: the level of the one event logged when a call that failed ends
    /// (`level::Error` by default; `level::Warn`, `level::Info`, ... in
    /// [`level`](crate::level)).
    pub fn log_level<V2: level::Level>(
        self,
        level: V2,
    ) -> Retrier<'p, Result<T, E>, C, S, H, X, Log<D, V2>, A> {
        self.map(|c| c, |s| s.log_level(level))
    }
}

#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, R, N, G, F, X, L, A>
    Retrier<'p, Result<T, E>, C, S, Hooks<R, N, G, F>, X, L, A>
{
    /// `on_result = f`: an `Ok` value for which `f` answers `true` (or a [`Verdict`] that
    /// retries) is a transient failure; when the loop gives up, the last `Ok` is returned.
    pub fn on_result<J, V>(
        self,
        f: J,
    ) -> Retrier<'p, Result<T, E>, C, S, Hooks<OnResult<J, T>, N, G, F>, X, L, A>
    where
        J: Fn(&T) -> V,
        V: IntoResultVerdict,
    {
        self.map(|c| c, |s| s.on_result(f))
    }

    /// `notify = f`: called before each pause, `Fn(&E, &RetryEvent)` or
    /// `Fn(Result<&T, &E>, &RetryEvent)`.
    pub fn notify<J, M>(
        self,
        f: J,
    ) -> Retrier<'p, Result<T, E>, C, S, Hooks<R, Notify<J, T, E>, G, F>, X, L, A>
    where
        J: NotifyHook<T, E, M>,
    {
        self.map(|c| c, |s| s.notify(f))
    }

    /// `on_give_up = f`: called once when the loop gives up, `Fn(&E)`, `Fn(&E, &GiveUp)` or
    /// `Fn(Result<&T, &E>, &GiveUp)`.
    pub fn on_give_up<J, M>(
        self,
        f: J,
    ) -> Retrier<'p, Result<T, E>, C, S, Hooks<R, N, J::Slot, F>, X, L, A>
    where
        J: GiveUpHook<T, E, M>,
    {
        self.map(|c| c, |s| s.on_give_up(f))
    }

    /// `fallback = f`: when the loop gives up, `f(error, why)` (with `on_result`,
    /// `f(outcome, why)`) makes the result; sync, or for [`run_async`](Retrier::run_async) also
    /// async.
    pub fn fallback<J, Out, M>(
        self,
        f: J,
    ) -> Retrier<'p, Result<T, E>, C, S, Hooks<R, N, G, Out::Slot<J>>, X, L, A>
    where
        R: FallbackInput<T, E>,
        J: FnOnce(R::Input, GiveUp) -> Out,
        Out: FallbackOutput<T, E, M>,
        S: Awaits<M>,
    {
        self.map(|c| c, |s| s.fallback(f))
    }
}

#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, R, N, G, F, X, L, A>
    Retrier<'p, Result<T, E>, C, S, Hooks<R, N, G, F>, X, L, A>
where
    R: Slot<T, (), Verdict>,
    N: Slot<Result<T, E>, RetryEvent>,
    G: Slot<Result<T, E>, GiveUp>,
    F: Fallback<T, E>,
    X: RunExtras<'p, E>,
    L: Logs<E>,
{
    /// The loop state for one run: `policy` (the borrowed one, or the retrier's own if a
    /// timing method changed it), `clock`, and no start read yet
    /// ([`restart`](Retry::restart) reads it). The classifier is not in it yet
    /// ([`classified`](Retry::classified) puts it in): the first attempt does not need it.
    #[inline(always)]
    fn start<'s>(
        policy: &'s Policy,
        state: Retry<'p, Result<T, E>, Unset, S, Hooks<R, N, G, F>, X, L>,
        clock: fn() -> Instant,
    ) -> Retry<'s, Result<T, E>, Unset, S, Hooks<R, N, G, F>, X::At<'s>, L>
    where
        'p: 's,
    {
        Retry {
            site: Site {
                policy,
                clock,
                name: state.site.name,
            },
            progress: Progress {
                retried_above: context::current().retried_above,
                ..state.progress
            },
            classify: state.classify,
            sleeper: state.sleeper,
            hooks: state.hooks,
            extras: state.extras.at(),
            log: std::marker::PhantomData,
            spans: state.spans,
        }
    }

    /// Runs `body` until it succeeds or the loop gives up, pausing with
    /// [`std::thread::sleep`] and measuring the deadline on [`Instant::now`], as a sync
    /// annotated function does. `?` and `return` in the closure end the attempt.
    ///
    /// The first attempt and its `Ok` are inline, in the caller; the loop after a failure is
    /// out of line, made for the closure's type (`run_retries`, `PERFORMANCE.md` §8).
    #[inline(always)]
    pub fn run<M, B>(self, mut body: B) -> Result<T, E>
    where
        C: Classifier<E, M>,
        B: FnMut() -> Result<T, E>,
        A: SyncRun,
        F: Fallback<T, E, Output<()> = Result<T, E>>,
    {
        let Retrier {
            on,
            reset_after,
            timings,
            state,
            ..
        } = self;
        let policy = match &timings {
            Some(own) => own,
            None => state.site.policy,
        };
        let mut state = Self::start(policy, state, std_now);
        // A run that reads the clock before its first attempt (a deadline, `reset_after`) makes
        // it in the loop, with the failures (`PERFORMANCE.md` §8).
        let first = if policy.get_deadline().is_some() || reset_after.is_some() {
            None
        } else {
            match state.attempt(&mut body) {
                // Without `on_result`, an `Ok` is accepted as it is; with it, the loop judges it.
                Attempted::Completed(Ok(value)) if !R::SET => return state.accept::<()>(value),
                attempted => {
                    // `run_retries` reads it again: left as `start` read it, the reading would
                    // be kept for the call, on the happy path too.
                    state.progress.retried_above = false;
                    Some(attempted)
                }
            }
        };
        run_retries(on, state, first, body, reset_after)
    }

    /// Runs `body`, a closure that returns a future (`|| async { ... }`), until it succeeds or
    /// the loop gives up, pausing with tokio's timer (or [`sleep`](Retrier::sleep)'s) and
    /// measuring the deadline on its clock, as an async annotated function does. The future is
    /// `Send` when the closure's futures are, so that it can be spawned. A block that borrows
    /// its surroundings mutably across attempts is [`retry_block!`](crate::retry_block)'s.
    pub async fn run_async<M, B, Fut>(self, mut body: B) -> Result<T, E>
    where
        C: Classifier<E, M>,
        B: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        S: Sleeper,
        F::Output<()>: IntoFinish,
        <F::Output<()> as IntoFinish>::Future: Future<Output = Result<T, E>>,
    {
        let Retrier {
            on,
            reset_after,
            timings,
            state,
            ..
        } = self;
        let policy = match &timings {
            Some(own) => own,
            None => state.site.policy,
        };
        let clock = state.site.clock;
        let mut state = Self::start(policy, state, clock).classified(on.into_classify());
        state.restart();
        loop {
            let started = reset_after.map(|_| (state.site.clock)());
            let attempted: Attempted<T, E> = state.run_timed(body()).await;
            state.reset_if_healthy(reset_after, started);
            state = match state.next(attempted) {
                ControlFlow::Break(result) => return super::finish(result).await,
                ControlFlow::Continue(next) => next,
            };
            state.pause().await;
        }
    }
}

/// Reads `clock`, out of the happy path's way: a run whose policy, read at run time, has a
/// deadline reads the time as it starts; laid out inline, the reading made every other run
/// jump over it. Beside a clock reading, the call costs nothing.
#[cold]
#[inline(never)]
fn read(clock: fn() -> Instant) -> Instant {
    clock()
}

/// [`Retrier::run`] after a first attempt that did not end in an accepted `Ok` (`first`), or
/// from its first attempt (`None`: a run whose deadline or `reset_after` reads the clock as it
/// starts): the decision, then the loop. Out of line, so that the happy path, inline in the
/// caller, is the attempt and a return (`PERFORMANCE.md` §8): laid out in the caller, the loop,
/// or a clock reading before the first attempt, made every call save six registers first. The
/// classifier comes as the retrier holds it (`on`) and the clock is named here, so that both
/// are called directly, as they are inline.
#[inline(never)]
#[allow(clippy::type_complexity)]
fn run_retries<'p, T, E, C, M, S, R, N, G, F, X, L, B>(
    on: C,
    state: Retry<'p, Result<T, E>, Unset, S, Hooks<R, N, G, F>, X, L>,
    first: Option<Attempted<T, E>>,
    mut body: B,
    reset_after: Option<Duration>,
) -> Result<T, E>
where
    C: Classifier<E, M>,
    R: Slot<T, (), Verdict>,
    N: Slot<Result<T, E>, RetryEvent>,
    G: Slot<Result<T, E>, GiveUp>,
    F: Fallback<T, E, Output<()> = Result<T, E>>,
    X: MaybeExtras<'p, E>,
    L: Logs<E>,
    B: FnMut() -> Result<T, E>,
{
    // Put in here, not handed over in memory: known here, they are called directly, and inline.
    let mut state = state.classified(on.into_classify());
    state.site.clock = std_now;
    let mut attempted = match first {
        Some(failed) => {
            // The progress after a first attempt, as constants, so that the first decision's
            // arithmetic folds as it does inline; only `started` may have been read.
            // `retried_above` is read again, as `start` read it: the attempt has put the
            // caller's frame back. Read here, the value `start` read serves only the attempt's
            // frame, which the compiler drops with the frame when the closure does not look at
            // it, and the happy path reads no thread-local.
            state.progress = Progress {
                retries: 0,
                retried_above: context::current().retried_above,
                previous_pause: 0,
                started: state.progress.started,
                hedges: 0,
            };
            failed
        }
        None => {
            state.restart();
            let started = reset_after.map(|_| (state.site.clock)());
            let attempted = state.attempt(&mut body);
            state.reset_if_healthy(reset_after, started);
            attempted
        }
    };
    loop {
        state = match state.next(attempted) {
            ControlFlow::Break(result) => return result,
            ControlFlow::Continue(next) => next,
        };
        state.pause_blocking();
        let started = reset_after.map(|_| (state.site.clock)());
        let now = state.attempt(&mut body);
        state.reset_if_healthy(reset_after, started);
        attempted = match now {
            // As on the first attempt: an `Ok` without `on_result` is accepted as it is.
            Attempted::Completed(Ok(value)) if !R::SET => return state.accept::<()>(value),
            attempted => attempted,
        };
    }
}

impl<'p, T, E, S, H, X, L> Retry<'p, Result<T, E>, Unset, S, H, X, L> {
    /// The same state with `classify` as its classifier.
    #[inline(always)]
    fn classified<C>(self, classify: Classify<C, E>) -> Retry<'p, Result<T, E>, C, S, H, X, L> {
        Retry {
            site: self.site,
            progress: self.progress,
            classify,
            sleeper: self.sleeper,
            hooks: self.hooks,
            extras: self.extras,
            log: std::marker::PhantomData,
            spans: self.spans,
        }
    }
}

impl<'p, T, E, C, S, H, X, L> Retry<'p, Result<T, E>, C, S, H, X, L> {
    /// The loop as a new call finds it: no retries, no pause yet, whether a layer above retries
    /// read again, and the start read again if the deadline or a hook needs it.
    #[inline(always)]
    pub(super) fn restart(&mut self) {
        self.progress = Progress {
            retries: 0,
            retried_above: context::current().retried_above,
            previous_pause: 0,
            started: self
                .site
                .policy
                .get_deadline()
                .map(|_| read(self.site.clock)),
            hedges: 0,
        };
    }

    /// After an attempt that started at `started`: if it ran for `reset_after` or longer, the
    /// backoff starts afresh.
    #[inline(always)]
    fn reset_if_healthy(&mut self, reset_after: Option<Duration>, started: Option<Instant>) {
        if let (Some(healthy), Some(started)) = (reset_after, started) {
            if (self.site.clock)().saturating_duration_since(started) >= healthy {
                self.restart();
            }
        }
    }
}

/// Each key of the attribute's grammar (`retry_grammar::KEYS` and `BLOCK_KEYS`) and what a
/// [`Retrier`] has for it: a method, or why it has none (the reason `docs/blocks.md` gives too).
/// A key added to the grammar fails `every_key_has_a_method_or_a_reason` until it has a row.
// Under loom, `RetryBudget::new` and `CircuitBreaker::new` are not `const`.
#[cfg(test)]
#[cfg(not(loom))]
mod parity {
    use super::*;
    use crate::{CircuitOpen, Elapsed};
    use retry_grammar::{BLOCK_KEYS, KEYS};

    /// What a [`Retrier`] has for a key.
    enum Has {
        /// A method: its name, and a probe that calls it (the probe is written by `method!`
        /// from the name, so it does not compile if the method is missing) and runs the
        /// retrier where it can run without a runtime.
        Method(&'static str, fn()),
        /// No method, and why.
        Reason(&'static str),
    }

    #[derive(Debug)]
    struct Probe;

    impl Transient for Probe {
        fn is_transient(&self) -> bool {
            true
        }
    }

    impl From<Elapsed> for Probe {
        fn from(_: Elapsed) -> Self {
            Probe
        }
    }

    impl From<CircuitOpen> for Probe {
        fn from(_: CircuitOpen) -> Self {
            Probe
        }
    }

    static POLICY: Policy = Policy::new();
    static BUDGET: RetryBudget = RetryBudget::new();
    static BREAKER: CircuitBreaker = CircuitBreaker::new();

    /// A row for a method: `method!(key => name(args))` calls `Retrier::new(..).name(args)` and
    /// runs it on a first attempt that succeeds (`run`); `method!(async key => ...)` only
    /// makes its future, for the options that need `run_async` (with `sleep`, which needs no
    /// runtime and no `tokio` feature).
    macro_rules! method {
        ($key:literal => $name:ident($($arg:expr),*)) => {
            ($key, Has::Method(stringify!($name), || {
                let result = Retrier::new(&POLICY).$name($($arg),*).run(|| Ok::<u32, Probe>(7));
                assert!(matches!(result, Ok(7)));
            }))
        };
        (async $key:literal => $name:ident($($arg:expr),*)) => {
            ($key, Has::Method(stringify!($name), || {
                let retrier = Retrier::new(&POLICY).sleep(no_pause).$name($($arg),*);
                drop(retrier.run_async(|| async { Ok::<u32, Probe>(7) }));
            }))
        };
    }

    const MS: Duration = Duration::from_millis(1);

    fn no_pause(_: Duration) -> std::future::Ready<()> {
        std::future::ready(())
    }

    /// The table.
    fn table() -> Vec<(&'static str, Has)> {
        vec![
            method!("max" => max(5)),
            method!("attempts" => attempts(4)),
            method!("base" => base(MS)),
            method!("factor" => factor(3.0)),
            method!("backoff" => backoff(Backoff::Linear)),
            method!("max_delay" => max_delay(MS)),
            method!("deadline" => deadline(MS)),
            method!("jitter" => jitter(Jitter::None)),
            (
                "policy",
                Has::Reason("the constructor's argument: `Retrier::new(&policy)`"),
            ),
            method!("on" => on(|_: &Probe| true)),
            method!(async "timeout" => timeout(MS)),
            method!(async "sleep" => sleep(no_pause)),
            method!("fallback" => fallback(|error: Probe, _: GiveUp| Err::<u32, Probe>(error))),
            (
                "hedge",
                Has::Reason(
                    "runs the closure several times at once, which `run_async`'s `FnMut` closure cannot be",
                ),
            ),
            ("max_hedges", Has::Reason("a setting of `hedge`'s `Hedge`")),
            (
                "crate",
                Has::Reason("where the macro finds the runtime; a `Retrier` is the runtime's own"),
            ),
            method!("on_result" => on_result(|_: &u32| false)),
            method!("notify" => notify(|_: &Probe, _: &RetryEvent| {})),
            method!("on_give_up" => on_give_up(|_: &Probe| {})),
            method!("budget" => budget(&BUDGET)),
            method!("breaker" => breaker(&BREAKER)),
            method!("nested" => nested_retry()),
            method!("log_level" => log_level(level::Warn)),
            (
                "non_idempotent",
                Has::Reason(
                    "a compile-time guard: a block that declares it does not compile without `key`",
                ),
            ),
            (
                "key",
                Has::Reason(
                    "lends a key to `attempt().key()` for `non_idempotent`'s compile-time check; a closure captures its key and sends the same one on every attempt",
                ),
            ),
        ]
    }

    /// The guide that gives the reasons to the reader.
    const GUIDE: &str = include_str!("../../docs/blocks.md");

    #[test]
    fn every_key_has_a_method_or_a_reason() {
        let table = table();
        for key in KEYS.iter().chain(BLOCK_KEYS) {
            let Some((_, has)) = table.iter().find(|(name, _)| *name == key.name) else {
                panic!(
                    "the attribute's key `{}` has neither a `Retrier` method nor a reason in \
                     state/retrier.rs's `parity` table: add the method, or the reason here and \
                     in docs/blocks.md",
                    key.name
                );
            };
            match has {
                Has::Method(method, probe) => {
                    probe();
                    assert!(
                        GUIDE.contains(&format!("`{method}`")),
                        "docs/blocks.md does not name the method `{method}`"
                    );
                }
                Has::Reason(why) => {
                    assert!(!why.is_empty());
                    assert!(
                        GUIDE.contains(&format!("`{}`", key.name)),
                        "docs/blocks.md does not say why `{}` has no method",
                        key.name
                    );
                }
            }
        }
    }

    #[test]
    fn every_row_is_a_key_of_the_grammar() {
        for (name, _) in table() {
            assert!(
                KEYS.iter().chain(BLOCK_KEYS).any(|key| key.name == name),
                "`{name}` is not a key of the attribute any more: remove its row"
            );
        }
    }
}

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
use crate::{CircuitBreaker, Policy, RetryBudget, Transient, Verdict};
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
/// The timings (`max`, `base`, `jitter`, `deadline`, ...) are the [`Policy`]'s, read from a
/// configuration file with [`Policy::from_str`](std::str::FromStr) or built with its `const`
/// builders; a per-call deadline is `policy.deadline(d)`.
/// The error type's [`Transient`] impl
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
    /// The options, stored in the loop state they will run in.
    state: Retry<'p, Out, Unset, S, H, X, L>,
    only: std::marker::PhantomData<fn() -> A>,
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
    pub fn new(policy: &'p Policy) -> Self {
        Retrier {
            on: Unset,
            reset_after: None,
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
    X: MaybeExtras<'p, E>,
    L: Logs<E>,
{
    /// The loop state for one run, with the retrier's own policy, the classifier and a fresh
    /// start read on `clock`.
    #[inline(always)]
    fn start<M>(
        on: C,
        state: Retry<'p, Result<T, E>, Unset, S, Hooks<R, N, G, F>, X, L>,
        clock: fn() -> Instant,
    ) -> Retry<'p, Result<T, E>, C::Call, S, Hooks<R, N, G, F>, X, L>
    where
        C: Classifier<E, M>,
    {
        let mut state = Retry {
            site: Site {
                clock,
                ..state.site
            },
            progress: state.progress,
            classify: on.into_classify(),
            sleeper: state.sleeper,
            hooks: state.hooks,
            extras: state.extras,
            log: std::marker::PhantomData,
            spans: state.spans,
        };
        state.restart();
        state
    }

    /// Runs `body` until it succeeds or the loop gives up, pausing with
    /// [`std::thread::sleep`] and measuring the deadline on [`Instant::now`], as a sync
    /// annotated function does. `?` and `return` in the closure end the attempt.
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
            state,
            ..
        } = self;
        let mut state = Self::start(on, state, std_now);
        loop {
            let started = reset_after.map(|_| (state.site.clock)());
            let attempted = state.attempt(&mut body);
            state.reset_if_healthy(reset_after, started);
            state = match state.next(attempted) {
                ControlFlow::Break(result) => return result,
                ControlFlow::Continue(next) => next,
            };
            state.pause_blocking();
        }
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
            state,
            ..
        } = self;
        let clock = state.site.clock;
        let mut state = Self::start(on, state, clock);
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

impl<'p, T, E, C, S, H, X, L> Retry<'p, Result<T, E>, C, S, H, X, L> {
    /// The loop as a new call finds it: no retries, no pause yet, whether a layer above retries
    /// read again, and the start read again if the deadline or a hook needs it.
    #[inline(always)]
    pub(super) fn restart(&mut self) {
        self.progress = Progress {
            retries: 0,
            retried_above: context::current().retried_above,
            previous_pause: 0,
            started: self.site.policy.get_deadline().map(|_| (self.site.clock)()),
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

//! The loop of an annotated function: the state of one call, carried across its attempts.
//!
//! The expansion drives it with one call per step:
//!
//! ```text
//! use ::retry_runtime::__private::{self as __retry_rt, StartWithoutDebug as _};
//! let mut state = Retry::<Result<T, E>>::start(&POLICY, "name", classify).notify(f);
//! loop {
//!     let attempted = state.attempt(|| body);     // or `run(async { body }).await`
//!     state = match state.next(attempted) {
//!         ControlFlow::Break(result) => return result,  // `finish(result).await` with an async fallback
//!         ControlFlow::Continue(state) => state,
//!     };
//!     state.pause_blocking();                      // or `pause().await`
//! }
//! ```
//!
//! - here: the state and its entry points: `start`, the builders (one per option, named by its
//!   key, which store what they are given and do nothing else, so their order does not matter,
//!   except that `fallback` follows `sleep` and `on_result`), `next` and the pause;
//! - the option slots, what each option stores and how the loop asks for it, one file per
//!   concern: [`hooks`] (`on`, `on_result`, `notify`, `on_give_up`, as [`Hook`]s in a [`Slot`]
//!   each), [`fallback`] (`fallback`, sync or async), [`extras`] (`timeout`, `budget`,
//!   `breaker`, `nested`) and [`log`] (`log_level`, and how an event shows the error); an option
//!   that is not written is the zero-sized [`Unset`] in its slot, so it costs nothing;
//! - [`attempt`]: running one attempt, which returns what happened to it ([`Attempted`]), with
//!   the idempotency key lent to it if the function has one;
//! - [`decide`]: the decision after an attempt that did not end in an accepted `Ok`: pause and
//!   retry, return, or give up (and why), with the hooks, the fallback and the logging;
//! - [`events`]: what the hooks hear, the public [`RetryEvent`] and [`GiveUp`].
//!
//! Why the state is shaped as it is (by value, inline, zero-sized options, a small future) is
//! in one design note beside these files, `state/PERFORMANCE.md`; a line that follows from it
//! names its section.

mod attempt;
mod block;
mod decide;
mod events;
mod extras;
mod fallback;
mod hedge;
mod hooks;
mod log;
mod retrier;
mod spans;

pub use attempt::{Attempted, Run};
pub use block::{AsyncBlock, AsyncBlockWithoutDebug, SyncBlock, SyncBlockWithoutDebug};
pub use events::{GiveUp, GiveUpReason, RetryEvent};
pub use extras::{Extras, IntoError, MaybeExtras, NoRefusal, PerAttempt, Refusal};
pub use fallback::{
    AsyncFallback, AsyncForm, Awaits, Fallback, FallbackInput, FallbackOutput, FallbackScope,
    Finish, IntoFinish, SyncFallback, SyncForm,
};
pub use hooks::{
    ErrorForm, ErrorOnly, GiveUpHook, Hook, Hooks, NotifyHook, OutcomeForm, Slot, Untimed,
};
pub use log::{ByDebug, ByName, Log, LogLevel, Logs, level};
pub use retrier::{
    AsyncOnly, ByTransient, Classifier, DefaultSleeper, Retrier, RunExtras, SyncRun,
    TransientInRetrier,
};

use crate::breaker::FromCircuitOpen;
use crate::context::{self, KeyParam, KeySlot};
use crate::timer::{FromElapsed, IntoSleeper, Sleeper};
use crate::{CircuitBreaker, Policy, RetryBudget, Verdict};
use extras::{Guard, Timeout};
use hooks::{Classify, Notify, OnResult, with_hook};
use std::fmt;
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

/// An option that was not written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unset;

/// What a classifier (`on = ...`) may return: `bool` or a [`Verdict`], with an error message
/// that says so.
#[diagnostic::on_unimplemented(
    message = "`on = ...` must return `bool` or `retry_runtime::Verdict`, not `{Self}`",
    label = "this classifier returns `{Self}`",
    note = "return `true` to retry the error and `false` to return it at once, or a `Verdict`: `Retry`, `RetryAfter(pause)`, `RetryNow` or `Fail`"
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

/// What `on_result = ...` may return: `bool` or a [`Verdict`], with an error message that says
/// so.
#[diagnostic::on_unimplemented(
    message = "`on_result = ...` must return `bool` or `retry_runtime::Verdict`, not `{Self}`",
    label = "this judge of `Ok` values returns `{Self}`",
    note = "return `true` to retry the `Ok` value and `false` to return it, or a `Verdict`: `Retry`, `RetryAfter(pause)`, `RetryNow` or `Fail` (return it), as `retry_runtime::integrations::reqwest::response_verdict` does"
)]
pub trait IntoResultVerdict {
    /// The answer as a [`Verdict`]: `true` is [`Verdict::Retry`], `false` [`Verdict::Fail`].
    fn into_verdict(self) -> Verdict;
}

impl IntoResultVerdict for bool {
    fn into_verdict(self) -> Verdict {
        Verdict::from(self)
    }
}

impl IntoResultVerdict for Verdict {
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

/// The logging of a function whose error type has `Debug`, at the default final level.
pub type LogDebug = Log<ByDebug, level::Error>;
/// The logging of a function whose error type has no `Debug`, at the default final level.
pub type LogName = Log<ByName, level::Error>;

/// The state of one call of an annotated function, across its attempts.
///
/// Built once per call with the function's return type, its classifier and any options; then
/// each attempt runs through [`attempt`](Retry::attempt) or [`run`](Retry::run), which return
/// what happened to it, and [`next`](Retry::next) decides what follows: `Break` carries the
/// function's result, `Continue` the state for the next attempt, whose pause is then taken. An
/// `Ok` outcome is decided without any work.
///
/// # When the clock is read
///
/// The builders read no clock and deposit nothing. A call reads the clock once as it starts if
/// the policy has a deadline (in `start`), or as its first attempt starts if it has a hook that
/// hears the time: `notify` ([`RetryEvent::elapsed`]), `fallback` and an `on_give_up` that
/// takes a [`GiveUp`] ([`GiveUp::elapsed`]); an `on_give_up` of the form `Fn(&E)` needs no
/// reading. A `breaker` reads the clock as each attempt starts and ends, a `timeout` with a
/// deadline as each attempt starts (to clip it), a `budget` or a deadline after a failure. The
/// clock is the one of the pauses: [`Sleeper::now`] of the sleeper (tokio's clock for async
/// functions, [`Instant::now`] for sync ones and for `sleep = f`), or a recording's virtual
/// clock inside [`testing::record`](crate::testing::record).
///
/// # Layout
///
/// Every option lives in a type parameter that is the zero-sized [`Unset`] when the option is
/// not written: `H` holds the hooks, one [`Slot`] each, and the fallback; `X` holds `timeout`,
/// `budget`, `breaker` and `nested`; `L` how failures are logged. Why the state is shaped for
/// the happy path, and kept by value: `state/PERFORMANCE.md` §1 and §2.
///
/// Each user-supplied callable is a [`Hook`]: stored with a function pointer that calls it, made
/// where its bound is checked (in `start` and the builders), so that a mistyped classifier or
/// hook is one error there, not a second one at every use.
///
/// # `Debug` or not
///
/// `start` comes in two forms: the inherent one for an error type with `Debug`, and the one of
/// [`StartWithoutDebug`] for any other (a generic `E` without the bound included), which the
/// expansion imports as `_`. Rust picks the inherent one whenever `E: Debug` holds, so the
/// choice is made where the function is written, per function, and a log event shows the error
/// with `Debug` or by its type name ([`Logs`]) without adding a bound to the function.
pub struct Retry<'p, Out: Outcome, C = Unset, S = Unset, H = Hooks, X = Unset, L = LogDebug> {
    site: Site<'p>,
    progress: Progress,
    classify: Classify<C, Out::Error>,
    sleeper: S,
    hooks: H,
    extras: X,
    log: std::marker::PhantomData<fn() -> L>,
    /// The call's span (feature `attempt-spans`; zero-sized without it).
    spans: spans::CallSpan,
}

/// What is fixed for the whole call.
#[derive(Clone, Copy)]
struct Site<'p> {
    policy: &'p Policy,
    name: &'static str,
    clock: fn() -> Instant,
}

/// What changes from attempt to attempt: small and `Copy`, handed by value to the decision after
/// a failure and back. Performance: `PERFORMANCE.md` §2.
#[derive(Clone, Copy)]
struct Progress {
    /// Retries taken so far; the attempt under way (or that just ended) is number `retries + 1`.
    retries: u32,
    /// An enclosing annotated function or `scope::caller_retries` retries this work.
    retried_above: bool,
    /// The pause `next` decided last, in nanoseconds: the one to take now, and the previous one
    /// for decorrelated jitter. A `u64`, not a `Duration`: `PERFORMANCE.md` §4.
    previous_pause: u64,
    /// When the first attempt started, read only for a deadline or a hook that hears the time.
    started: Option<Instant>,
    /// The hedges that the attempt that just ended started (`hedge = ...`), for its event. A
    /// `u16`, which fits beside `retries` and `retried_above` without growing the state.
    hedges: u16,
}

impl Progress {
    /// The progress after a retry with this pause (in nanoseconds) was decided.
    #[inline(always)]
    fn retried_after(self, pause: u64) -> Progress {
        Progress {
            retries: self.retries + 1,
            previous_pause: pause,
            ..self
        }
    }

    /// Time since the first attempt started, or zero if the clock was not read then. By value
    /// and inline: `PERFORMANCE.md` §2.
    #[inline(always)]
    fn elapsed(self, clock: fn() -> Instant) -> Duration {
        self.started
            .map_or(Duration::ZERO, |t| clock().saturating_duration_since(t))
    }
}

/// The clock of sync functions: [`Instant::now`], or a recording's virtual clock.
pub(crate) fn std_now() -> Instant {
    crate::testing::virtual_now().unwrap_or_else(Instant::now)
}

/// The clock of async functions on tokio: tokio's, which `tokio::time::pause()` stops, or a
/// recording's virtual clock.
#[cfg(feature = "tokio")]
fn tokio_now() -> Instant {
    crate::timer::clock_of::<crate::timer::TokioTimer>()
}

/// The clock of an async block or `Retrier::run_async` without `sleep`: tokio's with the
/// `tokio` feature, [`std_now`] without.
fn async_default_clock() -> Instant {
    #[cfg(feature = "tokio")]
    return tokio_now();
    #[cfg(not(feature = "tokio"))]
    return std_now();
}

impl<'p, T, E: fmt::Debug> Retry<'p, Result<T, E>> {
    /// For a sync function: pauses with `std::thread::sleep`, and measures the deadline on
    /// [`Instant::now`]. For an error type with `Debug`; [`StartWithoutDebug::start`] for the
    /// others.
    #[inline(always)]
    pub fn start<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogDebug>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, std_now, classify, Unset)
    }

    /// For an async function: pauses with tokio's timer and measures the deadline on tokio's
    /// clock, so a paused test clock governs both. For an error type with `Debug`.
    #[cfg(feature = "tokio")]
    #[inline(always)]
    pub fn start_async<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, crate::timer::TokioTimer, Hooks, Unset, LogDebug>
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
    ) -> Retry<'p, Result<T, E>, C, crate::timer::NoTimer, Hooks, Unset, LogDebug>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
        crate::timer::NoTimer: crate::timer::TimerFor<T>,
    {
        Retry::with_parts(policy, name, std_now, classify, crate::timer::NoTimer)
    }
}

/// `start` for an error type without `Debug`: the same as the inherent `start`, logging the
/// error by its type name. The expansion imports this trait as `_`; Rust picks the inherent
/// `start` whenever the error type has `Debug`, this one otherwise (a generic `E` without the
/// bound included).
pub trait StartWithoutDebug<'p, T, E>: Sized {
    /// See [`Retry::start`].
    fn start<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict;

    /// See [`Retry::start_async`].
    #[cfg(feature = "tokio")]
    fn start_async<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, crate::timer::TokioTimer, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict;

    /// See [`Retry::start_async`].
    #[cfg(not(feature = "tokio"))]
    fn start_async<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, crate::timer::NoTimer, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
        crate::timer::NoTimer: crate::timer::TimerFor<T>;
}

impl<'p, T, E> StartWithoutDebug<'p, T, E> for Retry<'p, Result<T, E>> {
    #[inline(always)]
    fn start<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, Unset, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, std_now, classify, Unset)
    }

    #[cfg(feature = "tokio")]
    #[inline(always)]
    fn start_async<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, crate::timer::TokioTimer, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, tokio_now, classify, crate::timer::TokioTimer)
    }

    #[cfg(not(feature = "tokio"))]
    #[inline]
    fn start_async<C, V>(
        policy: &'p Policy,
        name: &'static str,
        classify: C,
    ) -> Retry<'p, Result<T, E>, C, crate::timer::NoTimer, Hooks, Unset, LogName>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
        crate::timer::NoTimer: crate::timer::TimerFor<T>,
    {
        Retry::with_parts(policy, name, std_now, classify, crate::timer::NoTimer)
    }
}

impl<'p, T, E, C, S, L> Retry<'p, Result<T, E>, C, S, Hooks, Unset, L> {
    /// `classify`'s bound is checked here, once, and turned into the pointer that `next` calls
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
                // Read here, not at the first attempt. Performance: PERFORMANCE.md §5.
                started: policy.get_deadline().map(|_| clock()),
                hedges: 0,
            },
            classify: Hook::new(classify, |c, error, ()| c(error).into_verdict()),
            sleeper,
            hooks: Hooks::default(),
            extras: Unset,
            log: std::marker::PhantomData,
            spans: spans::CallSpan::default(),
        }
    }
}

// The builders' return types spell out the state's type parameters; an alias would only hide them.
#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, H, X, L> Retry<'p, Result<T, E>, C, S, H, X, L> {
    /// The same state with its option slots (sleeper, hooks, extras) replaced by `f`: the one
    /// place that lists every field, for the builders.
    #[inline(always)]
    fn with_options<S2, H2, X2, L2>(
        self,
        f: impl FnOnce(S, H, X) -> (S2, H2, X2),
    ) -> Retry<'p, Result<T, E>, C, S2, H2, X2, L2> {
        let (sleeper, hooks, extras) = f(self.sleeper, self.hooks, self.extras);
        Retry {
            site: self.site,
            progress: self.progress,
            classify: self.classify,
            sleeper,
            hooks,
            extras,
            log: std::marker::PhantomData,
            spans: self.spans,
        }
    }

    /// The state with its extras in place, one of them set by `set`.
    #[inline(always)]
    fn with_extra(
        self,
        set: impl FnOnce(&mut Extras<'p, E>),
    ) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>, L>
    where
        X: MaybeExtras<'p, E>,
    {
        self.with_options(|s, h, x| {
            let mut extras = x.into_extras();
            set(&mut extras);
            (s, h, extras)
        })
    }

    /// `sleep = f`: pause with `f` instead of tokio's timer, a function
    /// `Fn(Duration) -> impl Future<Output = ()>` or a type that implements [`Sleeper`]. The
    /// deadline is then measured on the sleeper's clock ([`Sleeper::now`]: [`Instant::now`] for
    /// a function). The expansion calls it after [`start`](Retry::start), whose clock is
    /// [`Instant::now`]: if `start` read the time for a deadline, it is read again here, on the
    /// sleeper's clock.
    pub fn sleep<F, M>(mut self, f: F) -> Retry<'p, Result<T, E>, C, F::Sleeper, H, X, L>
    where
        F: IntoSleeper<M>,
    {
        self.site.clock = crate::timer::clock_of::<F::Sleeper>;
        if self.progress.started.is_some() {
            self.progress.started = Some((self.site.clock)());
        }
        self.with_options(|_, h, x| (f.into_sleeper(), h, x))
    }

    /// `timeout = "2s"`: each attempt is cut off after `limit` (clipped to the time left before
    /// the deadline) and counts as a transient failure.
    pub fn timeout(self, limit: Duration) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>, L>
    where
        E: FromElapsed,
        X: MaybeExtras<'p, E>,
    {
        let timeout = Timeout {
            limit,
            error: E::from_elapsed,
        };
        self.with_extra(|x| x.timeout = Some(timeout))
    }

    /// `budget = B`: retries draw from a shared [`RetryBudget`]; this call's first attempt
    /// deposits into it. When it is empty the loop gives up with the current error.
    pub fn budget(
        self,
        budget: &'p RetryBudget,
    ) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>, L>
    where
        X: MaybeExtras<'p, E>,
    {
        self.with_extra(|x| x.budget = Some(budget))
    }

    /// `breaker = B`: while the [`CircuitBreaker`] is open, the function returns
    /// `E::from(CircuitOpen)` at once without running the body; every attempt feeds it, and a
    /// failure after which it is open ends the loop at once with that failure.
    pub fn breaker(
        self,
        breaker: &'p CircuitBreaker,
    ) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>, L>
    where
        E: FromCircuitOpen,
        X: MaybeExtras<'p, E>,
    {
        let guard = Guard {
            breaker,
            error: E::from_circuit_open,
        };
        self.with_extra(|x| x.breaker = Some(guard))
    }

    /// `nested = retry`: keep retrying even inside another retrying function.
    pub fn nested_retry(self) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>, L>
    where
        X: MaybeExtras<'p, E>,
    {
        self.with_extra(|x| x.nested_retry = true)
    }
}

#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, H, X, D, V> Retry<'p, Result<T, E>, C, S, H, X, Log<D, V>> {
    /// `log_level = "warn"`: the level of the one event logged when a call that failed ends
    /// (`ERROR` by default).
    pub fn log_level<V2: level::Level>(
        self,
        _level: V2,
    ) -> Retry<'p, Result<T, E>, C, S, H, X, Log<D, V2>> {
        self.with_options(|s, h, x| (s, h, x))
    }
}

// The hooks' builders: the hooks are one slot type, `Hooks<R, N, G, F>`, and each builder fills
// one of its slots with `with_hook!`, which moves the others over.
#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, R, N, G, F, X, L> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G, F>, X, L> {
    /// `on_result = f`: an `Ok` value for which `f` answers `true` (or a [`Verdict`] that
    /// retries) is treated as a transient failure; when the retries run out, the last `Ok`
    /// value is returned.
    pub fn on_result<J, V>(
        self,
        f: J,
    ) -> Retry<'p, Result<T, E>, C, S, Hooks<OnResult<J, T>, N, G, F>, X, L>
    where
        J: Fn(&T) -> V,
        V: IntoResultVerdict,
    {
        let on_result = Hook::new(f, |f, value, ()| f(value).into_verdict());
        self.with_options(|s, h, x| (s, with_hook!(h, on_result = on_result), x))
    }

    /// `notify = f`: called before each pause with a [`RetryEvent`] and, as `f` takes it, the
    /// error (`Fn(&E, &RetryEvent)`, which hears pauses after errors only) or the outcome
    /// (`Fn(Result<&T, &E>, &RetryEvent)`, which also hears pauses after an `Ok` that
    /// `on_result` rejected).
    pub fn notify<J, M>(
        self,
        f: J,
    ) -> Retry<'p, Result<T, E>, C, S, Hooks<R, Notify<J, T, E>, G, F>, X, L>
    where
        J: NotifyHook<T, E, M>,
    {
        let notify = f.into_slot();
        self.with_options(|s, h, x| (s, with_hook!(h, notify = notify), x))
    }

    /// `on_give_up = f`: called once when the loop gives up (retries used up, the deadline, a
    /// server-suggested pause too long, the budget empty, the breaker open). `Fn(&E)` hears the
    /// last error; `Fn(&E, &GiveUp)` also why; `Fn(Result<&T, &E>, &GiveUp)` also a last `Ok`
    /// that `on_result` rejected.
    pub fn on_give_up<J, M>(
        self,
        f: J,
    ) -> Retry<'p, Result<T, E>, C, S, Hooks<R, N, J::Slot, F>, X, L>
    where
        J: GiveUpHook<T, E, M>,
    {
        let on_give_up = f.into_slot();
        self.with_options(|s, h, x| (s, with_hook!(h, on_give_up = on_give_up), x))
    }

    /// `fallback = f`: when the loop gives up, `f(error, why)` is called, and what it returns is
    /// the function's result. Sync (`FnOnce(E, GiveUp) -> Result<T, E>`), or in an async
    /// function also async (returning a future of that `Result`). With `on_result`, whose
    /// rejected `Ok` can end the loop too, `f` takes the outcome instead of the error:
    /// `FnOnce(Result<T, E>, GiveUp)` ([`FallbackInput`]). It runs in the last attempt's
    /// context, so [`attempt()`](crate::attempt) gives the idempotency key.
    ///
    /// Follows [`sleep`](Retry::sleep) in the expansion, whose sleeper tells whether the function
    /// can await an async fallback ([`Awaits`]), and [`on_result`](Retry::on_result), whose slot
    /// tells what the fallback takes.
    pub fn fallback<J, Out, M>(
        self,
        f: J,
    ) -> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G, Out::Slot<J>>, X, L>
    where
        R: FallbackInput<T, E>,
        J: FnOnce(R::Input, GiveUp) -> Out,
        Out: FallbackOutput<T, E, M>,
        S: Awaits<M>,
    {
        let fallback = Out::slot::<R, J>(f);
        self.with_options(|s, h, x| (s, with_hook!(h, fallback = fallback), x))
    }
}

impl<'p, T, E, C, S, R, N, G, F, X, L> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G, F>, X, L> {
    /// Decides what follows an attempt: `Break` with the function's result (for an async
    /// fallback, a future of it), or `Continue` with the state for the next attempt, whose
    /// [`pause`](Retry::pause) is then taken.
    ///
    /// An accepted `Ok` is decided at once; anything else goes to the decision after a failure.
    /// The state is taken and given back by value: `PERFORMANCE.md` §2.
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    pub fn next(
        self,
        attempted: Attempted<T, E>,
    ) -> ControlFlow<<F as Fallback<T, E>>::Output<()>, Self>
    where
        R: Slot<T, (), Verdict>,
        N: Slot<Result<T, E>, RetryEvent>,
        G: Slot<Result<T, E>, GiveUp>,
        F: Fallback<T, E>,
        X: MaybeExtras<'p, E>,
        L: Logs<E>,
    {
        self.next_lending((), attempted)
    }

    /// [`next`](Retry::next) for a function with an idempotency key and a `fallback`: the
    /// fallback runs with the key lent to it, as the attempts had it, so that
    /// [`attempt()`](crate::attempt)`.key()` inside it (an async one included) gives the same
    /// key. A function without a fallback never needs it and calls `next`.
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    pub fn next_keyed<'k, K: KeyParam + ?Sized>(
        self,
        key: &'k K,
        attempted: Attempted<T, E>,
    ) -> ControlFlow<<F as Fallback<T, E>>::Output<&'k K>, Self>
    where
        R: Slot<T, (), Verdict>,
        N: Slot<Result<T, E>, RetryEvent>,
        G: Slot<Result<T, E>, GiveUp>,
        F: Fallback<T, E>,
        X: MaybeExtras<'p, E>,
        L: Logs<E>,
    {
        self.next_lending(key, attempted)
    }

    #[inline(always)]
    #[allow(clippy::type_complexity)]
    fn next_lending<K: KeySlot>(
        self,
        key: K,
        attempted: Attempted<T, E>,
    ) -> ControlFlow<<F as Fallback<T, E>>::Output<K>, Self>
    where
        R: Slot<T, (), Verdict>,
        N: Slot<Result<T, E>, RetryEvent>,
        G: Slot<Result<T, E>, GiveUp>,
        F: Fallback<T, E>,
        X: MaybeExtras<'p, E>,
        L: Logs<E>,
    {
        match attempted {
            Attempted::Completed(Ok(value)) => {
                let verdict = self.hooks.judge(&value);
                if !verdict.is_retry() {
                    return ControlFlow::Break(self.accept(value));
                }
                self.after_failure(key, Attempted::Completed(Ok(value)), verdict)
            }
            attempted => self.after_failure(key, attempted, Verdict::Fail),
        }
    }

    /// The end of a call whose `Ok` was accepted: the breaker hears of it, the metrics count
    /// it, and it is the result.
    #[inline(always)]
    fn accept<K: KeySlot>(mut self, value: T) -> <F as Fallback<T, E>>::Output<K>
    where
        F: Fallback<T, E>,
        X: MaybeExtras<'p, E>,
    {
        if let Some(extras) = self.extras.get_mut() {
            extras.record(false, self.site.clock);
        }
        #[cfg(feature = "metrics")]
        if self.progress.retries == 0 {
            crate::metrics::first_try(self.site.name);
        } else {
            crate::metrics::call_ended(
                self.site.name,
                crate::metrics::Ended::Accepted,
                self.progress.retries + 1,
            );
        }
        F::ready(Ok(value))
    }

    /// Retries taken so far.
    pub fn retries(&self) -> u32 {
        self.progress.retries
    }

    /// The pause before the next attempt, as `next` decided it.
    fn decided_pause(&self) -> Duration {
        Duration::from_nanos(self.progress.previous_pause)
    }

    /// Whether the decided pause is to be slept: not inside a recording (which records it
    /// instead), and not when it is zero.
    #[inline(always)]
    fn sleeps(&self) -> bool {
        if crate::testing::recording() {
            crate::testing::record_pause(self.decided_pause());
            return false;
        }
        self.progress.previous_pause != 0
    }

    /// The pause of a sync function.
    #[inline]
    pub fn pause_blocking(&self) {
        if self.sleeps() {
            std::thread::sleep(self.decided_pause());
        }
    }

    /// The pause of an async function, its timer boxed (`PERFORMANCE.md` §4). A zero pause is
    /// not slept (tokio's timer would round it up to its 1 ms tick).
    ///
    /// The future is opaque, so that a `sleep = f` that is not an async sleep is one error, at
    /// `sleep`, and not a second one here.
    #[inline]
    pub fn pause(&self) -> impl Future<Output = ()> + use<'p, T, E, C, S, R, N, G, F, X, L>
    where
        S: Sleeper,
    {
        if !self.sleeps() {
            return Pause(None);
        }
        Pause(Some(Box::pin(self.sleeper.sleep(self.decided_pause()))))
    }
}

/// The end of an async function with a fallback, as a future: `return finish(result).await`.
#[inline(always)]
pub fn finish<R: IntoFinish>(result: R) -> R::Future {
    result.into_finish()
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

// Under loom, `RetryBudget::new` is not `const`, so these (with their `static` budget) are not built.
#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use crate::Jitter;
    use std::fmt;

    fn transient(_: &&'static str) -> bool {
        true
    }

    /// The pause before the next attempt and the state for it, or the function's result.
    type Step<'p, T, E, C, S> =
        ControlFlow<Result<T, E>, (Duration, Retry<'p, Result<T, E>, C, S>)>;

    /// What the expansion does with one attempt whose body returns `outcome`: the pause before
    /// the next attempt and the state for it, or the function's result.
    fn step<T, E: fmt::Debug, C, S>(
        mut retry: Retry<'_, Result<T, E>, C, S>,
        outcome: Result<T, E>,
    ) -> Step<'_, T, E, C, S> {
        let attempted = retry.attempt(|| outcome);
        match retry.next(attempted) {
            ControlFlow::Break(result) => ControlFlow::Break(result),
            ControlFlow::Continue(retry) => ControlFlow::Continue((retry.decided_pause(), retry)),
        }
    }

    /// The pause `step` decided; panics on `Break`.
    fn paused<T: fmt::Debug, E: fmt::Debug, C, S>(
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

    thread_local! {
        static CLOCK_READS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// A clock that counts how often it is read on this thread.
    fn counted_clock() -> Instant {
        CLOCK_READS.with(|reads| reads.set(reads.get() + 1));
        Instant::now()
    }

    fn clock_reads() -> u32 {
        CLOCK_READS.with(std::cell::Cell::get)
    }

    /// The state of a function that returns `Result<(), &str>` and retries every error.
    type Plain<'p> = Retry<'p, Result<(), &'static str>, fn(&&'static str) -> bool>;

    /// `start` with the counting clock.
    fn counted(policy: &Policy) -> Plain<'_> {
        CLOCK_READS.with(|reads| reads.set(0));
        Retry::with_parts(policy, "f", counted_clock, transient, Unset)
    }

    #[test]
    fn the_happy_path_reads_no_clock_without_deadline_or_a_hook_that_hears_the_time() {
        let policy = Policy::new();
        let mut retry = counted(&policy)
            .on_result(|_| false)
            .on_give_up(|_: &&str| {});
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        assert_eq!(clock_reads(), 0);
    }

    #[test]
    fn a_deadline_reads_the_clock_once_as_the_call_starts() {
        let policy = Policy::new().deadline(Duration::from_secs(10));
        let mut retry = counted(&policy).notify(|_: &&str, _: &RetryEvent| {});
        assert_eq!(clock_reads(), 1);
        assert!(retry.progress.started.is_some());
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        assert_eq!(clock_reads(), 1, "notify needs no second reading");
    }

    #[test]
    fn notify_reads_the_clock_once_as_the_first_attempt_starts() {
        let policy = Policy::new();
        let mut retry = counted(&policy).notify(|_: &&str, _: &RetryEvent| {});
        assert_eq!(clock_reads(), 0, "the builder reads no clock");
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        assert_eq!(clock_reads(), 1);
    }

    #[test]
    fn a_hook_that_hears_the_time_reads_the_clock_once_as_the_first_attempt_starts() {
        // `on_give_up` with a `GiveUp`, and `fallback`, hear the time spent.
        let policy = Policy::new();
        let mut retry = counted(&policy).on_give_up(|_: &&str, _: &GiveUp| {});
        assert_eq!(clock_reads(), 0, "the builder reads no clock");
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        assert_eq!(clock_reads(), 1);

        let mut retry = counted(&policy).fallback(|e, _| Err(e));
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        assert_eq!(clock_reads(), 1);
    }

    #[test]
    fn a_failure_reads_no_clock_without_a_hook_deadline_budget_or_breaker() {
        let policy = Policy::new().jitter(Jitter::None);
        let mut retry = counted(&policy)
            .on_give_up(|_: &&str| {})
            .log_level(level::Warn);
        let attempted = retry.attempt(|| Err("busy"));
        assert!(matches!(retry.next(attempted), ControlFlow::Continue(_)));
        assert_eq!(clock_reads(), 0);
    }

    #[test]
    fn retry_now_takes_no_pause_and_counts_the_retry() {
        let policy = Policy::new().max(1);
        let retry = Retry::<Result<(), &str>>::start(&policy, "f", |_: &&str| Verdict::RetryNow);
        let (pause, retry) = paused(step(retry, Err("a")));
        assert_eq!((pause, retry.retries()), (Duration::ZERO, 1));
        assert!(matches!(
            step(retry, Err("b")),
            ControlFlow::Break(Err("b"))
        ));
    }

    #[test]
    fn the_budget_gets_its_deposit_as_the_first_attempt_starts() {
        static BUDGET: RetryBudget = RetryBudget::new().ratio(1.0);
        let policy = Policy::new().jitter(Jitter::None);
        let mut retry = Retry::<Result<(), &str>>::start(&policy, "f", transient).budget(&BUDGET);
        assert_eq!(BUDGET.available(), 0.0, "the builder deposits nothing");
        let attempted = retry.attempt(|| Err("busy"));
        assert_eq!(BUDGET.available(), 1.0);
        // The retry takes this second's reserve, not the token; the second attempt deposits
        // nothing more.
        let ControlFlow::Continue(mut retry) = retry.next(attempted) else {
            panic!("expected a retry");
        };
        let _ = retry.attempt(|| Ok(()));
        assert_eq!(BUDGET.available(), 1.0);
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

//! The loop's state: one call's, carried across its attempts, and its step after each attempt
//! ([`Retry::next`]). The loop that drives it for every door that is not a macro is one file,
//! `drive.rs`.
//!
//! The attribute and `retry_block!` write the loop out, so that `?`, `return` and borrows in the
//! user's body work as written; they drive the state with one call per step:
//!
//! ```text
//! use ::retry_runtime::__private as __retry_rt;
//! let mut state = __retry_rt::Shape::<Result<T, E>>::new()
//!     .start(&POLICY, "name", classify, __retry_rt::Unset).notify(f);
//! loop {
//!     let attempted = state.attempt(|| body);   // or `run(async { body }).await`
//!     state = match state.next(attempted) {
//!         ControlFlow::Break(result) => return result,  // `finish(result).await` with an async fallback
//!         ControlFlow::Continue(state) => state,
//!     };
//!     state.pause_blocking();                         // or `pause().await`
//! }
//! ```
//!
//! (A function with an idempotency key lends it to each attempt: `state.key(&*key).run(...)`.)
//! Every other door, the [`Retrier`](crate::Retrier) and the integrations built on
//! [`engine`](crate::engine), runs the same steps in [`drive`](drive::drive) or
//! [`drive_blocking`](drive::drive_blocking).
//!
//! - here: the state and its entry points, `start`, the builders (one per option, named by its
//!   key, which store what they are given and do nothing else), `next` and the pause;
//! - [`options`]: the options as one type, slot by slot; [`hooks`], [`fallback`] and [`extras`]
//!   what each slot holds; an option that is not written is the zero-sized [`Unset`] in its
//!   slot, so it costs nothing;
//! - [`attempt`]: running one attempt, which returns what happened to it ([`Attempted`]), with
//!   the idempotency key lent to it if the loop has one; [`hedge`] a hedged attempt;
//! - [`decide`]: the decision after an attempt that did not end in an accepted `Ok`: pause and
//!   retry, return, or give up (and why);
//! - [`observe`]: where the loop's events go (the logs, the metrics, the spans): one seam;
//! - [`events`]: what the hooks hear, the public [`RetryEvent`] and [`GiveUp`].
//!
//! Why the state is shaped as it is (by value, inline, zero-sized options, a small future) is
//! in one design note beside these files, `state/PERFORMANCE.md`; a line that follows from it
//! names its section.

// The traits the loop asks its option slots through are this crate's business: they appear in
// the bounds of the loop's methods (which the expansion calls, but never names), not in any
// public signature a user reads.
#![allow(private_bounds, private_interfaces)]

mod attempt;
mod decide;
pub(crate) mod drive;
pub(crate) mod dynamic;
mod events;
pub(crate) mod extras;
pub(crate) mod fallback;
mod hedge;
pub(crate) mod hooks;
pub(crate) mod log;
pub(crate) mod observe;
mod options;
mod seam;
pub(crate) mod spans;

use crate::hooks::Blocking;
pub use attempt::{Attempted, KeyedOutcome};
pub(crate) use drive::{Hedged, Plain, drive, drive_blocking};
pub use dynamic::{DynHooks, Settings};
pub use events::{GiveUp, GiveUpReason, RetryEvent};
pub use fallback::{AsyncForm, FallbackArgument, FallbackOutput, SyncForm};
pub use hooks::{ErrorForm, GiveUpHook, Hooks, IntoVerdict, NotifyHook, OutcomeForm};
pub use log::{LogLevel, level};
pub use options::{ByTransient, Classifier, DefaultSleeper, Head, Opts};
pub use seam::{Decide, Failure, Next, NextCopy};

use crate::breaker::FromCircuitOpen;
use crate::context::{self, KeySlot};
use crate::named::Named;
use crate::overload::FromRejected;
use crate::overload::aws2026_call::Aws2026Call;
use crate::timer::{FromElapsed, IntoSleeper, Sleeper};
use crate::{AdmissionGate, Aws2026Standard, CircuitBreaker, Policy, RetryBudget, Verdict};
use extras::{Deciding, Extras, Guard, Linger, MaybeExtras, Timeout};
use fallback::{FallbackScope, IntoFinish};
use hooks::HookSet;
use hooks::OnResult;
use log::Show;

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

/// An option that was not written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unset;

/// The state of one call, across its attempts.
///
/// Built once per call with its `Result`'s two sides, its classifier and any options; then each
/// attempt runs through [`attempt`](Retry::attempt) or [`run`](Retry::run), which return what
/// happened to it, and [`next`](Retry::next) decides what follows: `Break` carries the call's
/// result, `Continue` the state for the next attempt, whose pause is then taken. An `Ok` outcome
/// is decided without any work.
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
/// Every option lives in a slot of the options `O` (an [`Opts`]) that is the zero-sized
/// [`Unset`] when the option is not written. Why the state is shaped for the happy path, and
/// kept by value: `state/PERFORMANCE.md` §1 and §2.
///
/// # `Debug` or not
///
/// `start` comes in two forms: [`Shape`]'s for an error type with `Debug`, and
/// `WithoutDebug`'s, which `Shape` derefs to, for any other (a generic `E` without the bound
/// included). Rust looks for a method on `Shape` before it derefs, and takes `Shape`'s `start`
/// whenever `E: Debug` holds, so the choice is made where the function is written, per
/// function, and a log event shows the error with `Debug` or by its type name without adding a
/// bound to the function.
pub struct Retry<'p, T, E, O = Opts> {
    pub(crate) site: Site<'p>,
    pub(crate) progress: Progress,
    pub(crate) opts: O,
    /// The call's span (feature `attempt-spans`; zero-sized without it).
    pub(crate) spans: spans::CallSpan,
    /// The call's `Result` type, and (feature `faults`) how an injected error becomes its `E`.
    pub(crate) value: crate::faults::Carried<T, E>,
}

/// The loop's state, its options slot by slot: the classifier, the timer and how the events show
/// an error (`C`, `S`, `D`), the hooks (`H`) and the extras (`X`).
pub(crate) type Loop<'p, T, E, C, S, D, H, X> = Retry<'p, T, E, Opts<Head<C, S, D>, H, X>>;

/// What is fixed for the whole call.
#[derive(Clone, Copy)]
pub(crate) struct Site<'p> {
    pub(crate) policy: &'p Policy,
    pub(crate) name: &'static str,
    pub(crate) clock: fn() -> Instant,
}

/// What changes from attempt to attempt: small and `Copy`, handed by value to the decision after
/// a failure and back. Performance: `PERFORMANCE.md` §2.
#[derive(Clone, Copy)]
pub(crate) struct Progress {
    /// Retries taken so far; the attempt under way (or that just ended) is number `retries + 1`.
    pub(crate) retries: u32,
    /// An enclosing annotated function or `scope::caller_retries` retries this work.
    pub(crate) retried_above: bool,
    /// The hedges that the attempt that just ended started (`hedge = ...`), for its event. A
    /// `u16`, which fits beside `retries` and `retried_above` without growing the state.
    pub(crate) hedges: u16,
    /// The level of the one event that ends a call that failed (`log_level`): fixed for the
    /// call, but kept here, where it fits beside the three above without growing the state
    /// (`PERFORMANCE.md` §4).
    pub(crate) level: LogLevel,
    /// The pause `next` decided last, in nanoseconds: the one to take now, and the previous one
    /// for decorrelated jitter. A `u64`, not a `Duration`: `PERFORMANCE.md` §4.
    pub(crate) previous_pause: u64,
    /// When the first attempt started, read only for a deadline or a hook that hears the time.
    pub(crate) started: Option<Instant>,
}

impl Progress {
    /// The progress of a call that a driver starts ([`Retry::restart`] reads the rest).
    #[inline]
    pub(crate) fn idle(level: LogLevel) -> Progress {
        Progress {
            retries: 0,
            retried_above: false,
            hedges: 0,
            level,
            previous_pause: 0,
            started: None,
        }
    }

    /// The progress of a call that has not made an attempt yet: the clock read as it starts if
    /// the policy has a deadline (`PERFORMANCE.md` §5).
    #[inline]
    fn new(policy: &Policy, clock: fn() -> Instant) -> Progress {
        Progress {
            retried_above: context::retried_above(),
            started: policy.get_deadline().map(|_| clock()),
            ..Progress::idle(LogLevel::Error)
        }
    }

    /// The progress after a retry with this pause (in nanoseconds) was decided.
    #[inline]
    fn retried_after(self, pause: u64) -> Progress {
        Progress {
            retries: self.retries + 1,
            previous_pause: pause,
            ..self
        }
    }

    /// Time since the first attempt started, or zero if the clock was not read then. By value
    /// and inline: `PERFORMANCE.md` §2.
    #[inline]
    pub(crate) fn elapsed(self, clock: fn() -> Instant) -> Duration {
        self.started
            .map_or(Duration::ZERO, |t| clock().saturating_duration_since(t))
    }
}

/// The clock of sync loops: [`Instant::now`], or a recording's virtual clock.
pub(crate) fn std_now() -> Instant {
    crate::testing::virtual_now().unwrap_or_else(Instant::now)
}

/// The timer a loop starts with, and the clock it reads: none for a sync loop ([`Unset`], the
/// clock of [`std_now`]), or a [`Sleeper`] and its clock.
///
/// Only these two: a `sleep = f` names its timer with a builder after `start`, and without the
/// `tokio` feature the async default is a [`NoTimer`](crate::timer::NoTimer), which is none, so
/// that such a loop is this one error, at `start`.
#[diagnostic::on_unimplemented(
    message = "this async `#[retry]` function has no timer to pause with",
    label = "no timer",
    note = "enable the `tokio` feature of `retry-runtime` (on by default), or name a sleep function for your runtime: `#[retry(sleep = my_runtime::sleep)]` with `fn sleep(Duration) -> impl Future<Output = ()>`"
)]
pub(crate) trait Timer {
    /// The clock the loop reads for its deadline and its hooks: a sync loop's unless the timer
    /// has its own.
    #[inline]
    fn clock() -> Instant {
        std_now()
    }
}

impl Timer for Unset {}

#[cfg(feature = "tokio")]
impl Timer for crate::timer::TokioTimer {
    #[inline]
    fn clock() -> Instant {
        crate::timer::clock_of::<crate::timer::TokioTimer>()
    }
}

/// The timer of an async function or block without `sleep = f`: tokio's with the `tokio`
/// feature; without it one that is no timer, so that the loop does not compile and says
/// why.
pub const ASYNC: DefaultSleeper = DefaultSleeper {};

/// The `Result` of a call, whose two sides the state is made for: written out by the attribute
/// (`Shape::<Result<T, E>>::new()`), read off a block's closure by `retry_block!`
/// ([`of`](Shape::of), [`of_async`](Shape::of_async)).
pub struct Shape<R>(WithoutDebug<R>);

/// Where [`Shape`] derefs to: the `start` of an error type without `Debug` (see [`Retry`],
/// "`Debug` or not").
pub struct WithoutDebug<R>(PhantomData<fn() -> R>);

impl<R> std::ops::Deref for Shape<R> {
    type Target = WithoutDebug<R>;
    fn deref(&self) -> &WithoutDebug<R> {
        &self.0
    }
}

impl<R> Default for Shape<R> {
    fn default() -> Self {
        Shape::new()
    }
}

impl<R> Shape<R> {
    /// The shape of a function that returns `R`.
    pub const fn new() -> Self {
        Shape(WithoutDebug(PhantomData))
    }

    /// The shape of a sync block's closure; borrows it only for the call. `FnOnce`, for the
    /// output type alone: that each attempt can call the closure again is asked by the
    /// expansion, with a bound whose name tells the user why (`retry-macro/src/block.rs`).
    pub fn of<B: FnOnce() -> R>(_body: &B) -> Self {
        Shape(WithoutDebug(PhantomData))
    }

    /// The shape of an async block's closure; borrows it only for the call (`AsyncFnOnce`, as
    /// [`of`](Shape::of)).
    pub fn of_async<B: AsyncFnOnce() -> R>(_body: &B) -> Self {
        Shape(WithoutDebug(PhantomData))
    }
}

/// The extras after `timeout`, `budget`, `breaker`, `gate` or `nested = retry`: made if none
/// were yet, their decider slot as it was.
pub type WithExtras<'p, E, X> = Extras<'p, E, <X as MaybeExtras<E>>::Hold>;

/// The options a loop starts with: its classifier, its timer, and how its events show an error.
pub type Started<C, E, S, D = log::ByDebug> = Opts<Head<hooks::Classify<C, E>, S, D>>;

impl<T, E: fmt::Debug> Shape<Result<T, E>> {
    /// The state of one call with `policy`, named `name` in its events, judging errors with
    /// `classify` and pausing with `timer` ([`Unset`] for a sync loop, whose pauses block, and
    /// for one that names its timer with `sleep` next). For an error type with `Debug`, which the
    /// events show; `WithoutDebug::start` for the others.
    #[inline]
    pub fn start<'p, C, V, S: Timer>(
        self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
        timer: S,
    ) -> Retry<'p, T, E, Started<C, E, S>>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, classify, timer)
    }
}

impl<T, E> WithoutDebug<Result<T, E>> {
    /// [`Shape::start`] for an error type without `Debug`: the same, logging the error by its
    /// type name.
    #[allow(private_bounds)]
    #[inline]
    pub fn start<'p, C, V, S: Timer>(
        &self,
        policy: &'p Policy,
        name: &'static str,
        classify: C,
        timer: S,
    ) -> Retry<'p, T, E, Started<C, E, S, log::ByName>>
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        Retry::with_parts(policy, name, classify, timer)
    }
}

impl<'p, T, E, C, S: Timer, D> Retry<'p, T, E, Started<C, E, S, D>> {
    /// `classify`'s bound is checked here, once, and turned into the pointer that `next` calls
    /// without a bound of its own.
    #[inline]
    fn with_parts<V>(policy: &'p Policy, name: &'static str, classify: C, timer: S) -> Self
    where
        C: Fn(&E) -> V,
        V: IntoVerdict,
    {
        let clock = S::clock;
        Retry {
            site: Site {
                policy,
                name,
                clock,
            },
            // The start is read here, not at the first attempt. Performance: PERFORMANCE.md §5.
            progress: Progress::new(policy, clock),
            opts: Opts {
                head: Head {
                    classify: hooks::Classify::new(classify, |c, error, ()| {
                        c(error).into_verdict()
                    }),
                    sleeper: timer,
                    marks: PhantomData,
                },
                hooks: Hooks::default(),
                extras: Unset,
            },
            spans: spans::CallSpan::default(),
            value: crate::faults::Carried::NONE,
        }
    }
}

impl<'p, T, E, O> Retry<'p, T, E, O> {
    /// The same state with its options replaced by `f`.
    #[inline]
    fn with<O2>(self, f: impl FnOnce(O) -> O2) -> Retry<'p, T, E, O2> {
        Retry {
            site: self.site,
            progress: self.progress,
            opts: f(self.opts),
            spans: self.spans,
            value: self.value,
        }
    }
}

// The builders: each stores what it is given in its slot of the options, and does nothing else.
// Each names the options it gives back: the same, with its own slot replaced.
#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, D, H, X> Loop<'p, T, E, C, S, D, H, X>
where
    H: HookSet<T, E>,
    X: MaybeExtras<E> + 'p,
{
    /// `sleep = f`: pause with `f` instead of tokio's timer, a function
    /// `Fn(Duration) -> impl Future<Output = ()>` or a type that implements [`Sleeper`]. The
    /// deadline is then measured on the sleeper's clock ([`Sleeper::now`]: [`Instant::now`] for
    /// a function). If `start` read the time for a deadline, it is read again here, on the
    /// sleeper's clock.
    pub fn sleep<F, M>(mut self, f: F) -> Loop<'p, T, E, C, F::Sleeper, D, H, X>
    where
        F: IntoSleeper<M>,
    {
        self.site.clock = crate::timer::clock_of::<F::Sleeper>;
        if self.progress.started.is_some() {
            self.progress.started = Some((self.site.clock)());
        }
        self.with(|o| Opts {
            head: Head {
                classify: o.head.classify,
                sleeper: f.into_sleeper(),
                marks: PhantomData,
            },
            hooks: o.hooks,
            extras: o.extras,
        })
    }

    /// `timeout = "2s"`: each attempt is cut off after `limit` (clipped to the time left before
    /// the deadline) and counts as a transient failure.
    pub fn timeout(self, limit: Duration) -> Loop<'p, T, E, C, S, D, H, WithExtras<'p, E, X>>
    where
        E: FromElapsed,
    {
        let timeout = Timeout::new(limit, E::from_elapsed);
        self.with(|o| o.with_extras(|x| x.timeout = Some(timeout)))
    }

    /// `budget = B`: retries draw from a shared [`RetryBudget`]; this call's first attempt
    /// deposits into it. When it is empty the loop gives up with the current error.
    pub fn budget(
        self,
        budget: &'p RetryBudget,
    ) -> Loop<'p, T, E, C, S, D, H, WithExtras<'p, E, X>> {
        self.with(|o| o.with_extras(|x| x.budget = Some(budget)))
    }

    /// `breaker = B`: while the [`CircuitBreaker`] is open, the call returns
    /// `E::from(CircuitOpen)` at once without running the body; every attempt feeds it, and a
    /// failure after which it is open ends the loop at once with that failure.
    pub fn breaker(
        self,
        breaker: &'p CircuitBreaker,
    ) -> Loop<'p, T, E, C, S, D, H, WithExtras<'p, E, X>>
    where
        E: FromCircuitOpen,
    {
        let guard = Guard::new(breaker, E::from_circuit_open);
        self.with(|o| o.with_extras(|x| x.breaker = Some(guard)))
    }

    /// `policy = "name"`: the budget and the breaker of the policy the call resolved (`named`,
    /// held by the call for all its attempts), if it resolved and has them, in place of those
    /// written beside it. The name's breaker takes the place of a written `breaker` only: the
    /// written one is what shows that `E` can carry a [`CircuitOpen`](crate::CircuitOpen).
    pub fn named(
        self,
        named: &'p Option<Arc<Named>>,
    ) -> Loop<'p, T, E, C, S, D, H, WithExtras<'p, E, X>> {
        let named = named.as_deref();
        self.with(|o| {
            o.with_extras(|x| {
                if let Some(budget) = named.and_then(Named::get_budget) {
                    x.budget = Some(budget);
                }
                if let (Some(guard), Some(breaker)) =
                    (&mut x.breaker, named.and_then(Named::get_breaker))
                {
                    guard.breaker = breaker;
                }
            })
        })
    }

    /// `gate = G`: every attempt, the first included, asks the [`AdmissionGate`] first; while
    /// it sheds load, the call returns `E::from(Rejected)` at once without running the body,
    /// and a `fallback` hears [`GiveUpReason::GateRejected`]. Every attempt that runs reports
    /// its answer to the gate; a rate-limiting gate's wait is taken before the attempt (the
    /// expansion runs a gated async attempt with [`run_timed`](Retry::run_timed), which takes
    /// it).
    pub fn gate(self, gate: &'p AdmissionGate) -> Loop<'p, T, E, C, S, D, H, WithExtras<'p, E, X>>
    where
        E: FromRejected,
    {
        let shedder = extras::Shedder::new(gate, E::from_rejected);
        self.with(|o| o.with_extras(|x| x.gate = Some(shedder)))
    }

    /// `aws2026 = AWS`: the AWS SDKs' updated standard mode decides after each failure in
    /// place of the policy's `max` and pauses (see [`Aws2026Standard`]).
    pub fn aws2026(
        self,
        aws: &'p Aws2026Standard,
    ) -> Loop<'p, T, E, C, S, D, H, Extras<'p, E, Deciding<Aws2026Call<'p>, T, E>>> {
        let decider = Some(Aws2026Call::new(aws));
        self.with(|o| o.map_extras(|extras| extras.into_extras().deciding(decider)))
    }

    /// The probe of this call's `Result<T, E>` (its `maker()` is the expansion's argument to
    /// [`faults`](Retry::faults)): made from the state, so that a `T` still to be inferred (an
    /// `impl Trait` output) is the state's own.
    #[inline]
    pub fn probe(&self) -> crate::faults::Probe<Result<T, E>> {
        crate::faults::Probe::new()
    }

    /// Fault injection (feature `faults`): how an error fault injected at this site becomes `E`,
    /// as the expansion's probe found it ([`Probe`](crate::faults::Probe)). Without the
    /// feature, nothing.
    #[inline]
    pub fn faults(mut self, maker: crate::faults::Maker<E>) -> Self {
        self.value = self.value.with(maker);
        self
    }

    /// `nested = retry`: keep retrying even inside another retrying function.
    pub fn nested_retry(self) -> Loop<'p, T, E, C, S, D, H, WithExtras<'p, E, X>> {
        self.with(|o| o.with_extras(|x| x.nested_retry = true))
    }

    /// `log_level = "warn"`: the level of the one event logged when a call that failed ends
    /// (`ERROR` by default).
    pub fn log_level(mut self, level: impl Into<LogLevel>) -> Self {
        self.progress.level = level.into();
        self
    }

    /// `on_result = f`: an `Ok` value for which `f` answers `true` (or a [`Verdict`] that
    /// retries) is treated as a transient failure; when the retries run out, the last `Ok`
    /// value is returned.
    pub fn on_result<J, V>(
        self,
        f: J,
    ) -> Loop<'p, T, E, C, S, D, H::WithOnResult<OnResult<J, T>>, X>
    where
        J: Fn(&T) -> V,
        V: IntoVerdict,
    {
        let slot = OnResult::new(f, |f, value, ()| f(value).into_verdict());
        self.with(|o| o.map_hooks(|hooks| hooks.with_on_result(slot)))
    }

    /// `notify = f`: called before each pause with a [`RetryEvent`] and, as `f` takes it, the
    /// error (`Fn(&E, &RetryEvent)`, which hears pauses after errors only) or the outcome
    /// (`Fn(Result<&T, &E>, &RetryEvent)`, which also hears pauses after an `Ok` that
    /// `on_result` rejected).
    ///
    /// In an async loop `f` may be async (`async |error: &E, event: &RetryEvent| ...`): the loop
    /// awaits it before the pause it announces, and its time is taken out of that pause, so the
    /// next attempt starts when the pause ends, or when the hook ends if it ran longer. It is
    /// bounded by the deadline: a hook still running when the deadline comes is dropped, and
    /// the next attempt, the last the deadline allows, starts then. Without a deadline the loop
    /// waits for the hook as long as it runs. A dropped call drops the hook's future; a hook
    /// that panics, sync or async, unwinds out of the call as a panic in the body does.
    /// A sync loop's expansion calls [`notify_sync`](Retry::notify_sync).
    pub fn notify<J, M>(self, f: J) -> Loop<'p, T, E, C, S, D, H::WithNotify<J::Slot>, X>
    where
        J: NotifyHook<T, E, M>,
    {
        self.with(|o| o.map_hooks(|hooks| hooks.with_notify(f.into_slot())))
    }

    /// [`notify`](Retry::notify) in a sync loop, which cannot await: an async hook there is the
    /// one error that says so.
    pub fn notify_sync<J, M: Blocking>(
        self,
        f: J,
    ) -> Loop<'p, T, E, C, S, D, H::WithNotify<J::Slot>, X>
    where
        J: NotifyHook<T, E, M>,
    {
        self.notify(f)
    }

    /// `on_give_up = f`: called once when the loop gives up (retries used up, the deadline, a
    /// server-suggested pause too long, the budget empty, the breaker open). `Fn(&E)` hears the
    /// last error; `Fn(&E, &GiveUp)` also why; `Fn(Result<&T, &E>, &GiveUp)` also a last `Ok`
    /// that `on_result` rejected.
    ///
    /// In an async loop `f` may be async: it is awaited before the fallback runs and the call
    /// returns (the expansion then ends with [`finish`]). It is not bounded by the deadline,
    /// which bounds the retries, not the end; a dropped call drops its future.
    pub fn on_give_up<J, M>(self, f: J) -> Loop<'p, T, E, C, S, D, H::WithGiveUp<J::Slot>, X>
    where
        J: GiveUpHook<T, E, M>,
    {
        self.with(|o| o.map_hooks(|hooks| hooks.with_give_up(f.into_slot())))
    }

    /// [`on_give_up`](Retry::on_give_up) in a sync loop, as
    /// [`notify_sync`](Retry::notify_sync).
    pub fn on_give_up_sync<J, M: Blocking>(
        self,
        f: J,
    ) -> Loop<'p, T, E, C, S, D, H::WithGiveUp<J::Slot>, X>
    where
        J: GiveUpHook<T, E, M>,
    {
        self.on_give_up(f)
    }

    /// `fallback = f`: when the loop gives up, `f(error, why)` is called, and what it returns is
    /// the call's result. Sync (`FnOnce(E, GiveUp) -> Result<T, E>`), or in an async loop also
    /// async (returning a future of that `Result`). With `on_result`, whose rejected `Ok` can
    /// end the loop too, `f` takes the outcome instead of the error:
    /// `FnOnce(Result<T, E>, GiveUp)`. It runs in the last attempt's context, so
    /// [`attempt()`](crate::attempt) gives the idempotency key.
    ///
    /// Follows [`on_result`](Retry::on_result) in the expansion, whose slot tells what the
    /// fallback takes. A sync loop's expansion calls [`fallback_sync`](Retry::fallback_sync).
    ///
    /// The expansion passes a closure here, whose parameters take their types from this bound;
    /// a fallback named by its path goes through [`Fallback::attach`], whose message for a
    /// fallback of another shape names what the loop gives it.
    pub fn fallback<J, Out, M>(
        self,
        f: J,
    ) -> Loop<'p, T, E, C, S, D, H::WithFallback<Out::Slot<J>>, X>
    where
        J: FnOnce(H::Input, GiveUp) -> Out,
        Out: FallbackOutput<T, E, M>,
    {
        let slot = Out::slot::<H::OnResult, J, H::Input>(f);
        self.with(|o| o.map_hooks(|hooks| hooks.with_fallback(slot)))
    }

    /// [`fallback`](Retry::fallback) in a sync loop, whose fallback is sync: the form is
    /// settled before what `f` returns is looked at, so that an async fallback there is the one
    /// error "must return `Result<T, E>`".
    #[allow(clippy::type_complexity)]
    pub fn fallback_sync<J, Out>(
        self,
        f: J,
    ) -> Loop<'p, T, E, C, S, D, H::WithFallback<Out::Slot<J>>, X>
    where
        J: FnOnce(H::Input, GiveUp) -> Out,
        Out: FallbackOutput<T, E, SyncForm>,
    {
        self.fallback(f)
    }
}

/// `fallback = f` for a fallback named by its path (`fallback = use_cached`, the usual form):
/// the expansion writes `Fallback(shape, f).attach(loop)`, every token of it at the user's `f`;
/// `shape` carries the function's result type.
///
/// `f` is in the receiver so that its type is known before the bounds of `attach` are looked at
/// (and the result's, so that the messages name it):
/// the type of its first parameter `A` is read off `f` itself, and [`FallbackArgument`] then
/// compares it with what the loop gives it, in one error at `f` whose message names both. With
/// the bound `FnOnce(H::Input, GiveUp)` of `Retry::fallback`, rustc reported E0631, named
/// `Retry::fallback` (beside `on_result` a second time) and suggested a closure with a
/// placeholder. What `f` returns is checked as by `Retry::fallback`, with
/// [`FallbackOutput`]'s message.
pub struct Fallback<R, F>(pub Shape<R>, pub F);

impl<T, E, F> Fallback<Result<T, E>, F> {
    /// Gives the fallback to the loop `retry` of an async function or block: `f(error, why)`
    /// when it gives up, or beside `on_result` `f(outcome, why)`; sync or async.
    #[allow(clippy::type_complexity)]
    pub fn attach<'p, C, S, D, H, X, A, Out, M>(
        self,
        retry: Loop<'p, T, E, C, S, D, H, X>,
    ) -> Loop<'p, T, E, C, S, D, H::WithFallback<Out::Slot<F>>, X>
    where
        H: HookSet<T, E>,
        F: FnOnce(A, GiveUp) -> Out,
        A: FallbackArgument<H::Input>,
        Out: FallbackOutput<T, E, M>,
    {
        let slot = Out::slot::<H::OnResult, F, A>(self.1);
        retry.with(|o| o.map_hooks(|hooks| hooks.with_fallback(slot)))
    }

    /// [`attach`](Fallback::attach) for a sync function or block, whose fallback is sync: the
    /// form is settled before what `f` returns is looked at, so that an async fallback there is
    /// the one error "must return `Result<T, E>`".
    #[allow(clippy::type_complexity)]
    pub fn attach_sync<'p, C, S, D, H, X, A, Out>(
        self,
        retry: Loop<'p, T, E, C, S, D, H, X>,
    ) -> Loop<'p, T, E, C, S, D, H::WithFallback<Out::Slot<F>>, X>
    where
        H: HookSet<T, E>,
        F: FnOnce(A, GiveUp) -> Out,
        A: FallbackArgument<H::Input>,
        Out: FallbackOutput<T, E, SyncForm>,
    {
        self.attach(retry)
    }
}

// The loop: one `impl` over the options' three slots.
impl<'p, T, E, C, S, D, H: HookSet<T, E>, X: Linger<T, E>> Loop<'p, T, E, C, S, D, H, X> {
    /// Decides what follows an attempt: `Break` with the call's result (for an async fallback,
    /// a future of it), or `Continue` with the state for the next attempt, whose
    /// [`pause`](Retry::pause) is then taken.
    ///
    /// An accepted `Ok` is decided at once; anything else goes to the decision after a failure.
    /// The state is taken and given back by value: `PERFORMANCE.md` §2.
    ///
    /// `attempted` is what the attempt returned: with the idempotency key it borrowed, if it
    /// had one (`WithKey`'s attempts), which a fallback borrows too.
    // RESULTS §3 "one failure sync: Retrier": 189 -> 269 instructions without it (issue 40).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[allow(clippy::type_complexity)]
    pub fn next<Key: KeySlot>(
        self,
        attempted: impl Into<KeyedOutcome<T, E, Key>>,
    ) -> ControlFlow<H::Finish<Key>, Self>
    where
        C: Classifier<E>,
        D: Show<E>,
    {
        let KeyedOutcome { attempted, key } = attempted.into();
        match attempted {
            Attempted::Completed(Ok(value)) => {
                let verdict = self.opts.hooks.judge(&value);
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
    #[inline]
    pub(crate) fn accept<Key: KeySlot>(mut self, value: T) -> H::Finish<Key> {
        self.opts
            .extras
            .record(false, crate::GateOutcome::Accepted, self.site.clock);
        if X::DECIDES {
            self.opts.extras.accepted(self.progress.retries + 1);
        }
        observe::accepted(self.site.name, self.progress.retries);
        H::ready(Ok(value))
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
    #[inline]
    fn sleeps(&self) -> bool {
        if crate::testing::recording() {
            crate::testing::record_pause(self.decided_pause());
            return false;
        }
        self.progress.previous_pause != 0
    }

    /// The pause of a sync loop.
    #[inline]
    pub fn pause_blocking(&self) {
        if self.sleeps() {
            std::thread::sleep(self.decided_pause());
        }
    }

    /// The pause of an async loop, its timer boxed (`PERFORMANCE.md` §4). A zero pause is not
    /// slept (tokio's timer would round it up to its 1 ms tick). An async `notify` is awaited
    /// first, inside the pause, bounded by the time left before the deadline
    /// ([`notify`](Retry::notify)).
    #[inline]
    pub fn pause(&mut self) -> impl Future<Output = ()> + '_
    where
        S: Sleeper,
    {
        let pause = self.sleeps().then(|| self.decided_pause());
        let deadline = match H::AWAITS {
            true => self.progress.started.zip(self.site.policy.get_deadline()),
            false => None,
        };
        let sleeper = &self.opts.head.sleeper;
        self.opts
            .hooks
            .pause(sleeper, pause, deadline, self.site.clock)
    }
}

/// The end of an async loop with a fallback, as a future: `return finish(result).await`.
#[allow(private_bounds)]
pub fn finish<R: IntoFinish<T, E>, T, E>(result: R) -> impl Future<Output = Result<T, E>> {
    result.into_finish()
}

/// The pause of an async loop: a boxed timer, or nothing for a pause that is not slept.
pub struct Pause<F>(pub(crate) Option<Pin<Box<F>>>);

impl<F: Future<Output = ()>> Future for Pause<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        match &mut self.0 {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }
}

/// The scope a fallback runs in: the last attempt's frame and the key.
#[inline]
fn fallback_scope<K: KeySlot>(progress: Progress, attempts: u32, key: K) -> FallbackScope<K> {
    FallbackScope {
        frame: context::Frame {
            attempt: attempts.max(1),
            key: key.kind(),
            retried_above: progress.retried_above,
            hedge: 0,
        },
        key,
    }
}

// Under loom, `RetryBudget::new` is not `const`, so these (with their `static` budget) are not built.
#[cfg(test)]
#[cfg(not(loom))]
mod tests;

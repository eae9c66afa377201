//! [`Retrier`]: the attribute's options as methods, for a configuration chosen at run time and a
//! closure. Its options are values (the policy, the budget, the hooks boxed), and it runs the
//! loop of every door configured at run time (`state::drive` and `state::drive_blocking`), as
//! [`engine::drive`](crate::engine::drive) does: a door on the engine, not a part of the loop.

use crate::engine::AsyncFnOperation;
use crate::hooks::{Async, ErrorOnly};
use crate::overload::aws2026_call::Aws2026Call;
use crate::state::drive::{Attempts, Hedged, Plain, drive, drive_blocking};
use crate::state::dynamic::{AsyncHook, DynAsync, DynSlot, HookFuture, Settings};
use crate::state::extras::{Extras, Guard, Linger, Shedder, Timeout};
use crate::state::fallback::{AsyncFallback, SyncFallback};
use crate::state::hooks::HookSet;
use crate::state::log::ByDebug;
use crate::state::spans::CallSpan;
use crate::state::{
    AsyncForm, Attempted, ByTransient, Classifier, DefaultSleeper, ErrorForm, GiveUp, Head, Hooks,
    IntoVerdict, LogLevel, Opts, OutcomeForm, Progress, Retry, RetryEvent, Site, SyncForm, Unset,
    std_now,
};
use crate::timer::{Elapsed, IntoSleeper, SleepFn, Sleeper};
use crate::{
    AdmissionGate, Aws2026Standard, Backoff, CircuitBreaker, CircuitOpen, Hedge, Jitter, Policy,
    Rejected, RetryBudget, Verdict,
};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// Retries a closure with a configuration chosen at run time: the options of
/// [`#[retry]`](crate::retry), each one method of the same name, with the same defaults, around
/// the same loop (the attempt context, one retrying layer, the events, the hooks, the budget,
/// the breaker, the fallback, the deadline, the timeout).
///
/// The timings (`max`, `base`, `jitter`, `deadline`, ...) start as the [`Policy`]'s, read from a
/// configuration file with [`Policy::from_str`](std::str::FromStr) or built with its `const`
/// builders; a method of the same name changes one for this retrier only (a per-call
/// [`deadline`](Retrier::deadline)). The error type's [`Transient`](crate::Transient) impl
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
///
/// Its options are values, as a door's on [`engine`](crate::engine) are, and it runs the same
/// loop as [`engine::drive`](crate::engine::drive). The hooks (`on`, `on_result`, `notify`,
/// `on_give_up`, `fallback`, `sleep`) are kept boxed, so they are `Send + Sync` (the fallback
/// `Send`), as a door's [`DynHooks`](crate::engine::DynHooks) are: the future of
/// [`run_async`](Retrier::run_async) is then `Send` whenever the closure's futures are. A hook
/// that counts or collects uses an atomic or a `Mutex`, not a `Cell` or a `RefCell`.
///
/// # Its type
///
/// `T` and `E` are the two sides of the closure's `Result`. The options are values, chosen at
/// run time; two parameters say at compile time what a run needs: `C` how errors are judged
/// ([`ByTransient`](crate::hooks::ByTransient), the error type's
/// [`Transient`](crate::Transient) impl, until [`on`](Retrier::on) makes it
/// [`On`](crate::hooks::On)), and `R` whether a blocking [`run`](Retrier::run) can honour them
/// ([`AnyRun`](crate::hooks::AnyRun), until `timeout`, an async `fallback` or hook makes it
/// [`AsyncOnly`](crate::hooks::AsyncOnly), or `sleep` [`OwnTimer`](crate::hooks::OwnTimer));
/// without the `tokio` feature, an async run needs the latter.
#[must_use = "a `Retrier` does nothing until `run` or `run_async`"]
pub struct Retrier<'p, T, E, C = ByTransient, R = AnyRun> {
    /// The borrowed policy, the name, the log level, `budget`, `aws2026` and `nested_retry`,
    /// as a door's.
    settings: Settings<'p>,
    /// The policy as the timing methods (`max`, `deadline`, ...) changed it, once one was
    /// called; until then the loop reads the borrowed one.
    timings: Option<Policy>,
    /// [`reset_after`](Retrier::reset_after)'s length of a healthy attempt.
    reset_after: Option<Duration>,
    classify: C,
    hooks: RunHooks<'p, T, E>,
    /// `timeout`, `breaker` and `gate`, each with how its error becomes `E`.
    extras: Extras<'p, E>,
    timer: RunTimer<'p>,
    /// How an injected error becomes `E` ([`injectable`](Retrier::injectable); feature
    /// `faults`): zero-sized without the feature.
    maker: crate::faults::Maker<E>,
    run: PhantomData<fn() -> R>,
}

/// A [`Retrier`]'s hooks, boxed in the shapes of a door's [`DynHooks`](crate::engine::DynHooks)
/// (the loop reads them through the same slots), and its fallback.
struct RunHooks<'p, T, E> {
    on_result: Option<OnResultBox<'p, T>>,
    notify: Option<HookBox<'p, T, E, RetryEvent>>,
    on_give_up: Option<HookBox<'p, T, E, GiveUp>>,
    /// `on_give_up` hears the time (all its forms but `Fn(&E)`).
    give_up_timed: bool,
    /// An async `notify`, which only `run_async` awaits.
    notify_async: Option<AsyncHookBox<'p, T, E, RetryEvent>>,
    /// An async `on_give_up`, the same way.
    give_up_async: Option<AsyncHookBox<'p, T, E, GiveUp>>,
    fallback: Option<RunFallback<'p, T, E>>,
}

/// `on_result`, boxed.
type OnResultBox<'p, T> = Box<dyn Fn(&T) -> Verdict + Send + Sync + 'p>;
/// `notify` (`B` is [`RetryEvent`]) or `on_give_up` (`B` is [`GiveUp`]), boxed.
type HookBox<'p, T, E, B> = Box<dyn Fn(Result<&T, &E>, &B) + Send + Sync + 'p>;

/// An async `notify` or `on_give_up`, boxed, and its future.
type AsyncHookBox<'p, T, E, B> =
    Box<dyn Fn(Result<&T, &E>, &B) -> HookFuture<'static> + Send + Sync + 'p>;

/// The slots of a configured run with an async hook: each hook by reference, sync or async.
type AsyncRunSlots<'h, 'p, T, E, F> = Hooks<
    DynSlot<&'h OnResultBox<'p, T>>,
    DynAsync<
        &'h HookBox<'p, T, E, RetryEvent>,
        AsyncHook<'h, T, E, RetryEvent>,
        Result<T, E>,
        RetryEvent,
    >,
    DynAsync<&'h HookBox<'p, T, E, GiveUp>, AsyncHook<'h, T, E, GiveUp>, Result<T, E>, GiveUp>,
    F,
>;

/// The slots of a configured run: a reference to each hook, and the fallback `F`.
type RunSlots<'h, 'p, T, E, F> = Hooks<
    DynSlot<&'h OnResultBox<'p, T>>,
    DynSlot<&'h HookBox<'p, T, E, RetryEvent>>,
    DynSlot<&'h HookBox<'p, T, E, GiveUp>>,
    F,
>;

impl<'p, T, E> RunHooks<'p, T, E> {
    /// No hook and no fallback.
    fn is_empty(&self) -> bool {
        self.on_result.is_none()
            && self.notify.is_none()
            && self.on_give_up.is_none()
            && self.fallback.is_none()
            && !self.awaits()
    }

    /// An async hook is there, which the loop awaits with the slots of [`AsyncRunSlots`].
    fn awaits(&self) -> bool {
        self.notify_async.is_some() || self.give_up_async.is_some()
    }

    /// [`slots`](RunHooks::slots) with the slots that await an async hook.
    fn slots_async<F>(&self, fallback: F) -> AsyncRunSlots<'_, 'p, T, E, F> {
        Hooks {
            on_result: DynSlot::new(self.on_result.as_ref(), false),
            notify: DynAsync::new(
                self.notify.as_ref(),
                true,
                self.notify_async.as_deref().map(|f| AsyncHook(f)),
            ),
            on_give_up: DynAsync::new(
                self.on_give_up.as_ref(),
                self.give_up_timed,
                self.give_up_async.as_deref().map(|f| AsyncHook(f)),
            ),
            fallback,
        }
    }

    /// The loop's slots: each hook by reference (the hooks stay with the run), and `fallback`.
    fn slots<F>(&self, fallback: F) -> RunSlots<'_, 'p, T, E, F> {
        Hooks {
            on_result: DynSlot::new(self.on_result.as_ref(), false),
            notify: DynSlot::new(self.notify.as_ref(), true),
            on_give_up: DynSlot::new(self.on_give_up.as_ref(), self.give_up_timed),
            fallback,
        }
    }
}

/// A [`Retrier`] whose options a blocking [`run`](Retrier::run) can honour: no `timeout`, no
/// `sleep`, no async `fallback` or hook.
#[derive(Clone, Copy, Debug)]
pub enum AnyRun {}

/// A [`Retrier`] with `timeout`, an async `fallback` or an async hook, which only
/// [`run_async`](Retrier::run_async) can honour, on the default timer.
#[derive(Clone, Copy, Debug)]
pub enum AsyncOnly {}

/// A [`Retrier`] with a timer of its own ([`sleep`](Retrier::sleep)), which only
/// [`run_async`](Retrier::run_async) uses.
#[derive(Clone, Copy, Debug)]
pub enum OwnTimer {}

/// What `timeout`, an async `fallback` and an async hook make of a [`Retrier`]'s run: [`AsyncOnly`], or
/// [`OwnTimer`] as it was.
pub trait RunKind {
    /// The run with an option that only `run_async` honours.
    type Async;
}

impl RunKind for AnyRun {
    type Async = AsyncOnly;
}

impl RunKind for AsyncOnly {
    type Async = AsyncOnly;
}

impl RunKind for OwnTimer {
    type Async = OwnTimer;
}

/// A [`Retrier`] whose async runs have a timer: every one with the `tokio` feature; without it,
/// one with [`sleep`](Retrier::sleep).
#[diagnostic::on_unimplemented(
    message = "this `Retrier` has no timer to pause with",
    label = "no timer",
    note = "enable the `tokio` feature of `retry-runtime` (on by default), or give the retrier your runtime's timer: `.sleep(my_runtime::sleep)` with `fn sleep(Duration) -> impl Future<Output = ()>`"
)]
pub trait HasTimer {}

impl HasTimer for OwnTimer {}

#[cfg(feature = "tokio")]
impl HasTimer for AnyRun {}

#[cfg(feature = "tokio")]
impl HasTimer for AsyncOnly {}

/// The classifier a [`Retrier`] was given with [`on`](Retrier::on).
pub struct On<'p, E>(Box<dyn Fn(&E) -> Verdict + Send + Sync + 'p>);

#[diagnostic::do_not_recommend] // so that a missing `Transient` reads as `Classifier` says
impl<E> Classifier<E> for On<'_, E> {
    #[inline]
    fn verdict(&self, error: &E) -> Verdict {
        (self.0)(error)
    }
}

impl<'p, T, E> Retrier<'p, T, E> {
    /// A retrier with `policy`'s timings and every other option at its default.
    #[inline]
    pub fn new(policy: &'p Policy) -> Self {
        Retrier {
            settings: Settings::new(policy).name("retrier"),
            timings: None,
            reset_after: None,
            classify: ByTransient,
            hooks: RunHooks {
                on_result: None,
                notify: None,
                on_give_up: None,
                give_up_timed: false,
                notify_async: None,
                give_up_async: None,
                fallback: None,
            },
            extras: Extras::default(),
            timer: RunTimer::of(DefaultSleeper::default()),
            maker: crate::faults::Maker::NONE,
            run: PhantomData,
        }
    }
}

impl<'p, T, E> From<&'p Policy> for Retrier<'p, T, E> {
    fn from(policy: &'p Policy) -> Self {
        Retrier::new(policy)
    }
}

/// Retrier methods that change one timing of the policy for this retrier only, each through the
/// [`Policy`] builder of the same name or the one after `=>`:
///
/// ```text
/// timings! {
///     /// `base = "1s"`: ...
///     pub fn base(base: Duration);
///     /// `attempts = 4`: ...
///     pub fn attempts(calls: u32) => max(calls.saturating_sub(1));
/// }
/// ```
///
/// becomes `pub fn base(self, base: Duration) -> Self { self.timing(|p| p.base(base)) }`, and
/// `attempts` likewise with `p.max(calls.saturating_sub(1))`.
macro_rules! timings {
    ($(
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($arg:ident: $ty:ty) $(=> $method:ident($value:expr))?;
    )*) => {
        $(
            $(#[$attr])*
            $vis fn $name(self, $arg: $ty) -> Self {
                self.timing(|p| timings!(@call p.$name($arg) $(, $method($value))?))
            }
        )*
    };
    (@call $p:ident.$name:ident($arg:ident)) => { $p.$name($arg) };
    (@call $p:ident.$name:ident($arg:ident), $method:ident($value:expr)) => { $p.$method($value) };
}

impl<'p, T, E, C, R> Retrier<'p, T, E, C, R> {
    /// The same retrier with its classifier made by `classify` and its run `R2`.
    #[inline]
    fn map<C2, R2>(self, classify: impl FnOnce(C) -> C2) -> Retrier<'p, T, E, C2, R2> {
        Retrier {
            settings: self.settings,
            timings: self.timings,
            reset_after: self.reset_after,
            classify: classify(self.classify),
            hooks: self.hooks,
            extras: self.extras,
            timer: self.timer,
            maker: self.maker,
            run: PhantomData,
        }
    }

    /// The same retrier, its run `R2`.
    #[inline]
    fn to<R2>(self) -> Retrier<'p, T, E, C, R2> {
        self.map(|classify| classify)
    }

    setters! {
        /// The name the events give, where the attribute gives the function's (`"retrier"`
        /// unless named); the metrics' `function` label too.
        pub fn name(name: &'static str) => self.settings.name;

        /// For a loop that runs for hours (a consumer, a reconnect loop): an attempt that ran
        /// for at least `healthy` before it failed starts the backoff afresh, as a new call
        /// would: the next pause is the first one (`base`), the retries are counted from zero,
        /// and the deadline runs from then. Without it, a connection that failed a hundred times
        /// over a day waits the longest pause after each drop, and a spent deadline ends the
        /// loop.
        pub fn reset_after(healthy: Duration) => self.reset_after = Some(healthy);

        /// `budget = B`: retries draw from a shared [`RetryBudget`]; when it is empty the loop
        /// gives up with the current error.
        pub fn budget(budget: &'p RetryBudget) => self.settings.budget = Some(budget);

        /// `aws2026 = AWS`: the AWS SDKs' updated standard mode decides after each failure, in
        /// place of the policy's `max` and pauses: see [`Aws2026Standard`].
        pub fn aws2026(aws: &'p Aws2026Standard) => self.settings.aws = Some(aws);
    }

    /// The policy with one timing changed, for this retrier only.
    #[inline]
    fn timing(mut self, change: impl FnOnce(Policy) -> Policy) -> Self {
        let policy = self.timings.unwrap_or(*self.settings.policy);
        self.timings = Some(change(policy));
        self
    }

    timings! {
        /// `max = 3`: retries after the first call, so at most `retries + 1` calls
        /// ([`Policy::max`]). The policy's until then (3 in [`Policy::new`]).
        pub fn max(retries: u32);

        /// `attempts = 4`: the same limit counted as calls, the first one included: `attempts(4)`
        /// is `max(3)`. The attribute refuses `attempts = 0` at compile time; here it makes a single
        /// call, as `attempts(1)` does.
        pub fn attempts(calls: u32) => max(calls.saturating_sub(1));

        /// `base = "1s"`: the pause before the first retry ([`Policy::base`]; 1 s in
        /// [`Policy::new`]).
        pub fn base(base: Duration);

        /// `factor = 2`: the growth of the pause per retry, exponential backoff only
        /// ([`Policy::factor`], which takes a value below 1 as 1; 2 in [`Policy::new`]).
        pub fn factor(factor: f64);

        /// `backoff = exponential`: how the pause grows ([`Policy::backoff`]; exponential in
        /// [`Policy::new`]).
        pub fn backoff(backoff: Backoff);

        /// `max_delay = "30s"`: no single pause is longer, jitter and a server's suggested pause
        /// included ([`Policy::max_delay`]; 30 s or `base` in [`Policy::new`]).
        pub fn max_delay(max_delay: Duration);

        /// `throttle_base = "1s"`: the pause before a retry after a throttled attempt
        /// ([`Verdict::Throttled`](crate::Verdict::Throttled)), growing from there as `base` does
        /// ([`Policy::throttle_base`]; `base` in [`Policy::new`]).
        pub fn throttle_base(throttle_base: Duration);

        /// `deadline = "10s"`: the time budget of the whole run from its first attempt, attempts
        /// and pauses included; a pause that would end past it is not taken, and the last error is
        /// returned ([`Policy::deadline`]; none in [`Policy::new`]). With
        /// [`timeout`](Retrier::timeout), an attempt is also cut off at the deadline.
        pub fn deadline(deadline: Duration);

        /// `jitter = none`, `jitter = full`, ...: how each pause is randomised ([`Policy::jitter`];
        /// [`Jitter::Proportional(0.5)`](Jitter::Proportional) in [`Policy::new`]).
        pub fn jitter(jitter: Jitter);
    }

    /// `on = f`: which errors are worth retrying, `Fn(&E) -> bool` or `Fn(&E) -> Verdict`;
    /// everything else is returned at once. The default is the error type's
    /// [`Transient`](crate::Transient) impl.
    pub fn on<F, V>(self, f: F) -> Retrier<'p, T, E, On<'p, E>, R>
    where
        F: Fn(&E) -> V + Send + Sync + 'p,
        V: IntoVerdict,
    {
        self.map(|_| On(Box::new(move |error: &E| f(error).into_verdict())))
    }

    /// `timeout = "2s"`: each attempt is cut off after `limit` (clipped to the time left before
    /// the deadline) and counts as a transient failure; needs `E: From<Elapsed>`, and
    /// [`run_async`](Retrier::run_async).
    pub fn timeout(mut self, limit: Duration) -> Retrier<'p, T, E, C, R::Async>
    where
        E: From<Elapsed>,
        R: RunKind,
    {
        self.extras.timeout = Some(Timeout::new(limit, E::from));
        self.to()
    }

    /// `breaker = B`: while the [`CircuitBreaker`] is open, the call returns
    /// `E::from(CircuitOpen)` at once; needs `E: From<CircuitOpen>`.
    pub fn breaker(mut self, breaker: &'p CircuitBreaker) -> Self
    where
        E: From<CircuitOpen>,
    {
        self.extras.breaker = Some(Guard::new(breaker, E::from));
        self
    }

    /// `gate = G`: every attempt, the first included, asks the [`AdmissionGate`] first; while
    /// it sheds load, the call returns `E::from(Rejected)` at once without calling, and the
    /// loop gives up ([`GiveUpReason::GateRejected`](crate::GiveUpReason::GateRejected), which
    /// a fallback hears); needs `E: From<Rejected>`. A rate-limiting gate's wait is taken
    /// before the attempt.
    pub fn gate(mut self, gate: &'p AdmissionGate) -> Self
    where
        E: From<Rejected>,
    {
        self.extras.gate = Some(Shedder::new(gate, E::from));
        self
    }

    /// Fault injection (feature `faults`): an error fault injected into this retrier's attempts
    /// (by its [`name`](Retrier::name)) is an `E`, made by `E::from(Injected)`. Without it its
    /// attempts get only the injected latencies. See [`faults`](crate::faults).
    #[cfg(feature = "faults")]
    pub fn injectable(mut self) -> Self
    where
        E: From<crate::faults::Injected>,
    {
        self.maker = crate::faults::Maker::from_impl();
        self
    }

    /// `nested = retry`: keep retrying even inside another retrying function or block.
    pub fn nested_retry(mut self) -> Self {
        self.settings.nested_retry = true;
        self
    }

    /// `sleep = f`: pause with another runtime's timer, `Fn(Duration) -> impl Future` or a
    /// [`Sleeper`]; the deadline is then measured on its clock. For
    /// [`run_async`](Retrier::run_async).
    pub fn sleep<F, M>(mut self, f: F) -> Retrier<'p, T, E, C, OwnTimer>
    where
        F: IntoSleeper<M>,
        F::Sleeper: Send + Sync + 'p,
        <F::Sleeper as Sleeper>::Sleep: Send + 'p,
    {
        self.timer = RunTimer::of(f.into_sleeper());
        self.to()
    }

    /// `log_level = "warn"`: the level of the one event logged when a call that failed ends
    /// (`level::Error` by default; `level::Warn`, `level::Info`, ... in
    /// [`level`](crate::level)).
    pub fn log_level(mut self, level: impl Into<LogLevel>) -> Self {
        self.settings.level = level.into();
        self
    }

    /// `on_result = f`: an `Ok` value for which `f` answers `true` (or a
    /// [`Verdict`] that retries) is a transient failure; when the loop gives up, the last `Ok`
    /// is returned (or handed to a `fallback` that takes the outcome).
    pub fn on_result<J, V>(mut self, f: J) -> Self
    where
        J: Fn(&T) -> V + Send + Sync + 'p,
        V: IntoVerdict,
    {
        self.hooks.on_result = Some(Box::new(move |value: &T| f(value).into_verdict()));
        self
    }

    /// `notify = f`: called before each pause, `Fn(&E, &RetryEvent)` or
    /// `Fn(Result<&T, &E>, &RetryEvent)`.
    ///
    /// Or async, for [`run_async`](Retrier::run_async) (the retrier is then
    /// [`AsyncOnly`](crate::hooks::AsyncOnly)): a closure of the same arguments that returns a
    /// `Send + 'static` future of `()`, which owns what it needs (the hooks are boxed, and a boxed
    /// closure's future cannot borrow: copy the event, format the error, clone an `Arc` first):
    /// `|error: &E, event: &RetryEvent| { let (line, event) = (error.to_string(), *event);
    /// async move { ... } }`. It is awaited before the pause it announces, inside that pause
    /// and the deadline, as the attribute's async `notify`.
    pub fn notify<J, M>(mut self, f: J) -> Retrier<'p, T, E, C, J::Run<R>>
    where
        R: RunKind,
        J: RetrierHook<'p, T, E, RetryEvent, M>,
    {
        match f.boxed() {
            Boxed::Sync(hook) => self.hooks.notify = Some(hook),
            Boxed::Async(hook) => self.hooks.notify_async = Some(hook),
        }
        self.to()
    }

    /// `on_give_up = f`: called once when the loop gives up, `Fn(&E)`, `Fn(&E, &GiveUp)` or
    /// `Fn(Result<&T, &E>, &GiveUp)`; or async as [`notify`](Retrier::notify)'s, awaited
    /// before the fallback runs and the call returns.
    pub fn on_give_up<J, M>(mut self, f: J) -> Retrier<'p, T, E, C, J::Run<R>>
    where
        R: RunKind,
        J: RetrierHook<'p, T, E, GiveUp, M>,
    {
        self.hooks.give_up_timed = J::TIMED;
        match f.boxed() {
            Boxed::Sync(hook) => self.hooks.on_give_up = Some(hook),
            Boxed::Async(hook) => self.hooks.give_up_async = Some(hook),
        }
        self.to()
    }

    /// `fallback = f`: when the loop gives up, `f(error, why)` makes the result, or
    /// `f(outcome, why)` for an `f` that takes the whole `Result` (which also hears an `Ok` that
    /// `on_result` rejected; an `f` that takes the error leaves such an `Ok` as it is). Sync, or
    /// for [`run_async`](Retrier::run_async) also async.
    pub fn fallback<J, A, Out, F, M>(mut self, f: J) -> Retrier<'p, T, E, C, Out::Run<R>>
    where
        R: RunKind,
        J: FnOnce(A, GiveUp) -> Out + Send + 'p,
        A: FallbackTakes<T, E, F>,
        Out: RetrierFallback<'p, T, E, M>,
    {
        self.hooks.fallback = Some(Out::boxed(move |outcome, why| {
            A::take(outcome).map(|input| f(input, why))
        }));
        self.to()
    }
}

// The runs.
impl<'p, T, E, C, R> Retrier<'p, T, E, C, R> {
    /// Runs `body` until it succeeds or the loop gives up, pausing with
    /// [`std::thread::sleep`] and measuring the deadline on [`Instant::now`](std::time::Instant::now),
    /// as a sync annotated function does. `?` and `return` in the closure end the attempt.
    ///
    /// The first attempt and its `Ok` are inline, in the caller; the loop after a failure is
    /// out of line (`PERFORMANCE.md` §8).
    #[inline]
    pub fn run<B>(self, body: B) -> Result<T, E>
    where
        R: RunsBlocking,
        C: Classifier<E>,
        E: fmt::Debug,
        B: FnMut() -> Result<T, E>,
    {
        if !self.is_bare() {
            return self.run_configured(body);
        }
        // No hook, fallback or extra: the loop of the attribute without options, whose state
        // carries nothing for them. What it does not carry is dropped here, before the body
        // runs: left to the end, it would be kept in memory for a panic's unwinding, and the
        // happy path would write it all (`PERFORMANCE.md` §8). Field by field: dropped whole,
        // the hooks were copied to memory first.
        drop(self.hooks.on_result);
        drop(self.hooks.notify);
        drop(self.hooks.on_give_up);
        drop(self.hooks.fallback);
        drop(self.extras);
        drop(self.timer);
        let settings = with(self.settings, &self.timings);
        let head = Head {
            classify: self.classify,
            sleeper: Unset,
            marks: PhantomData,
        };
        let opts = opts(head, Hooks::<Unset, Unset, Unset, Unset>::default(), Unset);
        blocking(settings, self.reset_after, opts, false, self.maker, body)
    }

    /// No hook, no fallback and no extra (`timeout`, `budget`, `breaker`, `gate`, `aws2026`,
    /// `nested_retry`): the loop's state needs no room for them.
    #[inline]
    fn is_bare(&self) -> bool {
        let s = &self.settings;
        self.hooks.is_empty()
            && self.extras.is_empty()
            && s.budget.is_none()
            && s.aws.is_none()
            && !s.nested_retry
    }

    /// [`run`](Retrier::run) with hooks, a fallback or extras: out of line, so that the room
    /// for the options is made only here.
    #[inline(never)]
    fn run_configured<B>(self, body: B) -> Result<T, E>
    where
        C: Classifier<E>,
        E: fmt::Debug,
        B: FnMut() -> Result<T, E>,
    {
        let (reset_after, maker) = (self.reset_after, self.maker);
        let (settings, timings, head, mut hooks, extras) = self.parts(|_| Unset);
        let settings = with(settings, &timings);
        let judges = hooks.on_result.is_some();
        // A blocking run's fallback is sync (`RunsBlocking`). A loop without one has no code
        // for it, and its events say that it gave up, not that it fell back.
        match hooks.fallback.take() {
            None => {
                let opts = opts(head, hooks.slots(Unset), extras);
                blocking(settings, reset_after, opts, judges, maker, body)
            }
            Some(fallback) => {
                let fallback = SyncFallback {
                    f: fallback,
                    call: |f, outcome, why| match f(outcome, why) {
                        Err(result) => Ok(result),
                        Ok(_) => unreachable!("an async fallback makes the retrier `AsyncOnly`"),
                    },
                };
                let opts = opts(head, hooks.slots(fallback), extras);
                blocking(settings, reset_after, opts, judges, maker, body)
            }
        }
    }

    /// The options of a configured run apart: the settings, the policy a timing method made,
    /// the head with the timer `sleeper` makes of the retrier's, the hooks, and the extras with
    /// the settings' `budget` and `nested_retry`, and `aws2026` as their decider.
    #[allow(clippy::type_complexity)]
    fn parts<S>(
        self,
        sleeper: impl FnOnce(RunTimer<'p>) -> S,
    ) -> (
        Settings<'p>,
        Option<Policy>,
        Head<C, S, ByDebug>,
        RunHooks<'p, T, E>,
        RunExtras<'p, T, E>,
    ) {
        let head = Head {
            classify: self.classify,
            sleeper: sleeper(self.timer),
            marks: PhantomData,
        };
        let s = self.settings;
        let extras = Extras {
            budget: s.budget,
            nested_retry: s.nested_retry,
            ..self.extras
        };
        let extras = extras.deciding(s.aws.map(Aws2026Call::new));
        (self.settings, self.timings, head, self.hooks, extras)
    }

    /// Runs `body`, a closure that returns a future (`|| async { ... }`), until it succeeds or
    /// the loop gives up, pausing with tokio's timer (or [`sleep`](Retrier::sleep)'s) and
    /// measuring the deadline on its clock, as an async annotated function does. The future is
    /// `Send` when the closure's futures are, so that it can be spawned.
    /// [`attempt()`](crate::attempt) gives the running attempt both in the closure and in its
    /// future.
    ///
    /// Each attempt's future is made by the closure and borrows nothing from it: a body that
    /// borrows its surroundings mutably across attempts (a transaction on a `&mut` client) is
    /// [`run_async_mut`](Retrier::run_async_mut)'s.
    ///
    /// Without the `tokio` feature, it needs a timer: [`sleep`](Retrier::sleep).
    pub fn run_async<B, Fut>(self, body: B) -> impl Future<Output = Result<T, E>>
    where
        R: HasTimer,
        C: Classifier<E>,
        E: fmt::Debug,
        B: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.drive(Plain(body))
    }

    /// [`run_async`](Retrier::run_async) for an async closure (`async || { ... }`) whose
    /// attempts borrow its captures, mutably too: a SERIALIZABLE transaction on a `&mut`
    /// `tokio_postgres::Client`, which a closure that returns a future cannot lend to each
    /// attempt ("captured variable cannot escape `FnMut` closure body").
    ///
    /// Such a future is not `Send`, whatever it holds: rustc cannot yet prove it
    /// (rust-lang/rust#100013). Await it where it is made; a retry that is spawned takes
    /// [`run_async`](Retrier::run_async), with what each attempt needs moved or cloned into its
    /// future (or a `tokio::sync::Mutex` around a client it borrows).
    ///
    /// ```
    /// use retry_runtime::{Policy, Retrier, Transient};
    ///
    /// #[derive(Debug)]
    /// struct Conflict;
    /// impl Transient for Conflict {
    ///     fn is_transient(&self) -> bool { true }
    /// }
    ///
    /// /// A client whose transactions borrow it mutably, as tokio-postgres's do.
    /// struct Client { committed: Vec<u32>, conflicts: u32 }
    /// impl Client {
    ///     async fn transfer(&mut self, amount: u32) -> Result<(), Conflict> {
    ///         if self.conflicts > 0 { self.conflicts -= 1; return Err(Conflict); }
    ///         self.committed.push(amount);
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let policy = Policy::new().max(3);
    /// let mut client = Client { committed: Vec::new(), conflicts: 2 };
    /// Retrier::new(&policy)
    ///     .run_async_mut(async || client.transfer(100).await)
    ///     .await
    ///     .unwrap();
    /// assert_eq!(client.committed, [100]);
    /// # }
    /// ```
    pub fn run_async_mut<B>(self, body: B) -> impl Future<Output = Result<T, E>>
    where
        R: HasTimer,
        C: Classifier<E>,
        E: fmt::Debug,
        B: AsyncFnMut() -> Result<T, E>,
    {
        self.drive(Plain(AsyncFnOperation(body)))
    }

    /// [`run_async`](Retrier::run_async) with each attempt hedged, as the attribute's
    /// `hedge = ...`: an attempt that has not answered after `hedge`'s delay gets a copy running
    /// beside it (up to its `max_hedges`, each drawing on the budget and asking the breaker), the
    /// first acceptable answer wins, and the other copies are dropped. `body` makes one copy's
    /// future, possibly while another runs, so it is `Fn` (`|| async move { ... }` with what each
    /// copy needs cloned into it); inside, [`attempt()`](crate::attempt)`.hedge()` tells the
    /// copies apart. The guide is [`guide::hedging`](crate::guide::hedging).
    ///
    /// ```
    /// use retry_runtime::{Hedge, Policy, Retrier, Transient};
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::time::Duration;
    ///
    /// #[derive(Debug)]
    /// struct Busy;
    /// impl Transient for Busy {
    ///     fn is_transient(&self) -> bool { true }
    /// }
    ///
    /// static HEDGE: Hedge = Hedge::after(Duration::from_millis(50));
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let policy = Policy::new().max(1);
    /// let copies = AtomicU32::new(0);
    /// let started = tokio::time::Instant::now();
    /// let answer = Retrier::new(&policy)
    ///     .run_hedged(&HEDGE, || async {
    ///         // The first copy is slow; the hedge, started after 50 ms, answers at once.
    ///         let copy = copies.fetch_add(1, Ordering::Relaxed);
    ///         if copy == 0 { tokio::time::sleep(Duration::from_secs(5)).await; }
    ///         Ok::<_, Busy>(copy)
    ///     })
    ///     .await;
    /// assert_eq!(answer.unwrap(), 1);
    /// assert_eq!(started.elapsed(), Duration::from_millis(50));
    /// # }
    /// ```
    pub fn run_hedged<B, Fut>(self, hedge: &Hedge, body: B) -> impl Future<Output = Result<T, E>>
    where
        R: HasTimer,
        C: Classifier<E>,
        E: fmt::Debug,
        B: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.drive(Hedged(hedge, body))
    }

    /// The loop of an async run, each attempt made by `each`. The public methods return its
    /// future: an `async fn` around it would keep their arguments beside it (`PERFORMANCE.md`
    /// §4).
    async fn drive<A: Attempts<T, E>>(self, each: A) -> Result<T, E>
    where
        C: Classifier<E>,
        E: fmt::Debug,
    {
        let clock = self.timer.clock;
        // One form for every async run, bare or not (no `bench/RESULTS.md` row measures an
        // async `Retrier`): the hooks stay here and the state holds a reference to each.
        let (reset_after, maker) = (self.reset_after, self.maker);
        let (settings, timings, head, mut hooks, extras) = self.parts(|timer| timer.sleeper);
        let settings = with(settings, &timings);
        // With an async hook, the slots that await it (the state then holds the outcome
        // across the pause); else the sync ones.
        match (hooks.fallback.take(), hooks.awaits()) {
            (None, false) => {
                let opts = opts(head, hooks.slots(Unset), extras);
                drive(state(settings, opts, clock, maker), reset_after, each).await
            }
            (None, true) => {
                let opts = opts(head, hooks.slots_async(Unset), extras);
                drive(state(settings, opts, clock, maker), reset_after, each).await
            }
            (Some(fallback), awaits) => {
                // A sync fallback's result is ready; an async one's future is awaited.
                let fallback = AsyncFallback {
                    f: fallback,
                    call: |f, outcome, why| f(outcome, why),
                };
                if awaits {
                    let opts = opts(head, hooks.slots_async(fallback), extras);
                    drive(state(settings, opts, clock, maker), reset_after, each).await
                } else {
                    let opts = opts(head, hooks.slots(fallback), extras);
                    drive(state(settings, opts, clock, maker), reset_after, each).await
                }
            }
        }
    }
}

/// The extras of a configured run, with `aws2026` as their decider if it is set.
type RunExtras<'p, T, E> = Extras<'p, E, crate::state::extras::Deciding<Aws2026Call<'p>, T, E>>;

/// The options of a run.
#[inline]
fn opts<K, H, X>(head: K, hooks: H, extras: X) -> Opts<K, H, X> {
    Opts {
        head,
        hooks,
        extras,
    }
}

/// `settings` with the policy a timing method made, if one did.
#[inline]
fn with<'t>(settings: Settings<'t>, timings: &'t Option<Policy>) -> Settings<'t> {
    Settings {
        policy: timings.as_ref().unwrap_or(settings.policy),
        ..settings
    }
}

/// The loop state of one run: its policy (the retrier's own if a timing method made one) is
/// borrowed for the run.
#[inline]
fn state<'s, T, E, O>(
    s: Settings<'s>,
    opts: O,
    clock: fn() -> Instant,
    maker: crate::faults::Maker<E>,
) -> Retry<'s, T, E, O> {
    Retry {
        site: Site {
            policy: s.policy,
            name: s.name,
            clock,
        },
        progress: Progress::idle(s.level),
        opts,
        spans: CallSpan::default(),
        value: crate::faults::Carried::NONE.with(maker),
    }
}

/// A blocking run: its first attempt and an accepted `Ok` inline, the loop after it out of line.
#[inline]
fn blocking<T, E, C, H, X, B>(
    settings: Settings<'_>,
    reset_after: Option<Duration>,
    opts: Opts<Head<C, Unset, ByDebug>, H, X>,
    judges: bool,
    maker: crate::faults::Maker<E>,
    mut body: B,
) -> Result<T, E>
where
    C: Classifier<E>,
    E: fmt::Debug,
    H: HookSet<T, E, Finish<()> = Result<T, E>>,
    X: Linger<T, E>,
    B: FnMut() -> Result<T, E>,
{
    let mut state = state(settings, opts, std_now, maker);
    state.progress.retried_above = crate::context::retried_above();
    // A run that reads the clock before its first attempt (a deadline, `reset_after`) makes
    // it in the loop, with the failures (`PERFORMANCE.md` §8).
    let first = if settings.policy.get_deadline().is_some() || reset_after.is_some() {
        None
    } else {
        match state.attempt(&mut body) {
            // Without `on_result`, an `Ok` is accepted as it is; with it, the loop judges it.
            Attempted::Completed(Ok(value)) if !judges => {
                return state.accept::<()>(value);
            }
            attempted => {
                // `drive_blocking` reads it again: left as read above, the reading would be
                // kept for the call, on the happy path too (`PERFORMANCE.md` §8).
                state.progress.retried_above = false;
                Some(attempted)
            }
        }
    };
    // The body moved into the loop, not borrowed: one word in a register, where a borrow
    // stored the body and its address on the happy path.
    drive_blocking(state, first, reset_after, move |state| {
        state.attempt(&mut body)
    })
}

/// A [`Retrier`]'s fallback, boxed: it makes a future of the result (an async one, which only
/// `run_async` awaits), or gives back the result (a sync one's, or an `Ok` it does not take).
type RunFallback<'p, T, E> =
    Box<dyn FnOnce(Result<T, E>, GiveUp) -> Result<BoxFuture<'p, T, E>, Result<T, E>> + Send + 'p>;

/// An async fallback's future.
type BoxFuture<'p, T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'p>>;

/// A [`Retrier`]'s timer for an async run, boxed: tokio's (with the `tokio` feature; without
/// it, a run without `sleep` does not compile, [`HasTimer`]), or `sleep`'s; and the clock the
/// deadline is measured on.
struct RunTimer<'p> {
    sleeper: SleepFn<Box<dyn Fn(Duration) -> BoxSleep<'p> + Send + Sync + 'p>>,
    clock: fn() -> Instant,
}

/// A [`RunTimer`]'s pause.
type BoxSleep<'p> = Pin<Box<dyn Future<Output = ()> + Send + 'p>>;

impl<'p> RunTimer<'p> {
    /// `sleeper`, boxed, and its clock.
    fn of<S: Sleeper + Send + Sync + 'p>(sleeper: S) -> Self
    where
        S::Sleep: Send + 'p,
    {
        let sleep: Box<dyn Fn(Duration) -> BoxSleep<'p> + Send + Sync + 'p> =
            Box::new(move |pause| Box::pin(sleeper.sleep(pause)));
        RunTimer {
            sleeper: sleep.into_sleeper(),
            clock: crate::timer::clock_of::<S>,
        }
    }
}

/// A [`Retrier`] that a blocking [`run`](Retrier::run) can run: [`AnyRun`].
#[diagnostic::on_unimplemented(
    message = "`timeout`, `sleep`, an async `fallback` and an async hook need `run_async`: a blocking call cannot be cut off from outside, a sync loop pauses with `std::thread::sleep`, and it cannot await a fallback or a hook",
    label = "this `Retrier` has `timeout`, `sleep`, an async `fallback` or an async `notify` or `on_give_up`",
    note = "give the call its own timeout (a socket read timeout, a client timeout) and remove `timeout`, make the fallback and the hooks sync (return the `Result` itself, or nothing), or run an async closure: `.run_async(|| async {{ ... }}).await`"
)]
pub trait RunsBlocking {}

impl RunsBlocking for AnyRun {}

/// What a [`Retrier`]'s fallback takes first, told apart by `M`: the error `E`
/// ([`ErrorForm`]), or the whole outcome `Result<T, E>` ([`OutcomeForm`]), which also hears an
/// `Ok` that `on_result` rejected.
#[diagnostic::on_unimplemented(
    message = "a `Retrier`'s fallback takes `{E}` or `Result<{T}, {E}>` first, not `{Self}`",
    label = "expected a fallback that takes `{E}` (or `Result<{T}, {E}>`) and a `GiveUp`",
    note = "when the loop gives up, it calls the fallback as `f(error, why)`, or `f(outcome, why)` for one that takes the whole `Result` (which also hears an `Ok` that `on_result` rejected); write the argument's type: `|error: {E}, why: GiveUp| ...`"
)]
pub trait FallbackTakes<T, E, M>: Sized {
    /// The fallback's argument, or the `Ok` value back if it does not take one.
    #[doc(hidden)]
    fn take(outcome: Result<T, E>) -> Result<Self, T>;
}

impl<T, E> FallbackTakes<T, E, ErrorForm> for E {
    #[inline]
    fn take(outcome: Result<T, E>) -> Result<E, T> {
        // The error taken, or the `Ok` value given back.
        outcome.map_or_else(Ok, Err)
    }
}

impl<T, E> FallbackTakes<T, E, OutcomeForm> for Result<T, E> {
    #[inline]
    fn take(outcome: Result<T, E>) -> Result<Result<T, E>, T> {
        Ok(outcome)
    }
}

/// What a [`Retrier`]'s fallback returns, told apart by `M`: the `Result` itself
/// ([`SyncForm`]), or a future of it ([`AsyncForm`], `Send`), which only `run_async` awaits.
#[diagnostic::on_unimplemented(
    message = "a `Retrier`'s fallback must return `Result<{T}, {E}>`, the closure's own result, or a `Send` future of it, not `{Self}`",
    label = "this fallback returns `{Self}`",
    note = "a fallback is called as `FnOnce({E}, GiveUp) -> Result<{T}, {E}>` when the loop gives up; for `run_async` it may also be async (return a `Send` future of that `Result`)"
)]
pub trait RetrierFallback<'p, T, E, M>: Sized {
    /// The run of a retrier with this fallback: as it was for a sync one, `R::Async` for an
    /// async one.
    #[doc(hidden)]
    type Run<R: RunKind>;
    /// The fallback `f`, boxed.
    #[doc(hidden)]
    fn boxed(
        f: impl FnOnce(Result<T, E>, GiveUp) -> Result<Self, T> + Send + 'p,
    ) -> RunFallback<'p, T, E>;
}

impl<'p, T, E> RetrierFallback<'p, T, E, SyncForm> for Result<T, E> {
    type Run<R: RunKind> = R;
    fn boxed(
        f: impl FnOnce(Result<T, E>, GiveUp) -> Result<Self, T> + Send + 'p,
    ) -> RunFallback<'p, T, E> {
        Box::new(move |outcome, why| Err(f(outcome, why).unwrap_or_else(Ok)))
    }
}

impl<'p, T, E, Fut> RetrierFallback<'p, T, E, AsyncForm> for Fut
where
    Fut: Future<Output = Result<T, E>> + Send + 'p,
{
    type Run<R: RunKind> = R::Async;
    fn boxed(
        f: impl FnOnce(Result<T, E>, GiveUp) -> Result<Self, T> + Send + 'p,
    ) -> RunFallback<'p, T, E> {
        Box::new(move |outcome, why| match f(outcome, why) {
            Ok(future) => Ok(Box::pin(future) as BoxFuture<'p, T, E>),
            Err(value) => Err(Ok(value)),
        })
    }
}

/// The forms a [`Retrier`]'s `notify` (`B` is [`RetryEvent`]) and `on_give_up` (`B` is
/// [`GiveUp`]) take, told apart by `M`: the sync forms of [`NotifyHook`](crate::hooks::NotifyHook) and
/// [`GiveUpHook`](crate::hooks::GiveUpHook),
/// and their async variants ([`Async`]`<M>`), closures that return a `Send` future of `()`
/// which owns what it needs. An async hook makes the retrier
/// [`AsyncOnly`](crate::hooks::AsyncOnly).
#[diagnostic::on_unimplemented(
    message = "a `Retrier`'s hook must be callable as `Fn(&{E}, &{B})` or `Fn(Result<&{T}, &{E}>, &{B})` (`on_give_up` also `Fn(&{E})`), `Send + Sync`, returning `()` or a `Send + 'static` future of `()` that owns what it needs",
    label = "not a hook of `&{E}` and `&{B}`",
    note = "the hooks of a `Retrier` are boxed: an async one is a closure that returns a future, which cannot borrow the error or the event; take what it needs first: `|error: &{E}, event: &RetryEvent| {{ let line = error.to_string(); async move {{ ... }} }}`",
    note = "a closure needs the types of its arguments written: `|error: &{E}, event: &RetryEvent| ...`"
)]
pub trait RetrierHook<'p, T, E, B, M>: Sized {
    /// The run of a retrier with this hook: as it was for a sync one, `R::Async` for an async
    /// one.
    #[doc(hidden)]
    type Run<R: RunKind>;
    /// Whether the hook hears the time (all forms but `on_give_up`'s `Fn(&E)`).
    #[doc(hidden)]
    const TIMED: bool = true;
    /// The hook, boxed.
    #[doc(hidden)]
    fn boxed(self) -> Boxed<'p, T, E, B>;
}

/// A [`Retrier`]'s hook, boxed: sync, or async.
#[doc(hidden)]
pub enum Boxed<'p, T, E, B> {
    /// A sync hook.
    Sync(HookBox<'p, T, E, B>),
    /// An async hook.
    Async(AsyncHookBox<'p, T, E, B>),
}

/// The sync and async impls of a form: `$sync` is how the boxed hook calls the user's `f` with
/// the outcome `o` and `b`; an async hook's future, boxed, is its return value.
macro_rules! retrier_hook {
    ($form:ty, $b:ty, [$($bound:tt)*], $timed:expr, |$f:ident, $o:ident, $arg:ident| $call:expr) => {
        impl<'p, T: 'p, E: 'p, F> RetrierHook<'p, T, E, $b, $form> for F
        where
            F: $($bound)* + Send + Sync + 'p,
        {
            type Run<R: RunKind> = R;
            const TIMED: bool = $timed;
            #[allow(clippy::unit_arg)] // `$call` is `Some(())` here, a future in the async impl
            fn boxed(self) -> Boxed<'p, T, E, $b> {
                let $f = self;
                Boxed::Sync(Box::new(move |$o: Result<&T, &E>, $arg: &$b| {
                    $call;
                }))
            }
        }

        impl<'p, T: 'p, E: 'p, F, Fut> RetrierHook<'p, T, E, $b, Async<$form>> for F
        where
            F: $($bound)* -> Fut + Send + Sync + 'p,
            Fut: Future<Output = ()> + Send + 'static,
        {
            type Run<R: RunKind> = R::Async;
            const TIMED: bool = $timed;
            fn boxed(self) -> Boxed<'p, T, E, $b> {
                let $f = self;
                Boxed::Async(Box::new(move |$o: Result<&T, &E>, $arg: &$b| -> HookFuture<'static> {
                    match $call {
                        Some(future) => Box::pin(future),
                        None => Box::pin(std::future::ready(())),
                    }
                }))
            }
        }
    };
}

retrier_hook!(
    ErrorForm,
    RetryEvent,
    [Fn(&E, &RetryEvent)],
    true,
    |f, o, b| o.err().map(|e| f(e, b))
);
retrier_hook!(
    OutcomeForm,
    RetryEvent,
    [for<'a> Fn(Result<&'a T, &'a E>, &RetryEvent)],
    true,
    |f, o, b| Some(f(o, b))
);
retrier_hook!(ErrorOnly, GiveUp, [Fn(&E)], false, |f, o, b| {
    let _ = b;
    o.err().map(&f)
});
retrier_hook!(ErrorForm, GiveUp, [Fn(&E, &GiveUp)], true, |f, o, b| o
    .err()
    .map(|e| f(e, b)));
retrier_hook!(
    OutcomeForm,
    GiveUp,
    [for<'a> Fn(Result<&'a T, &'a E>, &GiveUp)],
    true,
    |f, o, b| Some(f(o, b))
);

/// Each key of the attribute's grammar (`retry_grammar::KEYS` and `BLOCK_KEYS`) and what a
/// [`Retrier`] has for it: a method, or why it has none (the reason `docs/blocks.md` gives too).
/// A key added to the grammar fails `every_key_has_a_method_or_a_reason` until it has a row.
// Under loom, `RetryBudget::new` and `CircuitBreaker::new` are not `const`.
#[cfg(test)]
#[cfg(not(loom))]
mod parity {
    use super::*;
    use crate::{RetryEvent, Transient, level};
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

    impl From<Rejected> for Probe {
        fn from(_: Rejected) -> Self {
            Probe
        }
    }

    static POLICY: Policy = Policy::new();
    static BUDGET: RetryBudget = RetryBudget::new();
    static BREAKER: CircuitBreaker = CircuitBreaker::new();
    static GATE: AdmissionGate = AdmissionGate::aimd(crate::Aimd::new());
    static AWS: Aws2026Standard = Aws2026Standard::new();

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
            method!("throttle_base" => throttle_base(MS)),
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
                Has::Method("run_hedged", || {
                    static HEDGE: Hedge = Hedge::after(MS);
                    let retrier = Retrier::new(&POLICY).sleep(no_pause);
                    drop(retrier.run_hedged(&HEDGE, || async { Ok::<u32, Probe>(7) }));
                }),
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
            method!("gate" => gate(&GATE)),
            method!("aws2026" => aws2026(&AWS)),
            method!("nested" => nested_retry()),
            method!("log_level" => log_level(level::Warn)),
            method!("name" => name("probe")),
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
    const GUIDE: &str = include_str!("../docs/blocks.md");

    #[test]
    fn every_key_has_a_method_or_a_reason() {
        let table = table();
        for key in KEYS.iter().chain(BLOCK_KEYS) {
            let Some((_, has)) = table.iter().find(|(name, _)| *name == key.name) else {
                panic!(
                    "the attribute's key `{}` has neither a `Retrier` method nor a reason in \
                     retrier.rs's `parity` table: add the method, or the reason here and \
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

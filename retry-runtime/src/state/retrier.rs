//! [`Retrier`]: the attribute's options as methods, for a configuration chosen at run time and a
//! closure; it runs the same loop, in [`drive`](super::drive) and
//! [`drive_blocking`](super::drive_blocking).

use super::attempt::Attempted;
use super::drive::{Attempts, Hedged, Plain};
use super::extras::{Guard, Linger, Shedder, Timeout};
use super::fallback::{FallbackOutput, IntoFinish};
use super::hooks::{GiveUpHook, HookSet, IntoVerdict, NotifyHook};
use super::log::Show;
use super::options::{Blocking, Classifier, Defaults, HeadSet, Options, Opts};
use super::{GiveUp, Head, Hooks, LogLevel, Progress, Retry, Site, Unset};
use crate::engine::{AsyncFnOperation, FnOperation};
use crate::timer::{Elapsed, IntoSleeper, Sleeper};
use crate::{
    AdmissionGate, Aws2026Standard, Backoff, CircuitBreaker, CircuitOpen, Hedge, Jitter, Policy,
    Rejected, RetryBudget,
};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

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
/// # Its type
///
/// `T` and `E` are the two sides of the closure's `Result`. `O` is the options as a type
/// ([`Options`](crate::hooks::Options)): each method that sets an option (a hook, the
/// fallback, the timer, `timeout`, `budget`, `breaker`, `nested_retry`) gives back a `Retrier`
/// whose `O` holds it, so that an option that is not set costs nothing, and a hook is called
/// directly. A new `Retrier` has [`Defaults`](crate::hooks::Defaults).
#[must_use = "a `Retrier` does nothing until `run` or `run_async`"]
pub struct Retrier<'p, T, E, O = Defaults> {
    policy: &'p Policy,
    /// The policy as the timing methods (`max`, `deadline`, ...) changed it, once one was
    /// called; until then the loop reads the borrowed one.
    timings: Option<Policy>,
    name: &'static str,
    level: LogLevel,
    reset_after: Option<Duration>,
    opts: O,
    types: PhantomData<fn() -> Result<T, E>>,
}

impl<'p, T, E> Retrier<'p, T, E> {
    /// A retrier with `policy`'s timings and every other option at its default.
    #[inline]
    pub fn new(policy: &'p Policy) -> Self {
        Retrier {
            policy,
            timings: None,
            name: "retrier",
            level: LogLevel::Error,
            reset_after: None,
            opts: Opts {
                head: Head::default(),
                hooks: Hooks::default(),
                extras: Unset,
            },
            types: PhantomData,
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

/// Retrier methods that set one option: each gives back the retrier with its options changed
/// by their method after `=>`, its type the options' associated type of that change:
///
/// ```text
/// options! {
///     /// `on = f`: ...
///     pub fn on<F, V>(f: F) -> WithOn<F> where [F: Fn(&E) -> V, V: IntoVerdict] => with_on(f);
/// }
/// ```
///
/// becomes `pub fn on<F, V>(self, f: F) -> Retrier<'p, T, E, O::WithOn<F>> where F: Fn(&E) -> V,
/// V: IntoVerdict { self.with(|o| o.with_on(f)) }`.
macro_rules! options {
    ($(
        $(#[$attr:meta])*
        $vis:vis fn $name:ident $(<$($gen:ident),*>)? ($($arg:ident: $ty:ty)?)
            -> $ret:ident $(<$($ret_arg:ty),*>)?
            $(where [$($bound:tt)*])?
            => $with:ident($value:expr);
    )*) => {
        $(
            $(#[$attr])*
            $vis fn $name $(<$($gen),*>)? (self $(, $arg: $ty)?)
                -> Retrier<'p, T, E, O::$ret $(<$($ret_arg),*>)?>
            $(where $($bound)*)?
            {
                self.with(|o| o.$with($value))
            }
        )*
    };
}

impl<'p, T, E, O: Options<'p, T, E>> Retrier<'p, T, E, O> {
    /// The same retrier with its options replaced by `f`.
    #[inline]
    fn with<O2>(self, f: impl FnOnce(O) -> O2) -> Retrier<'p, T, E, O2> {
        Retrier {
            policy: self.policy,
            timings: self.timings,
            name: self.name,
            level: self.level,
            reset_after: self.reset_after,
            opts: f(self.opts),
            types: PhantomData,
        }
    }

    /// The name the events give, where the attribute gives the function's (`"retrier"` unless
    /// named); the metrics' `function` label too.
    pub fn name(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// The policy with one timing changed, for this retrier only.
    #[inline]
    fn timing(mut self, change: impl FnOnce(Policy) -> Policy) -> Self {
        let policy = self.timings.unwrap_or(*self.policy);
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

    /// For a loop that runs for hours (a consumer, a reconnect loop): an attempt that ran for at
    /// least `healthy` before it failed starts the backoff afresh, as a new call would: the next
    /// pause is the first one (`base`), the retries are counted from zero, and the deadline runs
    /// from then. Without it, a connection that failed a hundred times over a day waits the
    /// longest pause after each drop, and a spent deadline ends the loop.
    pub fn reset_after(mut self, healthy: Duration) -> Self {
        self.reset_after = Some(healthy);
        self
    }

    options! {
        /// `on = f`: which errors are worth retrying, `Fn(&E) -> bool` or `Fn(&E) -> Verdict`;
        /// everything else is returned at once. The default is the error type's
        /// [`Transient`](crate::Transient) impl.
        pub fn on<F, V>(f: F) -> WithOn<F> where [F: Fn(&E) -> V, V: IntoVerdict] => with_on(f);

        /// `timeout = "2s"`: each attempt is cut off after `limit` (clipped to the time left before
        /// the deadline) and counts as a transient failure; needs `E: From<Elapsed>`, and
        /// [`run_async`](Retrier::run_async).
        pub fn timeout(limit: Duration) -> WithTimeout where [E: From<Elapsed>]
            => with_timeout(Timeout::new(limit, E::from));

        /// `budget = B`: retries draw from a shared [`RetryBudget`]; when it is empty the loop gives
        /// up with the current error.
        pub fn budget(budget: &'p RetryBudget) -> WithExtras
            => with_extras(|x| x.budget = Some(budget));

        /// `breaker = B`: while the [`CircuitBreaker`] is open, the call returns
        /// `E::from(CircuitOpen)` at once; needs `E: From<CircuitOpen>`.
        pub fn breaker(breaker: &'p CircuitBreaker) -> WithExtras where [E: From<CircuitOpen>]
            => with_extras(|x| x.breaker = Some(Guard::new(breaker, E::from)));

        /// `gate = G`: every attempt, the first included, asks the [`AdmissionGate`] first; while
        /// it sheds load, the call returns `E::from(Rejected)` at once without calling, and the
        /// loop gives up ([`GiveUpReason::GateRejected`](crate::GiveUpReason::GateRejected), which
        /// a fallback hears); needs `E: From<Rejected>`. A rate-limiting gate's wait is taken
        /// before the attempt.
        pub fn gate(gate: &'p AdmissionGate) -> WithExtras where [E: From<Rejected>]
            => with_extras(|x| x.gate = Some(Shedder::new(gate, E::from)));

        /// `aws2026 = AWS`: the AWS SDKs' updated standard mode decides after each failure, in
        /// place of the policy's `max` and pauses: see [`Aws2026Standard`].
        pub fn aws2026(aws: &'p Aws2026Standard) -> WithAws2026 => with_aws2026(aws);

        /// `nested = retry`: keep retrying even inside another retrying function or block.
        pub fn nested_retry() -> WithExtras => with_extras(|x| x.nested_retry = true);

        /// `sleep = f`: pause with another runtime's timer, `Fn(Duration) -> impl Future` or a
        /// [`Sleeper`]; the deadline is then measured on its clock. For
        /// [`run_async`](Retrier::run_async).
        pub fn sleep<F, M>(f: F) -> WithSleeper<F::Sleeper> where [F: IntoSleeper<M>]
            => with_sleeper(f.into_sleeper());
    }

    /// `log_level = "warn"`: the level of the one event logged when a call that failed ends
    /// (`level::Error` by default; `level::Warn`, `level::Info`, ... in
    /// [`level`](crate::level)).
    pub fn log_level(mut self, level: impl Into<LogLevel>) -> Self {
        self.level = level.into();
        self
    }

    options! {
        /// `on_result = f`: an `Ok` value for which `f` answers `true` (or a
        /// [`Verdict`](crate::Verdict) that retries) is a transient failure; when the loop gives
        /// up, the last `Ok` is returned.
        pub fn on_result<J, V>(f: J) -> WithOnResult<J> where [J: Fn(&T) -> V, V: IntoVerdict]
            => with_on_result(f);

        /// `notify = f`: called before each pause, `Fn(&E, &RetryEvent)` or
        /// `Fn(Result<&T, &E>, &RetryEvent)`.
        pub fn notify<J, M>(f: J) -> WithNotify<J> where [J: NotifyHook<T, E, M>] => with_notify(f);

        /// `on_give_up = f`: called once when the loop gives up, `Fn(&E)`, `Fn(&E, &GiveUp)` or
        /// `Fn(Result<&T, &E>, &GiveUp)`.
        pub fn on_give_up<J, M>(f: J) -> WithGiveUp<J, M> where [J: GiveUpHook<T, E, M>]
            => with_give_up(f);

        /// `fallback = f`: when the loop gives up, `f(error, why)` (with `on_result`,
        /// `f(outcome, why)`) makes the result; sync, or for [`run_async`](Retrier::run_async) also
        /// async.
        pub fn fallback<J, Out, M>(f: J) -> WithFallback<J, Out, M>
            where [J: FnOnce(O::Input, GiveUp) -> Out, Out: FallbackOutput<T, E, M>]
            => with_fallback(f);
    }
}

// The runs: apart from the options' methods, without their bound, so that a run asks of its
// options only what it needs of them.
impl<'p, T, E, O> Retrier<'p, T, E, O> {
    /// The retrier taken apart for a run: the policy a timing method made (if one did), the
    /// plan of the run (which borrows that policy, or the one borrowed for `'p`), the options.
    #[inline]
    fn into_parts(self) -> (Option<Policy>, Plan<'p>, O) {
        let plan = Plan {
            policy: self.policy,
            name: self.name,
            level: self.level,
            reset_after: self.reset_after,
        };
        (self.timings, plan, self.opts)
    }

    /// Runs `body` until it succeeds or the loop gives up, pausing with
    /// [`std::thread::sleep`] and measuring the deadline on [`Instant::now`](std::time::Instant::now),
    /// as a sync annotated function does. `?` and `return` in the closure end the attempt.
    ///
    /// The first attempt and its `Ok` are inline, in the caller; the loop after a failure is
    /// out of line (`PERFORMANCE.md` §8).
    #[inline]
    pub fn run<B>(self, body: B) -> Result<T, E>
    where
        O: SyncRun<T, E>,
        E: fmt::Debug,
        B: FnMut() -> Result<T, E>,
    {
        let (timings, plan, opts) = self.into_parts();
        opts.run_blocking(plan.with(&timings), body)
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
    pub fn run_async<B, Fut>(self, body: B) -> impl Future<Output = Result<T, E>>
    where
        O: AsyncRun<T, E>,
        E: fmt::Debug,
        B: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.drive(Plain(FnOperation(body)))
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
        O: AsyncRun<T, E>,
        E: fmt::Debug,
        B: AsyncFnMut() -> Result<T, E>,
    {
        self.drive(Plain(AsyncFnOperation(body)))
    }
}

impl<'p, T, E, O> Retrier<'p, T, E, O> {
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
        O: AsyncRun<T, E>,
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
        O: AsyncRun<T, E>,
        E: fmt::Debug,
    {
        let (timings, plan, opts) = self.into_parts();
        opts.run(plan.with(&timings), each).await
    }
}

/// What a run needs of its [`Retrier`] besides the options.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Plan<'s> {
    policy: &'s Policy,
    name: &'static str,
    level: LogLevel,
    reset_after: Option<Duration>,
}

impl<'s> Plan<'s> {
    /// The plan with the policy a timing method made, if one did.
    #[inline]
    fn with<'t>(self, timings: &'t Option<Policy>) -> Plan<'t>
    where
        's: 't,
    {
        Plan {
            policy: timings.as_ref().unwrap_or(self.policy),
            ..self
        }
    }
}

/// Options that a blocking run ([`Retrier::run`]) can honour: every set of options but those
/// with `timeout` (a blocking call cannot be cut off from outside), `sleep` (a sync loop pauses
/// with `std::thread::sleep`) or an async `fallback`, whose errors are a classifier that can
/// judge `E`.
///
/// Sealed: implemented by what the `Retrier`'s methods build.
pub trait SyncRun<T, E> {
    #[doc(hidden)]
    fn run_blocking<B>(self, plan: Plan<'_>, body: B) -> Result<T, E>
    where
        E: fmt::Debug,
        B: FnMut() -> Result<T, E>;
}

/// Options that an async run ([`Retrier::run_async`]) can honour: every set of options with a
/// timer (tokio's with the `tokio` feature, or `sleep`'s), whose errors are a classifier that
/// can judge `E`.
///
/// Sealed: implemented by what the `Retrier`'s methods build.
pub trait AsyncRun<T, E> {
    /// Runs the loop, each attempt made by `each` (the body, or the body hedged).
    #[doc(hidden)]
    fn run<A: Attempts<T, E>>(self, plan: Plan<'_>, each: A) -> impl Future<Output = Result<T, E>>
    where
        E: fmt::Debug;
}

/// The result of a blocking loop, which has no async fallback to await: with a message that
/// says so.
#[diagnostic::on_unimplemented(
    message = "an async `fallback` needs `run_async`: a blocking run cannot await it",
    label = "this `Retrier` has an async fallback",
    note = "make the fallback sync (return the `Result` itself), or run an async closure: `.run_async(async || {{ ... }}).await`"
)]
pub(crate) trait SyncFinish<T, E> {
    /// The result.
    fn into_result(self) -> Result<T, E>;
}

impl<T, E> SyncFinish<T, E> for Result<T, E> {
    #[inline]
    fn into_result(self) -> Result<T, E> {
        self
    }
}

/// The loop state of one run: its policy (the retrier's own if a timing method made one) is
/// borrowed for the run; the options keep theirs, for `'p`.
#[inline]
fn state<'s, T, E: fmt::Debug, O>(
    plan: Plan<'s>,
    opts: O,
    clock: fn() -> std::time::Instant,
) -> Retry<'s, T, E, O> {
    Retry {
        site: Site {
            policy: plan.policy,
            name: plan.name,
            clock,
        },
        progress: Progress::idle(plan.level),
        opts,
        spans: super::spans::CallSpan::default(),
        value: PhantomData,
    }
}

impl<T, E, K, H, X> SyncRun<T, E> for Opts<K, H, X>
where
    K: HeadSet<Only: Blocking, On: Classifier<E>, Show: Show<E>>,
    H: HookSet<T, E>,
    H::Finish<()>: SyncFinish<T, E>,
    X: Linger<T, E>,
{
    #[inline]
    fn run_blocking<B>(self, plan: Plan<'_>, mut body: B) -> Result<T, E>
    where
        E: fmt::Debug,
        B: FnMut() -> Result<T, E>,
    {
        let mut state = state(plan, self, super::std_now);
        state.progress.retried_above = crate::context::retried_above();
        // A run that reads the clock before its first attempt (a deadline, `reset_after`) makes
        // it in the loop, with the failures (`PERFORMANCE.md` §8).
        let first = if plan.policy.get_deadline().is_some() || plan.reset_after.is_some() {
            None
        } else {
            match state.attempt(&mut body) {
                // Without `on_result`, an `Ok` is accepted as it is; with it, the loop judges it.
                Attempted::Completed(Ok(value)) if !H::ON_RESULT => {
                    return state.accept::<()>(value).into_result();
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
        super::drive_blocking(state, first, plan.reset_after, move |state| {
            state.attempt(&mut body)
        })
    }
}

impl<T, E, K, H, X> AsyncRun<T, E> for Opts<K, H, X>
where
    K: HeadSet<Sleeper: Sleeper, On: Classifier<E>, Show: Show<E>>,
    H: HookSet<T, E>,
    H::Finish<()>: IntoFinish<T, E>,
    X: Linger<T, E>,
{
    fn run<A: Attempts<T, E>>(self, plan: Plan<'_>, each: A) -> impl Future<Output = Result<T, E>>
    where
        E: fmt::Debug,
    {
        let state = state(plan, self, crate::timer::clock_of::<K::Sleeper>);
        super::drive(state, plan.reset_after, each)
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

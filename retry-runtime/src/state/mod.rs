//! The loop of an annotated function: the state of one call, carried across its attempts.
//!
//! The expansion drives it with one call per step:
//!
//! ```text
//! let mut state = Retry::<Result<T, E>>::start(&POLICY, "name", classify).notify(f);
//! loop {
//!     let attempted = state.attempt(|| body);     // or `run(async { body }).await`
//!     state = match state.next(attempted) {
//!         ControlFlow::Break(result) => return result,
//!         ControlFlow::Continue(state) => state,
//!     };
//!     state.pause_blocking();                      // or `pause().await`
//! }
//! ```
//!
//! - here: the state and its entry points: `start`, the builders (one per option, named by its
//!   key, which store what they are given and do nothing else, so their order does not matter),
//!   `next` and the pause;
//! - [`options`]: the option slots (hooks, `timeout`, `budget`, `breaker`, `nested`): what each
//!   option stores, and how the loop asks for it;
//! - [`attempt`]: running one attempt, which returns what happened to it ([`Attempted`]), with
//!   the idempotency key lent to it if the function has one;
//! - [`decide`]: the decision after an attempt that did not end in an accepted `Ok`: pause and
//!   retry, return, or give up (and why), with the logging.

mod attempt;
mod decide;
mod options;

pub use attempt::{Attempted, Run};
pub use decide::{LoggableError, RetryEvent};
pub use options::{
    Extras, Hook, Hooks, IntoError, KeyParam, MaybeExtras, NoRefusal, PerAttempt, Refusal, Slot,
    Unset,
};

use crate::breaker::FromCircuitOpen;
use crate::context;
use crate::timer::{FromElapsed, SleepFuture, Sleeper};
use crate::{CircuitBreaker, Policy, RetryBudget, Verdict};
use options::{Classify, Guard, Notify, OnGiveUp, OnResult, Timeout};
use std::future::Future;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

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

/// The state of one call of an annotated function, across its attempts.
///
/// Built once per call with the function's return type, its classifier and any options; then
/// each attempt runs through [`attempt`](Retry::attempt) or [`run`](Retry::run), which return
/// what happened to it, and [`next`](Retry::next) decides what follows: `Break` carries the
/// function's result, `Continue` the state for the next attempt, whose pause is then taken. An
/// `Ok` outcome is decided without any work.
///
/// The builders read no clock and deposit nothing. The call reads the clock once as it starts
/// if the policy has a deadline (in `start`) or `notify` is set (as the first attempt starts,
/// for [`RetryEvent::elapsed`]), and `budget` gets this call's deposit from the first attempt. A
/// `breaker` reads the clock as each attempt starts and ends, a `timeout` with a deadline as
/// each attempt starts (to clip it), a `budget` or a deadline after a failure.
///
/// The happy path is what the layout serves. Every option lives in a type parameter that is
/// the zero-sized [`Unset`] when the option is not written (`H` holds the hooks, one
/// [`Slot`] each; `X` holds `timeout`, `budget`, `breaker` and `nested`), so a function
/// that uses none of them carries only the policy, its name, the clock, the classifier and two
/// small words of progress. The decision after a failure takes the state apart by value on its
/// own branch, so the state stays in registers and the compiler folds every constant: on the
/// happy path, and in the decision itself, where a sync function's constant policy folds too.
///
/// Each user-supplied callable is a [`Hook`]: stored with a function pointer that calls it, made
/// where its bound is checked (in `start` and the builders), so that a mistyped classifier or
/// hook is one error there, not a second one at every use.
pub struct Retry<'p, Out: Outcome, C = Unset, S = Unset, H = Hooks, X = Unset> {
    site: Site<'p>,
    progress: Progress,
    classify: Classify<C, Out::Error>,
    sleeper: S,
    hooks: H,
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
    /// Retries taken so far; the attempt under way (or that just ended) is number `retries + 1`.
    retries: u32,
    /// An enclosing annotated function or `scope::caller_retries` retries this work.
    retried_above: bool,
    /// The pause `next` decided last, in nanoseconds: the one to take now, and the previous one
    /// for decorrelated jitter. Eight bytes, not a `Duration`'s sixteen, because an async
    /// function's future holds this across every attempt.
    previous_pause: u64,
    /// When the first attempt started, read only for a deadline or `notify`.
    started: Option<Instant>,
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
    /// and inline: a reference would put the progress in memory, copied there padding and all
    /// in odd-sized words whose loads stall on the narrower stores of its fields.
    #[inline(always)]
    fn elapsed(self, clock: fn() -> Instant) -> Duration {
        self.started
            .map_or(Duration::ZERO, |t| clock().saturating_duration_since(t))
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
                // Here, where a constant policy is known to have no deadline, and not at the
                // first attempt, where an async function reads the policy from its future.
                started: policy.get_deadline().map(|_| clock()),
            },
            classify: Hook::new(classify, |c, error, ()| c(error).into_verdict()),
            sleeper,
            hooks: Hooks::default(),
            extras: Unset,
        }
    }
}

// The builders' return types spell out the state's type parameters; an alias would only hide them.
#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, H, X> Retry<'p, Result<T, E>, C, S, H, X> {
    /// The same state with its option slots (sleeper, hooks, extras) replaced by `f`: the one
    /// place that lists every field, for the builders.
    #[inline(always)]
    fn with_options<S2, H2, X2>(
        self,
        f: impl FnOnce(S, H, X) -> (S2, H2, X2),
    ) -> Retry<'p, Result<T, E>, C, S2, H2, X2> {
        let (sleeper, hooks, extras) = f(self.sleeper, self.hooks, self.extras);
        Retry {
            site: self.site,
            progress: self.progress,
            classify: self.classify,
            sleeper,
            hooks,
            extras,
        }
    }

    /// The state with its extras in place, one of them set by `set`.
    #[inline(always)]
    fn with_extra(
        self,
        set: impl FnOnce(&mut Extras<'p, E>),
    ) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>>
    where
        X: MaybeExtras<'p, E>,
    {
        self.with_options(|s, h, x| {
            let mut extras = x.into_extras();
            set(&mut extras);
            (s, h, extras)
        })
    }

    /// `sleep = f`: pause with `f` instead of tokio's timer; the deadline is then measured on
    /// [`Instant::now`]. The expansion calls it after [`start`](Retry::start), whose clock that
    /// is already, so the time the call started, if `start` read it, is on the same clock.
    pub fn sleep<F, Fut>(mut self, f: F) -> Retry<'p, Result<T, E>, C, F, H, X>
    where
        F: Fn(Duration) -> Fut,
        Fut: SleepFuture,
    {
        self.site.clock = std_now;
        self.with_options(|_, h, x| (f, h, x))
    }

    /// `timeout = "2s"`: each attempt is cut off after `limit` (clipped to the time left before
    /// the deadline) and counts as a transient failure.
    pub fn timeout(self, limit: Duration) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>>
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
    /// deposits into it. When it is empty the loop returns the current error at once.
    pub fn budget(self, budget: &'p RetryBudget) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>>
    where
        X: MaybeExtras<'p, E>,
    {
        self.with_extra(|x| x.budget = Some(budget))
    }

    /// `breaker = B`: while the [`CircuitBreaker`] is open, the function returns
    /// `E::from(CircuitOpen)` at once without running the body; every attempt feeds it.
    pub fn breaker(
        self,
        breaker: &'p CircuitBreaker,
    ) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>>
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
    pub fn nested_retry(self) -> Retry<'p, Result<T, E>, C, S, H, Extras<'p, E>>
    where
        X: MaybeExtras<'p, E>,
    {
        self.with_extra(|x| x.nested_retry = true)
    }
}

// The hooks' builders: the hooks are one slot type, `Hooks<R, N, G>`, and each builder fills one
// of its slots.
#[allow(clippy::type_complexity)]
impl<'p, T, E, C, S, R, N, G, X> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G>, X> {
    /// `on_result = f`: an `Ok` value that `f` marks is treated as a transient failure; when the
    /// retries run out, the last `Ok` value is returned.
    pub fn on_result<F: Fn(&T) -> bool>(
        self,
        f: F,
    ) -> Retry<'p, Result<T, E>, C, S, Hooks<OnResult<F, T>, N, G>, X> {
        let on_result = Hook::new(f, |f, value, ()| f(value));
        self.with_options(|s, h, x| {
            let hooks = Hooks {
                on_result,
                notify: h.notify,
                on_give_up: h.on_give_up,
            };
            (s, hooks, x)
        })
    }

    /// `notify = f`: called before each pause with the error and a [`RetryEvent`].
    pub fn notify<F: Fn(&E, &RetryEvent)>(
        self,
        f: F,
    ) -> Retry<'p, Result<T, E>, C, S, Hooks<R, Notify<F, E>, G>, X> {
        let notify = Hook::new(f, |f, error, event| f(error, event));
        self.with_options(|s, h, x| {
            let hooks = Hooks {
                on_result: h.on_result,
                notify,
                on_give_up: h.on_give_up,
            };
            (s, hooks, x)
        })
    }

    /// `on_give_up = f`: called once with the last error when the loop stops retrying a
    /// transient failure (retries used up, deadline, a server-suggested pause too long, the
    /// budget empty).
    pub fn on_give_up<F: Fn(&E)>(
        self,
        f: F,
    ) -> Retry<'p, Result<T, E>, C, S, Hooks<R, N, OnGiveUp<F, E>>, X> {
        let on_give_up = Hook::new(f, |f, error, ()| f(error));
        self.with_options(|s, h, x| {
            let hooks = Hooks {
                on_result: h.on_result,
                notify: h.notify,
                on_give_up,
            };
            (s, hooks, x)
        })
    }
}

impl<'p, T, E, C, S, R, N, G, X> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G>, X> {
    /// Decides what follows an attempt: `Break` with the function's result, or `Continue` with
    /// the state for the next attempt, whose [`pause`](Retry::pause) is then taken.
    ///
    /// The state is taken and given back by value. An accepted `Ok` is decided at once;
    /// anything else goes to the decision after a failure, with the state taken apart into
    /// separate locals on that branch alone. Nothing of the state has its address taken, so the
    /// compiler keeps it in registers and constants instead of storing it up front.
    #[inline(always)]
    pub fn next(mut self, attempted: Attempted<T, E>) -> ControlFlow<Result<T, E>, Self>
    where
        E: LoggableError,
        R: Slot<T, (), bool>,
        N: Slot<E, RetryEvent>,
        G: Slot<E>,
        X: MaybeExtras<'p, E>,
    {
        match attempted {
            Attempted::Completed(Ok(value)) if !self.hooks.rejects(&value) => {
                if let Some(extras) = self.extras.get_mut() {
                    extras.record(false, self.site.clock);
                }
                ControlFlow::Break(Ok(value))
            }
            attempted => self.after_failure(attempted),
        }
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

    /// The pause of an async function. The timer is boxed and the future holds nothing else:
    /// it is only needed once an attempt has failed, and anything inline would make every
    /// call's future larger, which costs the happy path. A zero pause is not slept (tokio's
    /// timer would round it up to its 1 ms tick).
    ///
    /// The future is opaque, so that a `sleep = f` that is not an async sleep is one error, at
    /// `sleep`, and not a second one here.
    #[inline]
    pub fn pause(&self) -> impl Future<Output = ()> + use<'p, T, E, C, S, R, N, G, X>
    where
        S: Sleeper,
    {
        if !self.sleeps() {
            return Pause(None);
        }
        Pause(Some(Box::pin(self.sleeper.sleep(self.decided_pause()))))
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
    fn step<T, E: LoggableError, C, S>(
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
    fn the_happy_path_reads_no_clock_without_deadline_or_notify() {
        let policy = Policy::new();
        let mut retry = counted(&policy).on_result(|_| false).on_give_up(|_| {});
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        assert_eq!(clock_reads(), 0);
    }

    #[test]
    fn a_deadline_reads_the_clock_once_as_the_call_starts() {
        let policy = Policy::new().deadline(Duration::from_secs(10));
        let mut retry = counted(&policy).notify(|_, _| {});
        assert_eq!(clock_reads(), 1);
        assert!(retry.progress.started.is_some());
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        assert_eq!(clock_reads(), 1, "notify needs no second reading");
    }

    #[test]
    fn notify_reads_the_clock_once_as_the_first_attempt_starts() {
        let policy = Policy::new();
        let mut retry = counted(&policy).notify(|_, _| {});
        assert_eq!(clock_reads(), 0, "the builder reads no clock");
        let attempted = retry.attempt(|| Ok(()));
        assert!(matches!(retry.next(attempted), ControlFlow::Break(Ok(()))));
        assert_eq!(clock_reads(), 1);
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

//! The option slots of the loop state: what each option stores, and how the loop asks for it.
//!
//! An option that is not written is the zero-sized [`Unset`] in its slot, so it costs nothing.
//! The builders that fill the slots (in the parent module, beside `start`) store what they are
//! given and do nothing else.

use super::{GiveUp, RetryEvent};
use crate::context::{Enter, Frame, KeySlot, Scoped};
use crate::timer::Elapsed;
use crate::{Admission, CircuitBreaker, CircuitOpen, RetryBudget, Verdict};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

/// An option that was not written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unset;

/// A callable the user named (`on`, `on_result`, `notify`, `on_give_up`), with the pointer that
/// calls it with what the loop hands over (`&A`, and `&B` for a hook that hears two things).
///
/// The pointer is made where the callable's bound is checked (in `start` and the builders), so
/// the loop calls it without a bound of its own, and the pointer can adapt the user's form to
/// the loop's.
pub struct Hook<F, A, B = (), R = ()> {
    f: F,
    call: fn(&F, &A, &B) -> R,
}

impl<F, A, B, R> Hook<F, A, B, R> {
    #[inline(always)]
    pub(super) fn new(f: F, call: fn(&F, &A, &B) -> R) -> Self {
        Hook { f, call }
    }

    #[inline(always)]
    pub(super) fn call(&self, a: &A, b: &B) -> R {
        (self.call)(&self.f, a, b)
    }
}

/// The classifier: the error, and its verdict.
pub(super) type Classify<C, E> = Hook<C, E, (), Verdict>;
/// `on_result = f`: an `Ok` value, and whether to retry it after all (a `bool` or a
/// [`Verdict`], as `f` answers).
pub(super) type OnResult<F, T> = Hook<F, T, (), Verdict>;
/// `notify = f`: the outcome and the pause about to be taken; the form of `f` decides whether
/// a rejected `Ok` reaches it ([`NotifyHook`]).
pub(super) type Notify<F, T, E> = Hook<F, Result<T, E>, RetryEvent>;

/// A hook's slot: [`Unset`], or a [`Hook`] that hears `&A` and `&B` and answers `R`.
pub trait Slot<A, B = (), R = ()> {
    /// Whether a hook is there. A constant, so that what only a hook would hear (the
    /// [`RetryEvent`], the elapsed time) is made only when one is.
    const SET: bool;
    /// Whether the hook hears the time since the first attempt started, for which the loop
    /// reads the clock as the call starts.
    const TIMED: bool = Self::SET;
    /// Calls the hook, if there is one.
    fn call(&self, a: &A, b: &B) -> Option<R>;
}

impl<A, B, R> Slot<A, B, R> for Unset {
    const SET: bool = false;
    #[inline(always)]
    fn call(&self, _: &A, _: &B) -> Option<R> {
        None
    }
}

impl<F, A, B, R> Slot<A, B, R> for Hook<F, A, B, R> {
    const SET: bool = true;
    #[inline(always)]
    fn call(&self, a: &A, b: &B) -> Option<R> {
        Some(Hook::call(self, a, b))
    }
}

/// A hook that hears no time: `on_give_up = f` with `f: Fn(&E)`, which needs no clock reading.
pub struct Untimed<S>(S);

impl<S: Slot<A, B, R>, A, B, R> Slot<A, B, R> for Untimed<S> {
    const SET: bool = S::SET;
    const TIMED: bool = false;
    #[inline(always)]
    fn call(&self, a: &A, b: &B) -> Option<R> {
        self.0.call(a, b)
    }
}

/// The forms `notify = f` accepts, told apart by `M`: `Fn(&E, &RetryEvent)` ([`ErrorForm`]),
/// which hears the pauses after errors, and `Fn(Result<&T, &E>, &RetryEvent)`
/// ([`OutcomeForm`]), which also hears the pauses after an `Ok` that `on_result` rejected, its
/// references of one lifetime (`Result<&'a T, &'a E>`, as `Result::as_ref` gives it) or two. A
/// reference never matches a `Result`, so a generic `fn log<E: Display>(error: &E, event:
/// &RetryEvent)` is the first form without naming `E`.
#[diagnostic::on_unimplemented(
    message = "`notify = ...` must be callable as `Fn(&{E}, &RetryEvent)` or `Fn(Result<&{T}, &{E}>, &RetryEvent)`",
    label = "not a function of `&{E}` and `&RetryEvent`",
    note = "`Fn(&{E}, &RetryEvent)` hears each pause after an error; `Fn(Result<&{T}, &{E}>, &RetryEvent)` (the outcome, as `Result::as_ref` gives it) also each pause after an `Ok` that `on_result` rejected",
    note = "a closure needs the types of its arguments written, since two forms are accepted: `|error: &{E}, event: &RetryEvent| ...`"
)]
pub trait NotifyHook<T, E, M> {
    /// The hook, in its slot.
    fn into_slot(self) -> Hook<Self, Result<T, E>, RetryEvent>
    where
        Self: Sized;
}

/// The hook form that hears an error: `Fn(&E, ...)`.
pub enum ErrorForm {}
/// The hook form that hears the outcome: `Fn(Result<&T, &E>, ...)`.
pub enum OutcomeForm {}
/// The form `on_give_up = f` with `f: Fn(&E)`.
pub enum ErrorOnly {}

impl<F: Fn(&E, &RetryEvent), T, E> NotifyHook<T, E, ErrorForm> for F {
    fn into_slot(self) -> Hook<F, Result<T, E>, RetryEvent> {
        Hook::new(self, |f, outcome, event| {
            if let Err(error) = outcome {
                f(error, event)
            }
        })
    }
}

// One lifetime for both sides, higher-ranked: a hook written with one (`Result<&'a T, &'a E>`,
// as `Result::as_ref` gives it) and one written with two (`Result<&T, &E>`) both meet it.
impl<F: for<'a> Fn(Result<&'a T, &'a E>, &RetryEvent), T, E> NotifyHook<T, E, OutcomeForm> for F {
    fn into_slot(self) -> Hook<F, Result<T, E>, RetryEvent> {
        Hook::new(self, |f, outcome, event| f(outcome.as_ref(), event))
    }
}

/// The forms `on_give_up = f` accepts, told apart by `M`: `Fn(&E)` ([`ErrorOnly`]),
/// `Fn(&E, &GiveUp)` ([`ErrorForm`]) and `Fn(Result<&T, &E>, &GiveUp)` ([`OutcomeForm`], with
/// one lifetime or two, as for `notify`).
#[diagnostic::on_unimplemented(
    message = "`on_give_up = ...` must be callable as `Fn(&{E})`, `Fn(&{E}, &GiveUp)` or `Fn(Result<&{T}, &{E}>, &GiveUp)`",
    label = "not a function of `&{E}` (and `&GiveUp`)",
    note = "`Fn(&{E})` hears the last error; with a second argument `&retry_runtime::GiveUp` it also hears why the loop gave up, the attempts and the time spent; `Result<&{T}, &{E}>` as the first argument (the outcome, as `Result::as_ref` gives it) hears an `Ok` that `on_result` rejected as well",
    note = "a closure needs the types of its arguments written, since three forms are accepted: `|error: &{E}| ...`"
)]
pub trait GiveUpHook<T, E, M> {
    /// The slot the hook fills.
    type Slot: Slot<Result<T, E>, GiveUp>;
    /// The hook, in its slot.
    fn into_slot(self) -> Self::Slot;
}

impl<F: Fn(&E), T, E> GiveUpHook<T, E, ErrorOnly> for F {
    type Slot = Untimed<Hook<F, Result<T, E>, GiveUp>>;
    fn into_slot(self) -> Self::Slot {
        Untimed(Hook::new(self, |f, outcome, _| {
            if let Err(error) = outcome {
                f(error)
            }
        }))
    }
}

impl<F: Fn(&E, &GiveUp), T, E> GiveUpHook<T, E, ErrorForm> for F {
    type Slot = Hook<F, Result<T, E>, GiveUp>;
    fn into_slot(self) -> Self::Slot {
        Hook::new(self, |f, outcome, why| {
            if let Err(error) = outcome {
                f(error, why)
            }
        })
    }
}

// Higher-ranked with one lifetime, as `NotifyHook`'s outcome form.
impl<F: for<'a> Fn(Result<&'a T, &'a E>, &GiveUp), T, E> GiveUpHook<T, E, OutcomeForm> for F {
    type Slot = Hook<F, Result<T, E>, GiveUp>;
    fn into_slot(self) -> Self::Slot {
        Hook::new(self, |f, outcome, why| f(outcome.as_ref(), why))
    }
}

/// The hooks of a function, one [`Slot`] each, and its fallback: one type parameter of
/// [`Retry`](super::Retry) for all of them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hooks<R = Unset, N = Unset, G = Unset, F = Unset> {
    pub(super) on_result: R,
    pub(super) notify: N,
    pub(super) on_give_up: G,
    pub(super) fallback: F,
}

impl<R, N, G, F> Hooks<R, N, G, F> {
    /// What `on_result` says about an `Ok` value: [`Verdict::Fail`] (return it) without one.
    #[inline(always)]
    pub(super) fn judge<T>(&self, value: &T) -> Verdict
    where
        R: Slot<T, (), Verdict>,
    {
        self.on_result.call(value, &()).unwrap_or(Verdict::Fail)
    }
}

// ---- the fallback ----------------------------------------------------------------------------

/// What the fallback takes first, by the `on_result` slot `Self`: what can end the loop. Without
/// `on_result` ([`Unset`]) only an error can, and the fallback takes the error `E`; with it, an
/// `Ok` that `on_result` rejected can too, and the fallback takes the outcome `Result<T, E>`, so
/// that a fallback never misses the end of a loop (an error form would not hear a rejected `Ok`).
pub trait FallbackInput<T, E> {
    /// `E`, or `Result<T, E>` with `on_result`.
    type Input;
    /// The outcome the loop gave up on as the fallback's input; the `Ok` value back if the
    /// input cannot hold it (without `on_result`, where no `Ok` ends the loop).
    fn input(outcome: Result<T, E>) -> Result<Self::Input, T>;
}

impl<T, E> FallbackInput<T, E> for Unset {
    type Input = E;
    #[inline(always)]
    fn input(outcome: Result<T, E>) -> Result<E, T> {
        match outcome {
            Err(error) => Ok(error),
            Ok(value) => Err(value),
        }
    }
}

impl<F, T, E> FallbackInput<T, E> for OnResult<F, T> {
    type Input = Result<T, E>;
    #[inline(always)]
    fn input(outcome: Result<T, E>) -> Result<Result<T, E>, T> {
        Ok(outcome)
    }
}

/// What a fallback returns: the function's `Result` (a sync fallback), or a future of it (an
/// async one), told apart by `M` ([`SyncForm`] or [`AsyncForm`]); and the slot that holds such
/// a fallback.
#[diagnostic::on_unimplemented(
    message = "`fallback = ...` must return `Result<{T}, {E}>`, the function's own result, not `{Self}`",
    label = "this fallback returns `{Self}`",
    note = "a fallback is called as `FnOnce({E}, GiveUp) -> Result<{T}, {E}>` when the loop gives up (with `on_result`, as `FnOnce(Result<{T}, {E}>, GiveUp) -> Result<{T}, {E}>`, since a rejected `Ok` can end the loop too); in an `async fn` it may also be async (return a future of that `Result`)"
)]
pub trait FallbackOutput<T, E, M>: Sized {
    /// The slot of a fallback `J` that returns `Self`.
    type Slot<J>: Fallback<T, E>;
    /// `f` in its slot, with the pointer that calls it with the outcome, as `R` (the
    /// `on_result` slot) gives it to `f`: made here, where `f`'s bound is checked, so that the
    /// loop needs no bound of its own (and a mistyped fallback is one error, at `fallback`).
    fn slot<R: FallbackInput<T, E>, J: FnOnce(R::Input, GiveUp) -> Self>(f: J) -> Self::Slot<J>;
}

/// A fallback that returns the `Result` itself.
pub enum SyncForm {}
/// A fallback that returns a future of the `Result`.
pub enum AsyncForm {}

/// The pointer that calls a fallback `J` with the outcome the loop gave up on: what `J`
/// returned, or the `Ok` value back if `J` does not take one.
type CallFallback<J, T, E, Out> = fn(J, Result<T, E>, GiveUp) -> Result<Out, T>;

impl<T, E> FallbackOutput<T, E, SyncForm> for Result<T, E> {
    type Slot<J> = SyncFallback<J, T, E>;
    fn slot<R: FallbackInput<T, E>, J: FnOnce(R::Input, GiveUp) -> Self>(
        f: J,
    ) -> SyncFallback<J, T, E> {
        SyncFallback {
            f,
            call: |f, outcome, why| R::input(outcome).map(|input| f(input, why)),
        }
    }
}

impl<T, E, Fut: Future<Output = Result<T, E>>> FallbackOutput<T, E, AsyncForm> for Fut {
    type Slot<J> = AsyncFallback<J, Fut, T, E>;
    fn slot<R: FallbackInput<T, E>, J: FnOnce(R::Input, GiveUp) -> Self>(
        f: J,
    ) -> AsyncFallback<J, Fut, T, E> {
        AsyncFallback {
            f,
            call: |f, outcome, why| R::input(outcome).map(|input| f(input, why)),
        }
    }
}

/// A loop that can await a fallback of form `M`: every async one, and a sync one only a sync
/// fallback. The loop's sleeper says which it is: a sync function has none ([`Unset`]), which
/// settles the form before the fallback's return type is looked at, so that an async fallback
/// of a sync function is the one error "must return `Result<T, E>`".
pub trait Awaits<M> {}

impl Awaits<SyncForm> for Unset {}
impl<S: crate::timer::Sleeper, M> Awaits<M> for S {}

/// The attempt context the fallback runs in: the last attempt's frame and the key, so that
/// `attempt()` inside it gives the same idempotency key as the attempts had.
pub struct FallbackScope<K> {
    pub(super) frame: Frame,
    pub(super) key: K,
}

/// The fallback's slot: [`Unset`], or `fallback = f` in its form.
pub trait Fallback<T, E> {
    /// What `next` breaks with: the function's `Result`, or for an async fallback a future of
    /// it ([`Finish`]).
    type Output<K: KeySlot>;
    /// Whether a fallback is there.
    const SET: bool;
    /// A result that needs no fallback (an `Ok`, a permanent error), as the output.
    fn ready<K: KeySlot>(result: Result<T, E>) -> Self::Output<K>;
    /// Calls the fallback with the outcome the loop gave up on (the last error, or an `Ok` that
    /// `on_result` rejected) and why, in `scope`.
    fn call<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
    ) -> Self::Output<K>;
}

impl<T, E> Fallback<T, E> for Unset {
    type Output<K: KeySlot> = Result<T, E>;
    const SET: bool = false;
    #[inline(always)]
    fn ready<K: KeySlot>(result: Result<T, E>) -> Result<T, E> {
        result
    }
    #[inline(always)]
    fn call<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        _: GiveUp,
        _: FallbackScope<K>,
    ) -> Result<T, E> {
        outcome
    }
}

/// `fallback = f` with a sync `f`: called where the loop gives up.
pub struct SyncFallback<J, T, E> {
    f: J,
    call: CallFallback<J, T, E, Result<T, E>>,
}

impl<J, T, E> Fallback<T, E> for SyncFallback<J, T, E> {
    type Output<K: KeySlot> = Result<T, E>;
    const SET: bool = true;
    #[inline(always)]
    fn ready<K: KeySlot>(result: Result<T, E>) -> Result<T, E> {
        result
    }
    fn call<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
    ) -> Result<T, E> {
        let _entered = Enter::new(scope.frame);
        scope
            .key
            .lend(|| (self.call)(self.f, outcome, why).unwrap_or_else(Ok))
    }
}

/// `fallback = f` with an async `f`: its future, made where the loop gives up, is what the
/// function awaits last.
pub struct AsyncFallback<J, Fut, T, E> {
    f: J,
    call: CallFallback<J, T, E, Fut>,
}

// Without a bound on `Fut`: `FallbackOutput` checked it where the slot was made, and a second
// check here would repeat its error at every use of the loop state.
impl<J, Fut, T, E> Fallback<T, E> for AsyncFallback<J, Fut, T, E> {
    type Output<K: KeySlot> = Finish<Scoped<Fut, K>, T, E>;
    const SET: bool = true;
    #[inline(always)]
    fn ready<K: KeySlot>(result: Result<T, E>) -> Self::Output<K> {
        Finish::Ready {
            result: Some(result),
        }
    }
    fn call<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
    ) -> Self::Output<K> {
        match (self.call)(self.f, outcome, why) {
            Ok(future) => Finish::Fallback {
                future: Scoped::new(scope.frame, scope.key, future),
            },
            Err(value) => Self::ready(Ok(value)),
        }
    }
}

pin_project_lite::pin_project! {
    /// The end of an async function with an async fallback: its result, or the fallback's
    /// future, which runs in the last attempt's context.
    #[project = FinishProj]
    #[allow(missing_docs)] // the fields are described with their variants
    pub enum Finish<Fut, T, E> {
        /// The result, without a fallback.
        Ready { result: Option<Result<T, E>> },
        /// The fallback's future.
        Fallback { #[pin] future: Fut },
    }
}

impl<Fut: Future<Output = Result<T, E>>, T, E> Future for Finish<Fut, T, E> {
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<T, E>> {
        match self.project() {
            FinishProj::Ready { result } => match result.take() {
                Some(result) => Poll::Ready(result),
                None => panic!("`Finish` polled after it completed"),
            },
            FinishProj::Fallback { future } => future.poll(cx),
        }
    }
}

/// What `next` breaks with in an async function that has a fallback, as a future: a sync
/// fallback's `Result`, or an async fallback's [`Finish`].
pub trait IntoFinish {
    /// The future.
    type Future: Future;
    /// `self`, as a future.
    fn into_finish(self) -> Self::Future;
}

impl<T, E> IntoFinish for Result<T, E> {
    type Future = std::future::Ready<Result<T, E>>;
    #[inline(always)]
    fn into_finish(self) -> Self::Future {
        std::future::ready(self)
    }
}

impl<Fut: Future<Output = Result<T, E>>, T, E> IntoFinish for Finish<Fut, T, E> {
    type Future = Self;
    #[inline(always)]
    fn into_finish(self) -> Self {
        self
    }
}

// ---- logging -----------------------------------------------------------------------------------

/// How the loop logs: how it shows the error (`D`: [`ByDebug`] or [`ByName`]) and the level of
/// the final event (`V`, one of [`level`]). Zero-sized: a type parameter of the loop state.
pub struct Log<D, V>(std::marker::PhantomData<fn() -> (D, V)>);

/// The error is shown with its `Debug` impl.
pub enum ByDebug {}
/// The error has no `Debug` impl (or a generic error type has no `Debug` bound): it is shown
/// by its type name.
pub enum ByName {}

/// The levels `log_level = "..."` names, each a zero-sized type.
pub mod level {
    use super::LogLevel;

    /// A level of the final event.
    pub trait Level {
        /// The level.
        const LEVEL: LogLevel;
    }

    macro_rules! levels {
        ($($name:ident,)*) => {$(
            #[doc = concat!("`log_level = \"", stringify!($name), "\"`.")]
            #[derive(Clone, Copy, Debug)]
            pub struct $name;
            impl Level for $name {
                const LEVEL: LogLevel = LogLevel::$name;
            }
        )*};
    }

    levels!(Error, Warn, Info, Debug, Trace,);
}

/// The level of the one event logged when a call that failed ends (`log_level = "..."`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// `ERROR`, the default.
    Error,
    /// `WARN`.
    Warn,
    /// `INFO`.
    Info,
    /// `DEBUG`.
    Debug,
    /// `TRACE`.
    Trace,
}

/// How the loop shows an error of type `E` and at which level it logs the final event.
pub trait Logs<E> {
    /// The final event's level.
    const LEVEL: LogLevel;
    /// Writes `error` for a log event.
    fn show(error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

impl<E: fmt::Debug, V: level::Level> Logs<E> for Log<ByDebug, V> {
    const LEVEL: LogLevel = V::LEVEL;
    fn show(error: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(error, f)
    }
}

impl<E, V: level::Level> Logs<E> for Log<ByName, V> {
    const LEVEL: LogLevel = V::LEVEL;
    fn show(_: &E, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a `{}` (no `Debug`)", std::any::type_name::<E>())
    }
}

/// The options that have no hook of their own: `timeout`, `budget`, `breaker` and `nested =
/// retry`, with the breaker's permission for the attempt under way. Present only when one of
/// them is written; otherwise the loop carries [`Unset`] in its place. (The idempotency key is
/// not kept here: each attempt borrows it, see
/// [`KeyParam`](crate::__private::KeyParam).)
pub struct Extras<'p, E> {
    /// A per-attempt time limit, and how to turn its expiry into the function's error.
    pub(super) timeout: Option<Timeout<E>>,
    pub(super) budget: Option<&'p RetryBudget>,
    /// The breaker, and how to turn its refusal into the function's error.
    pub(super) breaker: Option<Guard<'p, E>>,
    /// The breaker's permission for the attempt under way, recorded when the attempt ends; a
    /// trial dropped unrecorded (a cancelled call) counts as failed, by `Admission`'s own drop.
    pub(super) admission: Option<Admission<'p>>,
    /// `nested = retry`: retry even when a layer above does.
    pub(super) nested_retry: bool,
}

/// `timeout = "2s"`: the limit, and how to turn its expiry into the function's error.
pub(super) struct Timeout<E> {
    pub(super) limit: Duration,
    pub(super) error: fn(Elapsed) -> E,
}

/// `breaker = B`: the breaker, and how to turn its refusal into the function's error.
pub(super) struct Guard<'p, E> {
    pub(super) breaker: &'p CircuitBreaker,
    pub(super) error: fn(CircuitOpen) -> E,
}

/// The breaker's refusal of an attempt, and how to turn it into the function's error: sixteen
/// bytes and a pointer, so that an async attempt's future does not hold a whole error for it.
pub struct Refusal<E> {
    open: CircuitOpen,
    error: fn(CircuitOpen) -> E,
}

// By hand: a derive would ask `E: Copy`, and these hold only a function pointer to make an `E`.
impl<E> Clone for Timeout<E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for Timeout<E> {}
impl<E> Clone for Guard<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for Guard<'_, E> {}
impl<E> Clone for Refusal<E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for Refusal<E> {}

impl<E> Default for Extras<'_, E> {
    fn default() -> Self {
        Extras {
            timeout: None,
            budget: None,
            breaker: None,
            admission: None,
            nested_retry: false,
        }
    }
}

impl<'p, E> Extras<'p, E> {
    /// Asks the breaker, if any, to let the next attempt through.
    #[inline]
    pub(super) fn admit(&mut self, clock: fn() -> Instant) -> Result<(), Refusal<E>> {
        let Some(guard) = self.breaker else {
            return Ok(());
        };
        match guard.breaker.admit(clock()) {
            Ok(admission) => {
                self.admission = Some(admission);
                Ok(())
            }
            Err(open) => Err(Refusal {
                open,
                error: guard.error,
            }),
        }
    }

    /// Tells the breaker, if any, how the attempt went: a transient failure counts against the
    /// service; a success or a permanent error (the service answered) counts for it. `true`
    /// when the circuit is open after it, by this outcome or by others'.
    #[inline]
    pub(super) fn record(&mut self, service_failed: bool, clock: fn() -> Instant) -> bool {
        match self.admission.take() {
            Some(admission) => admission.record_and_check(!service_failed, clock()),
            None => false,
        }
    }
}

/// [`Unset`] or [`Extras`]: the loop asks for the extras through this, so an unset one is
/// `None` at compile time and costs nothing.
pub trait MaybeExtras<'p, E>: PerAttempt<Refusal: IntoError<E>> {
    /// Asks the breaker, if any, to let the next attempt through.
    fn admit(&mut self, clock: fn() -> Instant) -> Result<(), Self::Refusal>;
    /// The extras, if any option put them in place.
    fn get(&self) -> Option<&Extras<'p, E>>;
    /// The extras, mutably.
    fn get_mut(&mut self) -> Option<&mut Extras<'p, E>>;
    /// The extras, made if none were yet.
    fn into_extras(self) -> Extras<'p, E>;
}

impl<'p, E> MaybeExtras<'p, E> for Unset {
    #[inline(always)]
    fn admit(&mut self, _: fn() -> Instant) -> Result<(), NoRefusal> {
        Ok(())
    }
    #[inline(always)]
    fn get(&self) -> Option<&Extras<'p, E>> {
        None
    }
    #[inline(always)]
    fn get_mut(&mut self) -> Option<&mut Extras<'p, E>> {
        None
    }
    fn into_extras(self) -> Extras<'p, E> {
        Extras::default()
    }
}

impl<'p, E> MaybeExtras<'p, E> for Extras<'p, E> {
    #[inline(always)]
    fn admit(&mut self, clock: fn() -> Instant) -> Result<(), Refusal<E>> {
        Extras::admit(self, clock)
    }
    #[inline(always)]
    fn get(&self) -> Option<&Extras<'p, E>> {
        Some(self)
    }
    #[inline(always)]
    fn get_mut(&mut self) -> Option<&mut Extras<'p, E>> {
        Some(self)
    }
    fn into_extras(self) -> Extras<'p, E> {
        self
    }
}

/// What an attempt takes from the extras: the breaker's refusal. Apart from [`MaybeExtras`] and
/// without its lifetime, so that an async function's future, whose lifetimes the compiler
/// erases, can still name this type.
pub trait PerAttempt {
    /// [`NoRefusal`] without extras: such an attempt cannot be refused, so its future has no
    /// room for a refusal. [`Refusal`] with them.
    type Refusal;
}

impl PerAttempt for Unset {
    type Refusal = NoRefusal;
}

impl<E> PerAttempt for Extras<'_, E> {
    type Refusal = Refusal<E>;
}

/// The refusal of a function without a breaker: there is none.
#[derive(Clone, Copy, Debug)]
pub enum NoRefusal {}

/// A refusal by the breaker, turned into the function's error.
pub trait IntoError<E> {
    /// The refusal as the function's error.
    fn into_error(self) -> E;
}

impl<E> IntoError<E> for NoRefusal {
    #[inline(always)]
    fn into_error(self) -> E {
        match self {}
    }
}

impl<E> IntoError<E> for Refusal<E> {
    #[inline]
    fn into_error(self) -> E {
        (self.error)(self.open)
    }
}

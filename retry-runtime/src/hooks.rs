//! What the [`Retrier`](crate::Retrier)'s methods name in their bounds and its type: the forms a
//! hook may take, what a classifier and a fallback take and return, what `sleep` accepts, and
//! the markers of what a run needs (how errors are judged, whether `run` can honour the
//! options). The attribute's options take the same forms.
//!
//! You rarely name these: they appear in the `Retrier`'s signatures and in compile errors,
//! whose messages say what each one asks.

pub use crate::retrier::{
    AnyRun, AsyncOnly, Boxed, FallbackTakes, HasTimer, On, OwnTimer, RetrierFallback, RetrierHook,
    RunKind, RunsBlocking,
};
pub use crate::state::{ByTransient, Classifier};
pub use crate::timer::{FnForm, IntoSleeper, TypeForm};

use crate::state::fallback::{AsyncFallback, Fallback, SyncFallback};
use crate::state::hooks::{Awaited, GiveUpSlot, Hook, Slot};
use crate::{GiveUp, RetryEvent, Verdict};
use std::future::Future;
use std::marker::PhantomData;

/// What a classifier (`on = ...`, `on_result = ...`) may return: `bool` or a [`Verdict`].
///
/// `true` is [`Verdict::Retry`], `false` [`Verdict::Fail`].
#[diagnostic::on_unimplemented(
    message = "a classifier must return `bool` or `retry_runtime::Verdict`, not `{Self}`",
    label = "this classifier returns `{Self}`",
    note = "`on = ...` judges errors and `on_result = ...` judges `Ok` values: return `true` to retry and `false` to return at once, or a `Verdict`: `Retry`, `RetryAfter(pause)`, `RetryNow` or `Fail`"
)]
pub trait IntoVerdict {
    /// The answer as a [`Verdict`].
    fn into_verdict(self) -> Verdict;
}

impl IntoVerdict for bool {
    #[inline]
    fn into_verdict(self) -> Verdict {
        Verdict::from(self)
    }
}

impl IntoVerdict for Verdict {
    #[inline]
    fn into_verdict(self) -> Verdict {
        self
    }
}

/// The forms `notify = f` accepts, told apart by `M`: `Fn(&E, &RetryEvent)` ([`ErrorForm`]),
/// which hears the pauses after errors, and `Fn(Result<&T, &E>, &RetryEvent)`
/// ([`OutcomeForm`]), which also hears the pauses after an `Ok` that `on_result` rejected, its
/// references of one lifetime (`Result<&'a T, &'a E>`, as `Result::as_ref` gives it) or two. A
/// reference never matches a `Result`, so a generic `fn log<E: Display>(error: &E, event:
/// &RetryEvent)` is the first form without naming `E`.
///
/// In an async loop each form may also be async ([`Async`]`<ErrorForm>`,
/// [`Async`]`<OutcomeForm>`): an async closure `async |error: &E, event: &RetryEvent| ...`, an
/// `async fn`, or a function that returns a future of `()`. The loop awaits it before the pause
/// it announces, inside that pause and the deadline (the guide:
/// [`guide::attempts`](crate::guide::attempts), "Hooks that await").
#[diagnostic::on_unimplemented(
    message = "`notify = ...` must be callable as `Fn(&{E}, &RetryEvent)` or `Fn(Result<&{T}, &{E}>, &RetryEvent)`, or be an async function of the same arguments whose future gives `()`",
    label = "not a function of `&{E}` and `&RetryEvent` that returns nothing (or a future of nothing)",
    note = "`Fn(&{E}, &RetryEvent)` hears each pause after an error; `Fn(Result<&{T}, &{E}>, &RetryEvent)` (the outcome, as `Result::as_ref` gives it) also each pause after an `Ok` that `on_result` rejected; in an async function either may be async: `async |error: &{E}, event: &RetryEvent| {{ ... }}`, with nothing returned",
    note = "a closure needs the types of its arguments written, since two forms are accepted: `|error: &{E}, event: &RetryEvent| ...`"
)]
pub trait NotifyHook<T, E, M> {
    /// The slot the hook fills.
    #[doc(hidden)]
    type Slot: Slot<Result<T, E>, RetryEvent>;
    /// Calls a sync hook with the outcome, as `Result::as_ref` gives it, and the event. An
    /// async form is never called so: a loop that cannot await asks its form to be
    /// [`Blocking`].
    #[doc(hidden)]
    fn hear(&self, outcome: Result<&T, &E>, event: &RetryEvent);
    /// The hook, in its slot.
    #[doc(hidden)]
    fn into_slot(self) -> Self::Slot;
}

/// The hook form that hears an error: `Fn(&E, ...)`.
pub enum ErrorForm {}
/// The hook form that hears the outcome: `Fn(Result<&T, &E>, ...)`.
pub enum OutcomeForm {}
/// The form `on_give_up = f` with `f: Fn(&E)`.
pub enum ErrorOnly {}
/// The async variant of a hook form `M`: `async |error: &E, event: &RetryEvent| ...` is
/// `Async<ErrorForm>`.
pub struct Async<M>(PhantomData<fn() -> M>);

/// The hook forms a sync loop can call: all but the async ones ([`Async`]), which only an
/// async loop can await.
#[diagnostic::on_unimplemented(
    message = "this hook is async, but the loop it is given to is sync and cannot await it",
    label = "an async hook given to a sync loop",
    note = "make the function (or block) `async`, or write the hook without `async`: `|error: &E, event: &RetryEvent| ...` for `notify`, `|error: &E, why: &GiveUp| ...` for `on_give_up`"
)]
pub trait Blocking {}
// Not recommended: the message says what to write, and a list of markers would not.
#[diagnostic::do_not_recommend]
impl Blocking for ErrorForm {}
#[diagnostic::do_not_recommend]
impl Blocking for OutcomeForm {}
#[diagnostic::do_not_recommend]
impl Blocking for ErrorOnly {}

/// The pointer that calls a sync `notify` hook in its slot.
fn notify<F: NotifyHook<T, E, M>, T, E, M>(f: &F, outcome: &Result<T, E>, event: &RetryEvent) {
    f.hear(outcome.as_ref(), event)
}

impl<F: Fn(&E, &RetryEvent), T, E> NotifyHook<T, E, ErrorForm> for F {
    type Slot = Hook<F, Result<T, E>, RetryEvent>;
    fn hear(&self, outcome: Result<&T, &E>, event: &RetryEvent) {
        if let Err(error) = outcome {
            self(error, event)
        }
    }
    fn into_slot(self) -> Self::Slot {
        Hook::new(self, notify::<F, T, E, ErrorForm>)
    }
}

// One lifetime for both sides, higher-ranked: a hook written with one (`Result<&'a T, &'a E>`,
// as `Result::as_ref` gives it) and one written with two (`Result<&T, &E>`) both meet it.
impl<F: for<'a> Fn(Result<&'a T, &'a E>, &RetryEvent), T, E> NotifyHook<T, E, OutcomeForm> for F {
    type Slot = Hook<F, Result<T, E>, RetryEvent>;
    fn hear(&self, outcome: Result<&T, &E>, event: &RetryEvent) {
        self(outcome, event)
    }
    fn into_slot(self) -> Self::Slot {
        Hook::new(self, notify::<F, T, E, OutcomeForm>)
    }
}

impl<F: Hears<Result<T, E>, RetryEvent, Async<M>>, T, E, M> NotifyHook<T, E, Async<M>> for F {
    type Slot = Awaited<F, Async<M>, Result<T, E>, RetryEvent>;
    fn hear(&self, _: Result<&T, &E>, _: &RetryEvent) {}
    fn into_slot(self) -> Self::Slot {
        Awaited::new(self)
    }
}

/// An async hook of the form `M`, as the loop awaits it: with what it hears, by reference.
/// Hidden: only the bounds of [`NotifyHook`] and [`GiveUpHook`] name it.
#[doc(hidden)]
pub trait Hears<A, B, M> {
    /// The hook's future, for the outcome `a` and the event (or why the loop gave up) `b`.
    fn hear<'a>(&'a self, a: &'a A, b: &'a B) -> impl Future<Output = ()> + 'a;
}

impl<F: AsyncFn(&E, &B), T, E, B> Hears<Result<T, E>, B, Async<ErrorForm>> for F {
    async fn hear<'a>(&'a self, a: &'a Result<T, E>, b: &'a B) {
        if let Err(error) = a {
            self(error, b).await
        }
    }
}

impl<F: for<'a> AsyncFn(Result<&'a T, &'a E>, &B), T, E, B>
    Hears<Result<T, E>, B, Async<OutcomeForm>> for F
{
    async fn hear<'a>(&'a self, a: &'a Result<T, E>, b: &'a B) {
        self(a.as_ref(), b).await
    }
}

impl<F: AsyncFn(&E), T, E> Hears<Result<T, E>, GiveUp, Async<ErrorOnly>> for F {
    async fn hear<'a>(&'a self, a: &'a Result<T, E>, _: &'a GiveUp) {
        if let Err(error) = a {
            self(error).await
        }
    }
}

/// The forms `on_give_up = f` accepts, told apart by `M`: `Fn(&E)` ([`ErrorOnly`]),
/// `Fn(&E, &GiveUp)` ([`ErrorForm`]) and `Fn(Result<&T, &E>, &GiveUp)` ([`OutcomeForm`], with
/// one lifetime or two, as for `notify`); in an async loop each may also be async
/// ([`Async`]`<M>`), awaited before the call returns (and before the fallback).
#[diagnostic::on_unimplemented(
    message = "`on_give_up = ...` must be callable as `Fn(&{E})`, `Fn(&{E}, &GiveUp)` or `Fn(Result<&{T}, &{E}>, &GiveUp)`, or be an async function of the same arguments whose future gives `()`",
    label = "not a function of `&{E}` (and `&GiveUp`)",
    note = "`Fn(&{E})` hears the last error; with a second argument `&retry_runtime::GiveUp` it also hears why the loop gave up, the attempts and the time spent; `Result<&{T}, &{E}>` as the first argument (the outcome, as `Result::as_ref` gives it) hears an `Ok` that `on_result` rejected as well; in an async function each may be async: `async |error: &{E}, why: &GiveUp| {{ ... }}`, with nothing returned",
    note = "a closure needs the types of its arguments written, since three forms are accepted: `|error: &{E}| ...`"
)]
pub trait GiveUpHook<T, E, M> {
    /// The slot the hook fills.
    #[doc(hidden)]
    type Slot: GiveUpSlot<T, E>;
    /// Calls a sync hook with the outcome, as `Result::as_ref` gives it, and why (an async
    /// form is never called so, as [`NotifyHook::hear`]).
    #[doc(hidden)]
    fn hear(&self, outcome: Result<&T, &E>, why: &GiveUp);
    /// The hook, in its slot.
    #[doc(hidden)]
    fn into_slot(self) -> Self::Slot;
}

/// The pointer that calls an `on_give_up` hook in its slot.
fn give_up<F: GiveUpHook<T, E, M>, T, E, M>(f: &F, outcome: &Result<T, E>, why: &GiveUp) {
    f.hear(outcome.as_ref(), why)
}

impl<F: Fn(&E), T, E> GiveUpHook<T, E, ErrorOnly> for F {
    type Slot = Hook<F, Result<T, E>, GiveUp, (), false>;
    fn hear(&self, outcome: Result<&T, &E>, _: &GiveUp) {
        if let Err(error) = outcome {
            self(error)
        }
    }
    fn into_slot(self) -> Self::Slot {
        Hook::new(self, give_up::<F, T, E, ErrorOnly>)
    }
}

impl<F: Fn(&E, &GiveUp), T, E> GiveUpHook<T, E, ErrorForm> for F {
    type Slot = Hook<F, Result<T, E>, GiveUp>;
    fn hear(&self, outcome: Result<&T, &E>, why: &GiveUp) {
        if let Err(error) = outcome {
            self(error, why)
        }
    }
    fn into_slot(self) -> Self::Slot {
        Hook::new(self, give_up::<F, T, E, ErrorForm>)
    }
}

// Higher-ranked with one lifetime, as `NotifyHook`'s outcome form.
impl<F: for<'a> Fn(Result<&'a T, &'a E>, &GiveUp), T, E> GiveUpHook<T, E, OutcomeForm> for F {
    type Slot = Hook<F, Result<T, E>, GiveUp>;
    fn hear(&self, outcome: Result<&T, &E>, why: &GiveUp) {
        self(outcome, why)
    }
    fn into_slot(self) -> Self::Slot {
        Hook::new(self, give_up::<F, T, E, OutcomeForm>)
    }
}

impl<F: Hears<Result<T, E>, GiveUp, Async<M>>, T, E, M> GiveUpHook<T, E, Async<M>> for F {
    type Slot = Awaited<F, Async<M>, Result<T, E>, GiveUp>;
    fn hear(&self, _: Result<&T, &E>, _: &GiveUp) {}
    fn into_slot(self) -> Self::Slot {
        Awaited::new(self)
    }
}

/// What a fallback returns, told apart by `M`: the loop's own `Result` ([`SyncForm`]), or a
/// future of it ([`AsyncForm`]), which only an async loop can await.
#[diagnostic::on_unimplemented(
    message = "`fallback = ...` must return `Result<{T}, {E}>`, the function's own result, not `{Self}`",
    label = "this fallback returns `{Self}`",
    note = "a fallback is called as `FnOnce({E}, GiveUp) -> Result<{T}, {E}>` when the loop gives up (with `on_result`, as `FnOnce(Result<{T}, {E}>, GiveUp) -> Result<{T}, {E}>`, since a rejected `Ok` can end the loop too); in an `async fn` it may also be async (return a future of that `Result`)"
)]
pub trait FallbackOutput<T, E, M>: Sized {
    /// The slot of a fallback `J` that returns `Self`.
    #[doc(hidden)]
    type Slot<J>: Fallback<T, E>;
    /// `f` in its slot, with the pointer that calls it with the outcome, as `R` (the
    /// `on_result` slot) gives it to `f`: made here, where `f`'s bound is checked, so that the
    /// loop needs no bound of its own (and a mistyped fallback is one error, at `fallback`).
    #[doc(hidden)]
    #[allow(private_bounds)]
    fn slot<R: Slot<T, (), Verdict>, J: FnOnce(A, GiveUp) -> Self, A>(f: J) -> Self::Slot<J>
    where
        A: FallbackArgument<R::Takes<E>>;
}

/// What a fallback takes first (`Self`), and what the loop gives it (`I`: the error, or beside
/// `on_result` the outcome): only the same type. A bound of its own, beside the fallback's
/// `FnOnce(Self, GiveUp)`, so that a fallback whose first parameter is another type gets this
/// message, naming both types, where the bound `FnOnce(I, GiveUp)` gave rustc's E0631.
///
/// Hidden: only the macros' expansions name it (through `__private`).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "this fallback takes `{Self}` first, but the loop calls it with `{I}`",
    label = "expected a fallback that takes `{I}` and a `GiveUp`",
    note = "when the loop gives up, it calls `fallback = f` as `f(error, why)`: the function's error type, by value, and a `retry_runtime::GiveUp` that says why; `f` returns the function's result",
    note = "beside `on_result`, an `Ok` it rejected can end the loop too, so the fallback takes the whole outcome, `Result<T, E>`, in place of the error: `f(outcome, why)`"
)]
pub trait FallbackArgument<I> {
    /// What the loop gives, as the fallback's argument.
    #[doc(hidden)]
    fn from_input(input: I) -> Self;
}

#[diagnostic::do_not_recommend]
impl<I> FallbackArgument<I> for I {
    fn from_input(input: I) -> I {
        input
    }
}

/// A second impl, never used, only so that rustc does not infer what the loop gives from the
/// fallback's parameter through the one impl above before it knows both (it reported a type
/// mismatch of `Options::Input` then, E0271), and compares them with the message above instead.
#[diagnostic::do_not_recommend]
impl<I> FallbackArgument<NeverGiven<I>> for I {
    fn from_input(input: NeverGiven<I>) -> I {
        match input.0 {}
    }
}

/// What no loop gives a fallback (see the impl of [`FallbackArgument`] for it).
#[doc(hidden)]
pub struct NeverGiven<I>(std::convert::Infallible, PhantomData<I>);

/// A fallback that returns the `Result` itself.
pub enum SyncForm {}
/// A fallback that returns a future of the `Result`.
pub enum AsyncForm {}

impl<T, E> FallbackOutput<T, E, SyncForm> for Result<T, E> {
    type Slot<J> = SyncFallback<J, T, E>;
    fn slot<R: Slot<T, (), Verdict>, J: FnOnce(A, GiveUp) -> Self, A>(f: J) -> Self::Slot<J>
    where
        A: FallbackArgument<R::Takes<E>>,
    {
        SyncFallback {
            f,
            call: |f, outcome, why| match R::takes(outcome) {
                Ok(input) => Ok(f(A::from_input(input), why)),
                Err(value) => Err(Ok(value)),
            },
        }
    }
}

impl<T, E, Fut: Future<Output = Result<T, E>>> FallbackOutput<T, E, AsyncForm> for Fut {
    type Slot<J> = AsyncFallback<J, Fut, T, E>;
    fn slot<R: Slot<T, (), Verdict>, J: FnOnce(A, GiveUp) -> Self, A>(f: J) -> Self::Slot<J>
    where
        A: FallbackArgument<R::Takes<E>>,
    {
        AsyncFallback {
            f,
            call: |f, outcome, why| match R::takes(outcome) {
                Ok(input) => Ok(f(A::from_input(input), why)),
                Err(value) => Err(Ok(value)),
            },
        }
    }
}

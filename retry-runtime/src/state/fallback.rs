//! `fallback = f`: its sync and async forms and their slots, and the end of an async function
//! that awaits one ([`Finish`]). What it takes, the `on_result` slot says
//! ([`Slot::Takes`](super::hooks::Slot::Takes)).

use super::hooks::Slot;
use super::{GiveUp, Unset};
use crate::Verdict;
use crate::context::{Enter, Frame, KeySlot, Scoped};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

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
    #[inline]
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
pub struct NeverGiven<I>(std::convert::Infallible, std::marker::PhantomData<I>);

/// A fallback that returns the `Result` itself.
pub enum SyncForm {}
/// A fallback that returns a future of the `Result`.
pub enum AsyncForm {}

/// The pointer that calls a fallback `J` with the outcome the loop gave up on: what `J`
/// returned, or the `Ok` value back if `J` does not take one.
type CallFallback<J, T, E, Out> = fn(J, Result<T, E>, GiveUp) -> Result<Out, T>;

impl<T, E> FallbackOutput<T, E, SyncForm> for Result<T, E> {
    type Slot<J> = SyncFallback<J, T, E>;
    fn slot<R: Slot<T, (), Verdict>, J: FnOnce(A, GiveUp) -> Self, A>(f: J) -> SyncFallback<J, T, E>
    where
        A: FallbackArgument<R::Takes<E>>,
    {
        SyncFallback {
            f,
            call: |f, outcome, why| R::takes(outcome).map(|input| f(A::from_input(input), why)),
        }
    }
}

impl<T, E, Fut: Future<Output = Result<T, E>>> FallbackOutput<T, E, AsyncForm> for Fut {
    type Slot<J> = AsyncFallback<J, Fut, T, E>;
    fn slot<R: Slot<T, (), Verdict>, J: FnOnce(A, GiveUp) -> Self, A>(
        f: J,
    ) -> AsyncFallback<J, Fut, T, E>
    where
        A: FallbackArgument<R::Takes<E>>,
    {
        AsyncFallback {
            f,
            call: |f, outcome, why| R::takes(outcome).map(|input| f(A::from_input(input), why)),
        }
    }
}

/// The attempt context the fallback runs in: the last attempt's frame and the key, so that
/// `attempt()` inside it gives the same idempotency key as the attempts had.
pub struct FallbackScope<K> {
    pub(crate) frame: Frame,
    pub(crate) key: K,
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
    #[inline]
    fn ready<K: KeySlot>(result: Result<T, E>) -> Result<T, E> {
        result
    }
    #[inline]
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
    pub(crate) f: J,
    pub(crate) call: CallFallback<J, T, E, Result<T, E>>,
}

impl<J, T, E> Fallback<T, E> for SyncFallback<J, T, E> {
    type Output<K: KeySlot> = Result<T, E>;
    const SET: bool = true;
    #[inline]
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
    #[inline]
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
pub(crate) trait IntoFinish<T, E> {
    /// The future.
    type Future: Future<Output = Result<T, E>>;
    /// `self`, as a future.
    fn into_finish(self) -> Self::Future;
}

impl<T, E> IntoFinish<T, E> for Result<T, E> {
    type Future = std::future::Ready<Result<T, E>>;
    #[inline]
    fn into_finish(self) -> Self::Future {
        std::future::ready(self)
    }
}

impl<Fut: Future<Output = Result<T, E>>, T, E> IntoFinish<T, E> for Finish<Fut, T, E> {
    type Future = Self;
    #[inline]
    fn into_finish(self) -> Self {
        self
    }
}

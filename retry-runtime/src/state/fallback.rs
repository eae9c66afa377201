//! `fallback = f`: its sync and async forms and their slots, and the end of an async function
//! that awaits one ([`Finish`]). What it takes, the `on_result` slot says
//! ([`Slot::Takes`](super::hooks::Slot::Takes)).

use super::{GiveUp, Unset};
use crate::context::{Enter, Frame, KeySlot, Scoped};
pub use crate::hooks::{AsyncForm, FallbackArgument, FallbackOutput, SyncForm};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

/// The pointer that calls a fallback `J` with the outcome the loop gave up on: what `J`
/// returned, or the call's result without it (an `Ok` value that `J` does not take, or the
/// result of a sync fallback in an async run, the [`Retrier`](crate::Retrier)'s).
pub(crate) type CallFallback<J, T, E, Out> =
    fn(J, Result<T, E>, GiveUp) -> Result<Out, Result<T, E>>;

/// The attempt context the fallback runs in: the last attempt's frame and the key, so that
/// `attempt()` inside it gives the same idempotency key as the attempts had.
pub struct FallbackScope<K> {
    pub(crate) frame: Frame,
    pub(crate) key: K,
}

/// The fallback's slot: [`Unset`], or `fallback = f` in its form.
pub trait Fallback<T, E> {
    /// What `next` breaks with: the function's `Result`, or for an async fallback a future of
    /// it ([`Finish`]); made from a result that needs no fallback (an `Ok`, a permanent error).
    type Output<K: KeySlot>: From<Result<T, E>>;
    /// Whether a fallback is there.
    const SET: bool;
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
    fn call<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
    ) -> Result<T, E> {
        let _entered = Enter::new(scope.frame);
        scope
            .key
            .lend(|| (self.call)(self.f, outcome, why).unwrap_or_else(|result| result))
    }
}

/// `fallback = f` with an async `f`: its future, made where the loop gives up in the last
/// attempt's context, is what the function awaits last, in that context too.
pub struct AsyncFallback<J, Fut, T, E> {
    pub(crate) f: J,
    pub(crate) call: CallFallback<J, T, E, Fut>,
}

// Without a bound on `Fut`: `FallbackOutput` checked it where the slot was made, and a second
// check here would repeat its error at every use of the loop state.
impl<J, Fut, T, E> Fallback<T, E> for AsyncFallback<J, Fut, T, E> {
    type Output<K: KeySlot> = Finish<Scoped<Fut, K>, T, E>;
    const SET: bool = true;
    fn call<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
    ) -> Self::Output<K> {
        let made = {
            let _entered = Enter::new(scope.frame);
            scope.key.lend(|| (self.call)(self.f, outcome, why))
        };
        match made {
            Ok(future) => Finish::Fallback {
                future: Scoped::new(scope.frame, scope.key, future),
            },
            Err(result) => result.into(),
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
        Ready { #[pin] result: std::future::Ready<Result<T, E>> },
        /// The fallback's future.
        Fallback { #[pin] future: Fut },
    }
}

impl<Fut, T, E> From<Result<T, E>> for Finish<Fut, T, E> {
    fn from(result: Result<T, E>) -> Self {
        Finish::Ready {
            result: std::future::ready(result),
        }
    }
}

impl<Fut: Future<Output = Result<T, E>>, T, E> Future for Finish<Fut, T, E> {
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<T, E>> {
        match self.project() {
            FinishProj::Ready { result } => result.poll(cx),
            FinishProj::Fallback { future } => future.poll(cx),
        }
    }
}

/// What `next` breaks with in an async function that has a fallback or an `on_give_up`, as a
/// future: a sync fallback's `Result`, an async fallback's [`Finish`], or an async
/// `on_give_up`'s [`HeardFirst`](super::hooks::HeardFirst).
pub(crate) trait IntoFinish<T, E> {
    /// `self`, as a future.
    fn into_finish(self) -> impl Future<Output = Result<T, E>>;
}

impl<T, E> IntoFinish<T, E> for Result<T, E> {
    fn into_finish(self) -> impl Future<Output = Result<T, E>> {
        std::future::ready(self)
    }
}

impl<Fut: Future<Output = Result<T, E>>, T, E> IntoFinish<T, E> for Finish<Fut, T, E> {
    fn into_finish(self) -> impl Future<Output = Result<T, E>> {
        self
    }
}

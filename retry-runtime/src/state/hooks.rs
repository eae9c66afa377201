//! The hooks of a loop (`on`, `on_result`, `notify`, `on_give_up`): each user-supplied callable
//! as a [`Hook`] in its slot, the forms `notify` and `on_give_up` accept, and [`Hooks`], which
//! holds them all and the fallback as one slot of the options.
//!
//! A hook that is not written is the zero-sized [`Unset`] in its slot, so it costs nothing. The
//! builders that fill the slots store what they are given and do nothing else.

use super::fallback::{Fallback, FallbackScope};
use super::{GiveUp, RetryEvent, Unset};
use crate::Verdict;
use crate::context::KeySlot;

/// A callable the user named (`on`, `on_result`, `notify`, `on_give_up`), with the pointer that
/// calls it with what the loop hands over (`&A`, and `&B` for a hook that hears two things).
///
/// The pointer is made where the callable's bound is checked (in `start` and the builders), so
/// the loop calls it without a bound of its own, and the pointer can adapt the user's form to
/// the loop's.
///
/// `TIMED`: whether the hook hears the time since the first attempt started, for which the loop
/// reads the clock; all do but `on_give_up = f` with `f: Fn(&E)`.
pub struct Hook<F, A, B = (), R = (), const TIMED: bool = true> {
    f: F,
    call: fn(&F, &A, &B) -> R,
}

impl<F, A, B, R, const TIMED: bool> Hook<F, A, B, R, TIMED> {
    #[inline]
    pub(crate) fn new(f: F, call: fn(&F, &A, &B) -> R) -> Self {
        Hook { f, call }
    }

    #[inline]
    pub(crate) fn call(&self, a: &A, b: &B) -> R {
        (self.call)(&self.f, a, b)
    }
}

/// The classifier: the error, and its verdict.
pub(crate) type Classify<C, E> = Hook<C, E, (), Verdict>;
/// `on_result = f`: an `Ok` value, and whether to retry it after all.
pub(crate) type OnResult<F, T> = Hook<F, T, (), Verdict>;
/// `notify = f`: the outcome and the pause about to be taken.
pub(crate) type Notify<F, T, E> = Hook<F, Result<T, E>, RetryEvent>;

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

/// A hook's slot: [`Unset`], or a [`Hook`] that hears `&A` and `&B` and answers `R`.
pub trait Slot<A, B = (), R = ()> {
    /// Whether a hook is there. A constant, so that what only a hook would hear (the
    /// [`RetryEvent`], the elapsed time) is made only when one is.
    const SET: bool;
    /// Whether the hook hears the time since the first attempt started, for which the loop
    /// reads the clock as the call starts.
    const TIMED: bool = Self::SET;
    /// Whether a hook is there, for a slot filled at run time; [`SET`](Slot::SET) for one
    /// filled by a builder.
    #[inline]
    fn is_set(&self) -> bool {
        Self::SET
    }
    /// Whether a hook that hears the time is there (at run time).
    #[inline]
    fn is_timed(&self) -> bool {
        Self::TIMED && self.is_set()
    }
    /// Calls the hook, if there is one.
    fn call(&self, a: &A, b: &B) -> Option<R>;
    /// As the `on_result` slot (`A` is `T`), what the fallback takes: the error `E` when it is
    /// empty ([`Unset`]), since only an error can end the loop then; with a hook, the outcome
    /// `Result<T, E>`, since a rejected `Ok` can end it too, and a fallback never misses the
    /// end of a loop.
    type Takes<E>;
    /// The outcome the loop gave up on, as what the fallback takes; the `Ok` value back if that
    /// cannot hold it (an empty `on_result`, where no `Ok` ends the loop).
    fn takes<E>(outcome: Result<A, E>) -> Result<Self::Takes<E>, A>;
}

impl<A, B, R> Slot<A, B, R> for Unset {
    const SET: bool = false;
    type Takes<E> = E;
    #[inline]
    fn call(&self, _: &A, _: &B) -> Option<R> {
        None
    }
    #[inline]
    fn takes<E>(outcome: Result<A, E>) -> Result<E, A> {
        match outcome {
            Err(error) => Ok(error),
            Ok(value) => Err(value),
        }
    }
}

impl<F, A, B, R, const TIMED: bool> Slot<A, B, R> for Hook<F, A, B, R, TIMED> {
    const SET: bool = true;
    const TIMED: bool = TIMED;
    type Takes<E> = Result<A, E>;
    #[inline]
    fn call(&self, a: &A, b: &B) -> Option<R> {
        Some(Hook::call(self, a, b))
    }
    #[inline]
    fn takes<E>(outcome: Result<A, E>) -> Result<Result<A, E>, A> {
        Ok(outcome)
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
    /// Calls the hook with the outcome, as `Result::as_ref` gives it, and the event.
    #[doc(hidden)]
    fn hear(&self, outcome: Result<&T, &E>, event: &RetryEvent);
    /// The hook, in its slot.
    #[doc(hidden)]
    #[inline]
    fn into_slot(self) -> Hook<Self, Result<T, E>, RetryEvent>
    where
        Self: Sized,
    {
        Hook::new(self, |f, outcome, event| f.hear(outcome.as_ref(), event))
    }
}

/// The hook form that hears an error: `Fn(&E, ...)`.
pub enum ErrorForm {}
/// The hook form that hears the outcome: `Fn(Result<&T, &E>, ...)`.
pub enum OutcomeForm {}
/// The form `on_give_up = f` with `f: Fn(&E)`.
pub enum ErrorOnly {}

impl<F: Fn(&E, &RetryEvent), T, E> NotifyHook<T, E, ErrorForm> for F {
    #[inline]
    fn hear(&self, outcome: Result<&T, &E>, event: &RetryEvent) {
        if let Err(error) = outcome {
            self(error, event)
        }
    }
}

// One lifetime for both sides, higher-ranked: a hook written with one (`Result<&'a T, &'a E>`,
// as `Result::as_ref` gives it) and one written with two (`Result<&T, &E>`) both meet it.
impl<F: for<'a> Fn(Result<&'a T, &'a E>, &RetryEvent), T, E> NotifyHook<T, E, OutcomeForm> for F {
    #[inline]
    fn hear(&self, outcome: Result<&T, &E>, event: &RetryEvent) {
        self(outcome, event)
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
    #[doc(hidden)]
    type Slot: Slot<Result<T, E>, GiveUp>;
    /// Calls the hook with the outcome, as `Result::as_ref` gives it, and why.
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
    #[inline]
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
    #[inline]
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
    #[inline]
    fn hear(&self, outcome: Result<&T, &E>, why: &GiveUp) {
        self(outcome, why)
    }
    fn into_slot(self) -> Self::Slot {
        Hook::new(self, give_up::<F, T, E, OutcomeForm>)
    }
}

/// The hooks of a loop, one slot each, and its fallback: one slot of the options for all of
/// them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hooks<R = Unset, N = Unset, G = Unset, F = Unset> {
    pub(crate) on_result: R,
    pub(crate) notify: N,
    pub(crate) on_give_up: G,
    pub(crate) fallback: F,
}

/// What the loop asks of [`Hooks`], and how a builder replaces one of its slots: a trait, so
/// that the options' impl needs one parameter for all four slots. Sealed: public only because
/// the options' types name it, in a module no one outside can reach.
pub trait HookSet<T, E>: Sized {
    /// `on_result` is there.
    const ON_RESULT: bool;
    /// `notify` is there.
    const NOTIFY: bool;
    /// `on_give_up` or `fallback` hears why the loop gave up.
    const HEARS_GIVE_UP: bool;
    /// `fallback` is there.
    const FALLBACK: bool;
    /// A hook hears the time since the first attempt started.
    const TIMED: bool;
    /// What the fallback takes: `E`, or with `on_result` the outcome.
    type Input;
    /// The `on_result` slot, which says what the fallback takes.
    type OnResult: Slot<T, (), Verdict, Takes<E> = Self::Input>;
    /// What the loop ends with: the `Result`, or an async fallback's future of it.
    type Finish<K: KeySlot>;
    /// The hooks with `on_result`'s slot replaced.
    type WithOnResult<R2: Slot<T, (), Verdict>>: HookSet<T, E>;
    /// The hooks with `notify`'s slot replaced.
    type WithNotify<N2: Slot<Result<T, E>, RetryEvent>>: HookSet<T, E>;
    /// The hooks with `on_give_up`'s slot replaced.
    type WithGiveUp<G2: Slot<Result<T, E>, GiveUp>>: HookSet<T, E>;
    /// The hooks with the fallback's slot replaced.
    type WithFallback<F2: Fallback<T, E>>: HookSet<T, E>;
    /// `on_result`'s slot replaced; a fallback set before keeps what it takes (the expansion
    /// writes `on_result` first, so that the fallback hears a rejected `Ok`).
    fn with_on_result<R2: Slot<T, (), Verdict>>(self, slot: R2) -> Self::WithOnResult<R2>;
    /// `notify`'s slot replaced.
    fn with_notify<N2: Slot<Result<T, E>, RetryEvent>>(self, slot: N2) -> Self::WithNotify<N2>;
    /// `on_give_up`'s slot replaced.
    fn with_give_up<G2: Slot<Result<T, E>, GiveUp>>(self, slot: G2) -> Self::WithGiveUp<G2>;
    /// The fallback's slot replaced.
    fn with_fallback<F2: Fallback<T, E>>(self, slot: F2) -> Self::WithFallback<F2>;
    /// Whether a hook that hears the time is there (at run time: a slot filled at run time may
    /// be empty).
    fn timed(&self) -> bool;
    /// Whether `notify` is there (at run time).
    fn notifies(&self) -> bool;
    /// Whether a hook or a fallback hears why the loop gave up (at run time).
    fn hears_give_up(&self) -> bool;
    /// `on_result`'s verdict on an `Ok` value: [`Verdict::Fail`] (return it) without one.
    fn judge(&self, value: &T) -> Verdict;
    /// Tells `notify`.
    fn notify(&self, outcome: &Result<T, E>, event: &RetryEvent);
    /// Tells `on_give_up`.
    fn gave_up(&self, outcome: &Result<T, E>, why: &GiveUp);
    /// A result that needs no fallback, as what the loop ends with.
    fn ready<K: KeySlot>(result: Result<T, E>) -> Self::Finish<K>;
    /// Runs the fallback (if any) on the outcome the loop gave up on.
    fn fall_back<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
    ) -> Self::Finish<K>;
}

impl<T, E, R, N, G, F> HookSet<T, E> for Hooks<R, N, G, F>
where
    R: Slot<T, (), Verdict>,
    N: Slot<Result<T, E>, RetryEvent>,
    G: Slot<Result<T, E>, GiveUp>,
    F: Fallback<T, E>,
{
    const ON_RESULT: bool = R::SET;
    const NOTIFY: bool = N::SET;
    const HEARS_GIVE_UP: bool = G::SET || F::SET;
    const FALLBACK: bool = F::SET;
    const TIMED: bool = N::TIMED || G::TIMED || F::SET;
    type Input = R::Takes<E>;
    type OnResult = R;
    type Finish<K: KeySlot> = F::Output<K>;
    type WithOnResult<R2: Slot<T, (), Verdict>> = Hooks<R2, N, G, F>;
    type WithNotify<N2: Slot<Result<T, E>, RetryEvent>> = Hooks<R, N2, G, F>;
    type WithGiveUp<G2: Slot<Result<T, E>, GiveUp>> = Hooks<R, N, G2, F>;
    type WithFallback<F2: Fallback<T, E>> = Hooks<R, N, G, F2>;

    #[inline]
    fn with_on_result<R2: Slot<T, (), Verdict>>(self, on_result: R2) -> Hooks<R2, N, G, F> {
        Hooks {
            on_result,
            notify: self.notify,
            on_give_up: self.on_give_up,
            fallback: self.fallback,
        }
    }

    #[inline]
    fn with_notify<N2: Slot<Result<T, E>, RetryEvent>>(self, notify: N2) -> Hooks<R, N2, G, F> {
        Hooks {
            on_result: self.on_result,
            notify,
            on_give_up: self.on_give_up,
            fallback: self.fallback,
        }
    }

    #[inline]
    fn with_give_up<G2: Slot<Result<T, E>, GiveUp>>(self, on_give_up: G2) -> Hooks<R, N, G2, F> {
        Hooks {
            on_result: self.on_result,
            notify: self.notify,
            on_give_up,
            fallback: self.fallback,
        }
    }

    #[inline]
    fn with_fallback<F2: Fallback<T, E>>(self, fallback: F2) -> Hooks<R, N, G, F2> {
        Hooks {
            on_result: self.on_result,
            notify: self.notify,
            on_give_up: self.on_give_up,
            fallback,
        }
    }

    #[inline]
    fn timed(&self) -> bool {
        self.notify.is_timed() || self.on_give_up.is_timed() || F::SET
    }

    #[inline]
    fn notifies(&self) -> bool {
        N::SET && self.notify.is_set()
    }

    #[inline]
    fn hears_give_up(&self) -> bool {
        (G::SET && self.on_give_up.is_set()) || F::SET
    }

    #[inline]
    fn judge(&self, value: &T) -> Verdict {
        self.on_result.call(value, &()).unwrap_or(Verdict::Fail)
    }

    #[inline]
    fn notify(&self, outcome: &Result<T, E>, event: &RetryEvent) {
        self.notify.call(outcome, event);
    }

    #[inline]
    fn gave_up(&self, outcome: &Result<T, E>, why: &GiveUp) {
        self.on_give_up.call(outcome, why);
    }

    #[inline]
    fn ready<K: KeySlot>(result: Result<T, E>) -> F::Output<K> {
        F::ready(result)
    }

    #[inline]
    fn fall_back<K: KeySlot>(
        self,
        outcome: Result<T, E>,
        why: GiveUp,
        scope: FallbackScope<K>,
    ) -> F::Output<K> {
        self.fallback.call(outcome, why, scope)
    }
}

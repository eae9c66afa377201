//! The hooks of a function (`on`, `on_result`, `notify`, `on_give_up`): each user-supplied
//! callable as a [`Hook`] in its [`Slot`], the forms `notify` and `on_give_up` accept, and
//! [`Hooks`], which holds them all and the fallback as one type parameter of the loop state.
//!
//! A hook that is not written is the zero-sized [`Unset`] in its slot, so it costs nothing. The
//! builders that fill the slots (in the parent module, beside `start`) store what they are
//! given and do nothing else.

use super::{GiveUp, RetryEvent, Unset};
use crate::Verdict;

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

/// `with_hook!(hooks, notify = value)`: `hooks` with `value` in its `notify` slot and every
/// other slot moved over. The one place, with the struct above, that lists the slots, so that a
/// new hook is a field, a line here and its own builder, and the other builders stay as they
/// are.
///
/// A macro because neither a function nor a struct update can do it: each builder changes the
/// type of one slot (`Unset` to its hook), a struct update that changes a type
/// (`Hooks { notify, ..hooks }`) is not stable Rust (rust-lang/rust#86555), and a function
/// would take every slot, so each builder would name them all again.
macro_rules! with_hook {
    ($hooks:expr, $slot:ident = $value:expr) => {{
        let hooks = $hooks;
        // `slot!(name)`: the new value in the slot being replaced, the old one in the others.
        macro_rules! slot {
            ($slot) => {
                $value
            };
            ($other:ident) => {
                hooks.$other
            };
        }
        Hooks {
            on_result: slot!(on_result),
            notify: slot!(notify),
            on_give_up: slot!(on_give_up),
            fallback: slot!(fallback),
        }
    }};
}
pub(super) use with_hook;

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

//! The option slots of the loop state: what each option stores, and how the loop asks for it.
//!
//! An option that is not written is the zero-sized [`Unset`] in its slot, so it costs nothing.
//! The builders that fill the slots (in the parent module, beside `start`) store what they are
//! given and do nothing else.

use super::RetryEvent;
use crate::context::{self, KeyKind};
use crate::timer::Elapsed;
use crate::{Admission, CircuitBreaker, CircuitOpen, RetryBudget, Verdict};
use std::fmt::Display;
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
/// `on_result = f`: an `Ok` value, and whether it is a failure after all.
pub(super) type OnResult<F, T> = Hook<F, T, (), bool>;
/// `notify = f`: the error and the pause about to be taken.
pub(super) type Notify<F, E> = Hook<F, E, RetryEvent>;
/// `on_give_up = f`: the last error.
pub(super) type OnGiveUp<F, E> = Hook<F, E>;

/// A hook's slot: [`Unset`], or a [`Hook`] that hears `&A` and `&B` and answers `R`.
pub trait Slot<A, B = (), R = ()> {
    /// Whether a hook is there. A constant, so that what only a hook would hear (the
    /// [`RetryEvent`], the elapsed time) is made only when one is.
    const SET: bool;
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

/// The hooks of a function, one [`Slot`] each: one type parameter of [`Retry`](super::Retry) for all of them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Hooks<R = Unset, N = Unset, G = Unset> {
    pub(super) on_result: R,
    pub(super) notify: N,
    pub(super) on_give_up: G,
}

impl<R, N, G> Hooks<R, N, G> {
    /// `true` when `on_result` marks the value as a failure.
    #[inline(always)]
    pub(super) fn rejects<T>(&self, value: &T) -> bool
    where
        R: Slot<T, (), bool>,
    {
        self.on_result.call(value, &()).unwrap_or(false)
    }
}

/// The options that have no hook of their own: `timeout`, `budget`, `breaker` and `nested =
/// retry`, with the breaker's permission for the attempt under way. Present only when one of
/// them is written; otherwise the loop carries [`Unset`] in its place. (The idempotency key is
/// not kept here: each attempt borrows it, see [`KeyParam`].)
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
    /// service; a success or a permanent error (the service answered) counts for it.
    #[inline]
    pub(super) fn record(&mut self, service_failed: bool, clock: fn() -> Instant) {
        if let Some(admission) = self.admission.take() {
            admission.record(!service_failed, clock());
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

/// A parameter that can be the idempotency key: any type that implements [`Display`] and borrows
/// nothing itself (`u64`, `Uuid`, `str`, `String`, [`IdempotencyKey`](crate::IdempotencyKey),
/// ...), by value or behind references, so that the key can be sent as text. The expansion
/// passes the parameter past its references (`&*key` for `key: &str`).
///
/// Each attempt borrows the parameter for `attempt().key()`, which renders it only when the body
/// asks; the attempts themselves neither copy nor render it.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an idempotency key: a key parameter's type must implement `Display`",
    label = "`{Self}` does not implement `Display`",
    note = "every attempt sends the key as text, and `attempt().key()` renders it with `Display`: an order number (`u64`), a `Uuid`, a `&str` or `String` and an `IdempotencyKey` all can be keys",
    note = "implement `std::fmt::Display` for the type (writing the text every attempt sends), or make the key a parameter of its own, like `#[idempotency_key] order_number: u64`"
)]
pub trait KeyParam: Display + 'static {
    /// Which slot of the attempt context the key goes to.
    #[doc(hidden)]
    const KIND: KeyKind;
    /// Runs `f` with the key lent to the attempt context.
    #[doc(hidden)]
    fn lend<R>(&self, f: impl FnOnce() -> R) -> R;
}

impl<K: Display + 'static> KeyParam for K {
    const KIND: KeyKind = KeyKind::Display;
    #[inline]
    fn lend<R>(&self, f: impl FnOnce() -> R) -> R {
        context::lend_key(self, f)
    }
}

#[diagnostic::do_not_recommend]
impl KeyParam for str {
    const KIND: KeyKind = KeyKind::Text;
    #[inline]
    fn lend<R>(&self, f: impl FnOnce() -> R) -> R {
        context::lend_text_key(self, f)
    }
}

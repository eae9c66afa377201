//! The options that have no hook of their own: `timeout`, `budget`, `breaker` and `nested =
//! retry`, kept together in [`Extras`] once one of them is written, and [`Unset`] otherwise.

use super::Unset;
use crate::timer::Elapsed;
use crate::{Admission, CircuitBreaker, CircuitOpen, RetryBudget};
use std::time::{Duration, Instant};

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

/// The breaker's refusal of an attempt, and how to turn it into the function's error; not the
/// error itself: `PERFORMANCE.md` §4.
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

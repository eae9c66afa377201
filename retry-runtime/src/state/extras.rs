//! The options that have no hook of their own: `timeout`, `budget`, `breaker`, `gate`, a
//! decider (`aws2026`, a door's) and `nested = retry`, kept together in [`Extras`] once one of
//! them is written, and [`Unset`] otherwise.

use super::observe::{Event, Sink};
use super::seam::{Decide, Failure, Next, NextCopy};
use super::{Attempted, Unset};
use crate::timer::Elapsed;
use crate::{
    Admission, AdmissionGate, BreakerState, CircuitBreaker, CircuitOpen, GateOutcome, GatePermit,
    GiveUpReason, Rejected, RetryBudget, Verdict,
};
use std::time::{Duration, Instant};

/// The options that have no hook of their own: `timeout`, `budget`, `breaker`, `gate`, a
/// decider and `nested = retry`, with the breaker's and the gate's permissions for the attempt
/// under way. Present only when one of them is written; otherwise the loop carries [`Unset`] in
/// its place.
///
/// `L` is the call's decider and where a lingering call holds its outcome over its last pause
/// ([`Next::Linger`]): [`Unset`] (no decider: the policy decides) unless a decider is given
/// (`aws2026`, a door's), which makes it a [`Deciding`]. Apart, so that a loop without one
/// carries no `T` or `E` in its state and its future is `Send` whatever they are, and so that
/// its decision folds to the policy's (`bench/RESULTS.md` §3, the failure rows).
pub struct Extras<'p, E, L = Unset> {
    /// A per-attempt time limit, and how to turn its expiry into the loop's error.
    pub(crate) timeout: Option<Timeout<E>>,
    pub(crate) budget: Option<&'p RetryBudget>,
    /// The breaker, and how to turn its refusal into the loop's error.
    pub(crate) breaker: Option<Guard<'p, E>>,
    /// The breaker's permission for the attempt under way, recorded when the attempt ends; a
    /// trial dropped unrecorded (a cancelled call) counts as failed, by `Admission`'s own drop.
    pub(crate) admission: Option<Admission<'p>>,
    /// The admission gate, and how to turn its rejection into the loop's error.
    pub(crate) gate: Option<Shedder<'p, E>>,
    /// The gate's permit for the attempt under way (one for a hedged attempt and its copies),
    /// recorded when the attempt ends; dropped unrecorded (a cancelled call), it gives back
    /// what it held, by `GatePermit`'s own drop.
    pub(crate) permit: Option<GatePermit<'p>>,
    /// The decider, and the outcome a lingering call returns once its pause is over: held over
    /// the pause, returned by the next attempt without running the body.
    pub(crate) decider: L,
    /// `nested = retry`: retry even when a layer above does.
    pub(crate) nested_retry: bool,
    /// The door's sink (`Settings::sink`), which hears the loop's own events as [`Event`]s.
    pub(crate) sink: Option<&'p (dyn Sink + Sync)>,
}

/// `timeout = "2s"`: the limit, and how to turn its expiry into the loop's error.
pub struct Timeout<E> {
    pub(crate) limit: Duration,
    pub(crate) error: fn(Elapsed) -> E,
}

/// `breaker = B`: the breaker, and how to turn its refusal into the loop's error.
pub struct Guard<'p, E> {
    pub(crate) breaker: &'p CircuitBreaker,
    pub(crate) error: fn(CircuitOpen) -> E,
}

/// `gate = G`: the admission gate, and how to turn its rejection into the loop's error.
pub struct Shedder<'p, E> {
    pub(crate) gate: &'p AdmissionGate,
    pub(crate) error: fn(Rejected) -> E,
}

impl<E> Timeout<E> {
    /// `limit` per attempt, its expiry made the loop's error by `error`.
    pub(crate) const fn new(limit: Duration, error: fn(Elapsed) -> E) -> Self {
        Timeout { limit, error }
    }
}

impl<'p, E> Guard<'p, E> {
    /// `breaker`, its refusal made the loop's error by `error`.
    pub(crate) const fn new(breaker: &'p CircuitBreaker, error: fn(CircuitOpen) -> E) -> Self {
        Guard { breaker, error }
    }
}

impl<'p, E> Shedder<'p, E> {
    /// `gate`, its rejection made the loop's error by `error`.
    pub(crate) const fn new(gate: &'p AdmissionGate, error: fn(Rejected) -> E) -> Self {
        Shedder { gate, error }
    }
}

/// The breaker's or the gate's refusal of an attempt, and how to turn it into the loop's
/// error; not the error itself: `PERFORMANCE.md` §4.
pub enum Refusal<E> {
    /// The circuit is open.
    Open {
        open: CircuitOpen,
        error: fn(CircuitOpen) -> E,
    },
    /// The admission gate shed the attempt.
    Shed {
        rejected: Rejected,
        error: fn(Rejected) -> E,
    },
    /// The loop had decided to end after a lingering pause: the outcome it held is returned
    /// now ([`Attempted::Ended`]).
    Ended,
}

// By hand: a derive would ask `E: Copy`, and these hold only a function pointer to make an `E`.
macro_rules! copy_for_any_error {
    ($($ty:ty),*) => {$(
        impl<E> Clone for $ty {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<E> Copy for $ty {}
    )*};
}
copy_for_any_error!(Timeout<E>, Guard<'_, E>, Shedder<'_, E>, Refusal<E>);

/// A call's decider `D` (a [`Decide`] of the loop's error, if any), and where the loop holds the
/// outcome of a call that lingers ([`Next::Linger`]) over its last pause. The outcome is boxed:
/// one word in the state for a path that only a lingering call takes.
pub struct Deciding<D, T, E> {
    decider: Option<D>,
    held: Option<Box<Result<T, E>>>,
    /// The decider sent the first attempt again ([`Next::Resend`]).
    resent: bool,
}

impl<'p, E, L> Extras<'p, E, L> {
    /// The same extras, with the decider `decider` (and room for a lingering call's outcome).
    pub(crate) fn deciding<D, T>(self, decider: Option<D>) -> Extras<'p, E, Deciding<D, T, E>> {
        Extras {
            timeout: self.timeout,
            budget: self.budget,
            breaker: self.breaker,
            admission: self.admission,
            gate: self.gate,
            permit: self.permit,
            decider: Deciding {
                decider,
                held: None,
                resent: false,
            },
            nested_retry: self.nested_retry,
            sink: self.sink,
        }
    }
}

impl<E, L> Extras<'_, E, L> {
    /// None of `timeout`, `budget`, `breaker`, `gate` and `nested = retry` is set: a
    /// [`Retrier`](crate::Retrier)'s loop may carry [`Unset`] in their place.
    pub(crate) fn is_empty(&self) -> bool {
        self.timeout.is_none()
            && self.budget.is_none()
            && self.breaker.is_none()
            && self.gate.is_none()
            && !self.nested_retry
    }
}

impl<E> Default for Extras<'_, E> {
    fn default() -> Self {
        Extras {
            timeout: None,
            budget: None,
            breaker: None,
            admission: None,
            gate: None,
            permit: None,
            decider: Unset,
            nested_retry: false,
            sink: None,
        }
    }
}

/// [`Unset`] or [`Extras`]: the loop asks for the extras through this, so an unset one answers
/// at compile time and costs nothing. Sealed: public only because the builders' result types
/// name its `Hold`, in a module no one outside can reach. The provided methods answer as
/// [`Unset`] does, without extras.
pub trait MaybeExtras<E> {
    /// [`NoRefusal`] without extras: such an attempt cannot be refused, so its future has no
    /// room for a refusal. [`Refusal`] with them.
    type Refusal: Into<Refusal<E>> + Copy;
    /// The breaker's permission for one attempt: an [`Admission`], or nothing without extras.
    type Admission;
    /// The decider slot ([`Unset`] or a [`Deciding`]): kept by every builder but `aws2026`,
    /// which fills it.
    type Hold;
    /// The extras, made if none were yet: what the builders of `timeout`, `budget`, `breaker`,
    /// `gate`, `aws2026` and `nested = retry` start from.
    fn into_extras<'p>(self) -> Extras<'p, E, Self::Hold>
    where
        Self: 'p;
    /// Asks the gate, if any, then the breaker, if any, to let the next attempt through: the
    /// time to wait before making it (a rate-limiting gate's token not yet due; zero
    /// otherwise), or the refusal. A hedge's copies ask the breaker only: the attempt holds one
    /// gate permit for all of them.
    fn admit(&mut self, _clock: fn() -> Instant) -> Result<Duration, Self::Refusal> {
        Ok(Duration::ZERO)
    }
    /// Tells the breaker, if any, how the attempt went: a transient failure counts against the
    /// service; a success or a permanent error (the service answered) counts for it; and the
    /// gate, if any, `gate`. `true` when the circuit is open after it, by this outcome or by
    /// others'.
    fn record(&mut self, _failed: bool, _gate: GateOutcome, _clock: fn() -> Instant) -> bool {
        false
    }
    /// Tells the breaker how the attempt that held `admission` went (a hedge's copy).
    fn record_admission(admission: Self::Admission, success: bool, now: Instant);
    /// The breaker's permission for the attempt under way, taken (a hedge holds its own).
    fn take_admission(&mut self) -> Option<Self::Admission> {
        None
    }
    /// The permission of the copy that won a hedged attempt, put back for `next` to record.
    fn put_admission(&mut self, _admission: Option<Self::Admission>) {}
    /// The budget, if any.
    fn budget(&self) -> Option<&RetryBudget> {
        None
    }
    /// The timeout, if any.
    fn timeout(&self) -> Option<Timeout<E>> {
        None
    }
    /// `nested = retry`.
    fn nested_retry(&self) -> bool {
        false
    }
    /// Why the loop gives up on an attempt its gate shed: the gate's name and mode, as its
    /// [`Rejected`] says them. Asked only after [`Attempted::Shed`], which only a gate makes.
    fn shed_reason(&self) -> GiveUpReason {
        // Never asked: without a gate, no attempt is shed.
        GiveUpReason::BreakerOpen
    }
    /// Hands one of the loop's own events to the door's sink (`Settings::sink`), if any:
    /// nothing without extras, or without a sink. The logs and the metrics hear the loop's
    /// events from `observe` itself, so the event goes to the door's sink alone.
    fn report(&self, _function: &'static str, _event: Event<'_>) {}
    /// The door's sink (`Settings::sink`), if any: where a hook's contained panic is counted.
    fn sink(&self) -> Option<&(dyn Sink + Sync)> {
        None
    }
}

/// The call's decider, if the extras hold one ([`Deciding`]), and where a lingering call holds
/// its outcome over its last pause ([`Next::Linger`]). The defaults are the answers without a
/// decider (the policy decides): [`Unset`] and the extras without a decider take them, and a
/// loop without a decider has no code for one (`bench/RESULTS.md` §3).
///
/// Apart from [`MaybeExtras`], whose associated types the attempts' futures name: a trait over
/// `T` there made rustc's `Send` check of a future that holds an attempt with a borrowed `T`
/// (`Result<&str, E>`) fail with "implementation is not general enough".
pub(crate) trait Linger<T, E>: MaybeExtras<E> {
    /// Whether a decider may be set: a constant, tested before [`decides`](Linger::decides), so
    /// that without a decider slot no code for one is left.
    const DECIDES: bool = false;
    /// A decider is set: the loop asks it after a failure, in place of the policy.
    fn decides(&self) -> bool {
        false
    }
    /// What follows attempt `attempt`'s failure by the decider (its [`Decide::next`], asked with
    /// the [`Failure`] made of these), or `None` without one: the policy decides. While the
    /// breaker is open the decider is not asked: a failure worth retrying gives up, another is
    /// returned. `timing`: the pause before the attempt (nanoseconds), when the call started,
    /// and the clock. By value, and a call even without a decider: `PERFORMANCE.md` §2.
    #[inline]
    fn next(
        &mut self,
        _attempt: u32,
        _verdict: Verdict,
        _error: Option<&E>,
        _breaker_open: bool,
        _timing: (u64, Option<Instant>, fn() -> Instant),
    ) -> Option<Next> {
        None
    }
    /// The decider's [`Decide::copy_failed`], if one is set.
    fn copy_failed(&mut self, _failure: &Failure<'_, E>) -> NextCopy {
        NextCopy::OnSchedule
    }
    /// The decider's [`Decide::copy_due`], if one is set (`true` without one).
    fn copy_due(&mut self, _hedge: u16) -> bool {
        true
    }
    /// The call ended with an accepted `Ok` after `attempts` attempts: the decider's
    /// [`Decide::accepted`], if one is set.
    fn accepted(&mut self, _attempts: u32) {}
    /// The refusal of an attempt that only returns the outcome held over a pause, if one is.
    fn ended(&self) -> Option<Self::Refusal> {
        None
    }
    /// Holds `outcome` over the pause, for the next attempt to return. Asked only of a loop
    /// that [`DECIDES`](Linger::DECIDES): without a decider slot, a call never lingers.
    fn hold(&mut self, outcome: Result<T, E>) {
        drop(outcome);
    }
    /// The outcome held over a pause, taken.
    fn take_held(&mut self) -> Option<Result<T, E>> {
        None
    }
    /// The decider sent the first attempt again ([`Next::Resend`]), so that the attempt sent
    /// again does not begin the call a second time (the budget's deposit).
    fn resent(&self) -> bool {
        false
    }
    /// The decider sends the first attempt again.
    fn mark_resent(&mut self) {}
}

impl<T, E> Linger<T, E> for Unset {}

impl<T, E> Linger<T, E> for Extras<'_, E> {}

impl<T, E, D: Decide<E>> Linger<T, E> for Extras<'_, E, Deciding<D, T, E>> {
    const DECIDES: bool = true;
    fn decides(&self) -> bool {
        self.decider.decider.is_some()
    }
    #[inline]
    fn next(
        &mut self,
        attempt: u32,
        verdict: Verdict,
        error: Option<&E>,
        breaker_open: bool,
        (previous_pause, started, clock): (u64, Option<Instant>, fn() -> Instant),
    ) -> Option<Next> {
        let decider = self.decider.decider.as_mut()?;
        if breaker_open {
            return Some(if verdict.is_retry() {
                Next::GiveUp(GiveUpReason::BreakerOpen)
            } else {
                Next::Return
            });
        }
        let elapsed = started.map_or(Duration::ZERO, |t| clock().saturating_duration_since(t));
        Some(decider.next(&Failure {
            attempt,
            copy: 0,
            verdict,
            error,
            previous_pause: Duration::from_nanos(previous_pause),
            elapsed,
        }))
    }
    fn copy_failed(&mut self, failure: &Failure<'_, E>) -> NextCopy {
        let decider = self.decider.decider.as_mut();
        decider.map_or(NextCopy::OnSchedule, |d| d.copy_failed(failure))
    }
    fn copy_due(&mut self, hedge: u16) -> bool {
        self.decider
            .decider
            .as_mut()
            .is_none_or(|d| d.copy_due(hedge))
    }
    fn accepted(&mut self, attempts: u32) {
        if let Some(decider) = &mut self.decider.decider {
            decider.accepted(attempts);
        }
    }
    fn ended(&self) -> Option<Refusal<E>> {
        self.decider.held.is_some().then_some(Refusal::Ended)
    }
    fn resent(&self) -> bool {
        self.decider.resent
    }
    fn mark_resent(&mut self) {
        self.decider.resent = true;
    }
    fn hold(&mut self, outcome: Result<T, E>) {
        self.decider.held = Some(Box::new(outcome));
    }
    fn take_held(&mut self) -> Option<Result<T, E>> {
        self.decider.held.take().map(|held| *held)
    }
}

impl<E> MaybeExtras<E> for Unset {
    type Refusal = NoRefusal;
    type Admission = NoRefusal;
    type Hold = Unset;
    fn into_extras<'p>(self) -> Extras<'p, E> {
        Extras::default()
    }
    fn record_admission(admission: NoRefusal, _: bool, _: Instant) {
        match admission {}
    }
}

impl<'p, E, L> MaybeExtras<E> for Extras<'p, E, L> {
    type Refusal = Refusal<E>;
    type Admission = Admission<'p>;
    type Hold = L;
    fn into_extras<'a>(self) -> Extras<'a, E, L>
    where
        Self: 'a,
    {
        self
    }
    #[inline]
    fn admit(&mut self, clock: fn() -> Instant) -> Result<Duration, Refusal<E>> {
        // The gate first: a permit dropped because the breaker then refuses gives back what it
        // held and counts as nothing, where a breaker's trial dropped would count as a failure.
        let mut wait = Duration::ZERO;
        if let (Some(shedder), None) = (self.gate, &self.permit) {
            match shedder.gate.admit_lazily(clock) {
                Ok(permit) => {
                    wait = permit.wait();
                    self.permit = Some(permit);
                }
                Err(rejected) => {
                    return Err(Refusal::Shed {
                        rejected,
                        error: shedder.error,
                    });
                }
            }
        }
        let Some(guard) = self.breaker else {
            return Ok(wait);
        };
        match guard.breaker.admit(clock()) {
            Ok(admission) => {
                self.admission = Some(admission);
                Ok(wait)
            }
            Err(open) => {
                self.permit = None;
                Err(Refusal::Open {
                    open,
                    error: guard.error,
                })
            }
        }
    }
    #[inline]
    fn record(&mut self, service_failed: bool, gate: GateOutcome, clock: fn() -> Instant) -> bool {
        if let Some(permit) = self.permit.take() {
            permit.record_by(gate, clock);
        }
        match self.admission.take() {
            Some(admission) => admission.record_and_check(!service_failed, clock()),
            // With a breaker, a hedged attempt whose last copy's failure was recorded as it
            // failed, and whose next copy the breaker refused: whether it is open now.
            None => self.breaker.as_ref().is_some_and(|guard| {
                matches!(guard.breaker.state(clock()), BreakerState::Open { .. })
            }),
        }
    }
    fn record_admission(admission: Admission<'p>, success: bool, now: Instant) {
        admission.record(success, now);
    }
    fn take_admission(&mut self) -> Option<Admission<'p>> {
        self.admission.take()
    }
    fn put_admission(&mut self, admission: Option<Admission<'p>>) {
        self.admission = admission;
    }
    fn budget(&self) -> Option<&RetryBudget> {
        self.budget
    }
    fn timeout(&self) -> Option<Timeout<E>> {
        self.timeout
    }
    fn nested_retry(&self) -> bool {
        self.nested_retry
    }
    #[inline]
    fn shed_reason(&self) -> GiveUpReason {
        match self.gate {
            Some(shedder) => GiveUpReason::GateRejected {
                gate: shedder.gate.get_name(),
                mode: shedder.gate.mode(),
            },
            // Never asked: without a gate, no attempt is shed.
            None => GiveUpReason::BreakerOpen,
        }
    }
    fn report(&self, function: &'static str, event: Event<'_>) {
        if let Some(sink) = self.sink {
            sink.event(function, &event);
        }
    }
    fn sink(&self) -> Option<&(dyn Sink + Sync)> {
        self.sink
    }
}

/// The refusal of a loop without a breaker: there is none.
#[derive(Clone, Copy, Debug)]
pub enum NoRefusal {}

impl<E> From<NoRefusal> for Refusal<E> {
    fn from(never: NoRefusal) -> Self {
        match never {}
    }
}

impl<E> Refusal<E> {
    /// The refusal as what happened to the attempt: the loop's error, and why.
    #[inline]
    pub(crate) fn into_attempted<T>(self) -> Attempted<T, E> {
        match self {
            Refusal::Open { open, error } => Attempted::Refused(error(open)),
            Refusal::Shed { rejected, error } => Attempted::Shed(error(rejected)),
            Refusal::Ended => Attempted::Ended,
        }
    }
}

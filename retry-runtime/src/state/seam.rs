//! The decision seam: what follows an attempt that did not end in an accepted answer, asked of
//! a call's decider ([`Decide`]) when it has one, and of its [`Policy`](crate::Policy)
//! otherwise. Public in [`engine`](crate::engine).

use super::GiveUpReason;
use crate::Verdict;
use std::time::Duration;

/// What follows an attempt that did not end in an accepted answer: the decision seam.
///
/// A call without a decider decides by its [`Policy`](crate::Policy) (`max`, the pauses, the
/// jitter), compiled in with no `dyn`; `aws2026` and a door's own retry rules (gRPC's retry
/// and hedging policies) are deciders, handed to the engine per call with
/// [`DynHooks::decide`](crate::engine::DynHooks::decide). A decider replaces the policy's `max`
/// and pauses; the policy's deadline still holds.
///
/// The budget, the breaker, the gate, the deadline, the timeout, the events, the hooks and the
/// fallback stay the engine's: a [`Next::Retry`] is still refused by an empty budget (which it
/// draws a token from, as any retry) or by a pause that would end past the deadline, and the
/// next attempt by an open breaker or the gate. While the breaker is open after an attempt, the
/// decider is not asked (no retry could be admitted): a failure worth retrying gives up
/// ([`GiveUpReason::BreakerOpen`]), another is returned.
///
/// A decider is per call: it may keep what it learns from one attempt for the next (the cost
/// of the last retry, a count of its own).
pub trait Decide<E> {
    /// After the attempt `failure.attempt` failed (not an accepted answer): retry after a
    /// pause, return the failure as the answer, give up (and why), or pause and give up.
    fn next(&mut self, failure: &Failure<'_, E>) -> Next;

    /// The call ended with an `Ok` the door accepted, after `attempts` attempts (1: the first
    /// one): a quota gives back its cost here. Not called when the call ends with an error
    /// (returned, or given up on).
    fn accepted(&mut self, attempts: u32) {
        let _ = attempts;
    }

    /// Hedging ([`drive_hedged`](crate::engine::drive_hedged)): copy `failure.copy` of the
    /// attempt `failure.attempt` failed with a verdict worth retrying: when the next copy goes.
    /// The default keeps the hedge's schedule.
    ///
    /// Asked once for every copy that fails so, the last one of the attempt included, whether
    /// or not other copies still run. When the failed copy was the only one running,
    /// [`NextCopy::Now`] and [`NextCopy::After`] start the next copy (if `max_hedges` allows it
    /// and the breaker and the budget admit it, as any copy) instead of ending the attempt; the
    /// attempt ends with that failure when no copy runs and none will come
    /// ([`NextCopy::OnSchedule`] or [`NextCopy::Never`] with nothing running, every copy
    /// started, or the next one refused). [`NextCopy::Resend`] starts the failed copy itself
    /// again instead (whether or not others run). [`next`](Decide::next) then judges the
    /// attempt by the failure that ended it, as always.
    fn copy_failed(&mut self, failure: &Failure<'_, E>) -> NextCopy {
        let _ = failure;
        NextCopy::OnSchedule
    }

    /// Hedging: copy `hedge` (1 for the first copy beside the attempt) of the attempt is due
    /// because its timer fired (the hedge's schedule, or a [`NextCopy::After`]): whether it may
    /// go. Asked before the breaker and the budget; not asked after [`NextCopy::Now`]. `false`:
    /// no more copies for this attempt (a throttle that stops hedges, a request that can no
    /// longer be sent again). The default lets every copy go.
    fn copy_due(&mut self, hedge: u16) -> bool {
        let _ = hedge;
        true
    }
}

/// The attempt that failed, as a decider sees it.
#[non_exhaustive]
#[derive(Debug)]
pub struct Failure<'x, E> {
    /// The attempt that failed: 1 is the first call.
    pub attempt: u32,
    /// In [`Decide::copy_failed`], the copy that failed: 0 for the attempt itself, `k` for its
    /// `k`-th hedged copy. Always 0 in [`Decide::next`], which judges the attempt as a whole
    /// (a hedged attempt by the answer that ended it).
    pub copy: u16,
    /// The classifier's verdict on the error (a timed-out attempt's included), or `on_result`'s
    /// on an `Ok` it rejected.
    pub verdict: Verdict,
    /// The error: a timed-out attempt's is the door's error made from
    /// [`Elapsed`](crate::Elapsed). `None` only when `on_result` rejected an `Ok` value (which
    /// the call returns if it stops there).
    pub error: Option<&'x E>,
    /// The pause taken before this attempt (zero before the first): for a decorrelated jitter.
    pub previous_pause: Duration,
    /// The time since the call's first attempt started, on the loop's clock (the clock of the
    /// pauses: tokio's, which a paused test clock governs, in [`drive`](crate::engine::drive)).
    pub elapsed: Duration,
}

// By hand: a derive would ask `E: Clone`, and this holds a reference.
impl<E> Clone for Failure<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<E> Copy for Failure<'_, E> {}

impl<'x, E> Failure<'x, E> {
    /// The failure of attempt `attempt` (copy 0) with `verdict` and `error`, nothing paused
    /// before it and nothing elapsed: for a decider's own tests.
    pub fn new(attempt: u32, verdict: Verdict, error: Option<&'x E>) -> Self {
        Failure {
            attempt,
            copy: 0,
            verdict,
            error,
            previous_pause: Duration::ZERO,
            elapsed: Duration::ZERO,
        }
    }
}

/// What follows a failed attempt ([`Decide::next`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Another attempt after this pause: still refused by the budget, the deadline, the
    /// breaker and the gate, as any retry.
    Retry(Duration),
    /// The failure is the answer: return it as it is (a permanent error). Logged only if the
    /// call retried before it; no `on_give_up`, no fallback.
    Return,
    /// Stop retrying a failure that could have been retried, for this reason: `on_give_up` and
    /// the fallback hear it.
    GiveUp(GiveUpReason),
    /// Pause this long, then give up as the quota's refusal ([`GiveUpReason::Budget`]) without
    /// another attempt: the failure is held over the pause and returned after it (`aws2026`'s
    /// long polling). A pause that would end past the deadline gives up at once.
    Linger(Duration),
    /// Run the same attempt again after this pause, as if it had not been made: a request that
    /// provably never reached its server's application (gRPC's transparent retry, a wait for
    /// a connection). Not a retry: the attempt keeps its number ([`Failure::attempt`],
    /// [`attempt().number()`](crate::attempt)), the loop's retries do not grow, no budget
    /// token is drawn, and neither [`Event::Retry`](crate::engine::Event::Retry) nor the retry
    /// hooks hear of it; it is reported as
    /// [`Event::TransparentRetry`](crate::engine::Event::TransparentRetry) (logs, metrics,
    /// sink). Still the engine's: a pause that would end past the policy's deadline gives up
    /// ([`GiveUpReason::Deadline`]) at once, the call's cancellation ends the pause, the
    /// breaker heard the failed attempt as any failure, and the attempt sent again asks the
    /// breaker and the gate as any attempt. A zero pause is not slept.
    Resend(Duration),
}

/// When the next hedged copy goes after a copy failed ([`Decide::copy_failed`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextCopy {
    /// As the [`Hedge`](crate::Hedge)'s schedule says: no change.
    OnSchedule,
    /// The next copy starts at once; the copies after it follow one
    /// [`Hedge`](crate::Hedge) delay apart from then.
    Now,
    /// The next copy starts after this long, from now, in place of the schedule's timer; the
    /// copies after it follow one [`Hedge`](crate::Hedge) delay apart from then. With no copy
    /// running, a pause that would end past the policy's deadline is not waited for: the
    /// attempt ends with this failure at once, as [`Never`](NextCopy::Never) would end it.
    After(Duration),
    /// No more copies for this attempt.
    Never,
    /// Start the copy that failed again after this pause, as if it had not been sent: a
    /// request that provably never reached its server's application (gRPC's transparent retry
    /// of a hedged copy). The copy keeps its hedge number ([`Failure::copy`],
    /// [`attempt().hedge()`](crate::attempt)) and the attempt its number; it is not a new copy
    /// (no [`Event::HedgedCopy`](crate::engine::Event::HedgedCopy), `max_hedges` and the
    /// schedule unchanged) and draws no budget token. Reported as
    /// [`Event::TransparentRetry`](crate::engine::Event::TransparentRetry) with the attempt's
    /// number (logs, metrics, sink). Still the engine's: a pause that would end past the
    /// policy's deadline is not waited for (the copy stays failed, as with
    /// [`OnSchedule`](NextCopy::OnSchedule)), the pause ends with the attempt (a winner, the
    /// call's cancellation), the breaker heard the failed copy, and the copy sent again asks
    /// the breaker as any copy (refused: it stays failed). A zero pause is not slept.
    Resend(Duration),
}

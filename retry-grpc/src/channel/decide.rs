//! The door's deciders, handed to the engine through its seam
//! ([`Decide`](retry_runtime::engine::Decide)): A6's retry policy ([`RetryCall`]), its
//! hedging policy ([`HedgingCall`]), and the transparent retries alone of a call without a
//! policy ([`Transparently`]). Each is made per call and owned by it (`&mut self`, no
//! lock); the engine keeps the loop, the pauses, the budget, the breaker and the events.

use super::BoxError;
use super::attempt::{Failed, Request0, Transparent};
use crate::{AttemptStatus, Decision, HedgingCall, RetryCall, Stop, Unsent};
use retry_runtime::engine::{Decide, Event, Failure as Failed_, Next, NextCopy};
use retry_runtime::{CircuitOpen, Elapsed, GiveUpReason, Verdict};
use std::fmt;

/// An attempt that failed, as the engine's loop holds it: a status (with what the caller gets
/// if it is the last), or the loop's own errors.
pub(super) enum Failure<RB> {
    Status(AttemptStatus, Failed<RB>),
    /// An attempt that never reached the server's application: sent again by the engine
    /// ([`Next::Resend`]) while A6 allows it; otherwise a failure with its status, as `Status`.
    Unsent(Unsent, AttemptStatus, BoxError),
    Elapsed(Elapsed),
    Open(CircuitOpen),
}

impl<RB> fmt::Debug for Failure<RB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Status(status, Failed::Answer(_)) => write!(f, "{:?} (answer)", status.code),
            Failure::Status(status, Failed::Error(error)) => {
                write!(f, "{:?} ({error})", status.code)
            }
            Failure::Unsent(unsent, status, error) => {
                write!(f, "{:?} ({unsent:?}: {error})", status.code)
            }
            Failure::Elapsed(elapsed) => elapsed.fmt(f),
            Failure::Open(open) => open.fmt(f),
        }
    }
}

impl<RB> From<Elapsed> for Failure<RB> {
    fn from(elapsed: Elapsed) -> Self {
        Failure::Elapsed(elapsed)
    }
}

impl<RB> From<CircuitOpen> for Failure<RB> {
    fn from(open: CircuitOpen) -> Self {
        Failure::Open(open)
    }
}

/// The classifier of both policies: what kind of failure an attempt is. A status whose code is
/// in `codes` (`retryableStatusCodes`, `nonFatalStatusCodes`) may be worth another attempt (the
/// decider says whether, and when); any other status is the call's answer (for hedging it ends
/// the call and cancels the other copies), and so are the loop's own errors. The decider sees
/// them all (a pushback that says stop counts against A6's throttle, whatever the code).
pub(super) fn kind<RB>(failure: &Failure<RB>, codes: crate::CodeSet) -> Verdict {
    match failure {
        Failure::Status(status, _) | Failure::Unsent(_, status, _) => {
            Verdict::from(codes.contains(status.code))
        }
        Failure::Elapsed(_) | Failure::Open(_) => Verdict::Fail,
    }
}

/// The classifier of a hedging policy: as [`kind`], except that a copy that never reached the
/// server's application is worth another send whatever its code: [`Hedging`] sends it again
/// ([`NextCopy::Resend`]) while A6 allows it, and otherwise reads its status as any copy's. It
/// carries no answer of the server's, so unlike a fatal status it does not end the copies
/// still running.
pub(super) fn hedged_kind<RB>(failure: &Failure<RB>, codes: crate::CodeSet) -> Verdict {
    match failure {
        Failure::Unsent(..) => Verdict::Retry,
        failure => kind(failure, codes),
    }
}

/// The decider of a call without a policy: [`Transparent`]'s resends ([`Next::Resend`]); any
/// other failure is the answer.
pub(super) struct Transparently<'r>(pub(super) Transparent<'r>);

impl<RB> Decide<Failure<RB>> for Transparently<'_> {
    fn next(&mut self, failure: &Failed_<'_, Failure<RB>>) -> Next {
        match failure.error {
            Some(Failure::Unsent(unsent, ..)) => {
                self.0.resend(*unsent).map_or(Next::Return, Next::Resend)
            }
            _ => Next::Return,
        }
    }
}

/// The decider of a call under a `retryPolicy`: an attempt that never reached the server's
/// application is sent again as [`Transparent`] allows ([`Next::Resend`]: not a retry);
/// otherwise [`RetryCall`], A6's order (retryable codes, throttle, commit, `maxAttempts`,
/// pushback, backoff), whose pause the engine takes as it is.
pub(super) struct Retrying<'r> {
    pub(super) call: RetryCall,
    pub(super) request: &'r Request0<'r>,
    pub(super) transparent: Transparent<'r>,
}

impl<RB> Decide<Failure<RB>> for Retrying<'_> {
    fn next(&mut self, failure: &Failed_<'_, Failure<RB>>) -> Next {
        let status = match failure.error {
            Some(Failure::Status(status, _)) => status,
            Some(Failure::Unsent(unsent, status, _)) => {
                if let Some(pause) = self.transparent.resend(*unsent) {
                    return Next::Resend(pause);
                }
                status
            }
            _ => return Next::Return,
        };
        self.transparent.attempt_ended();
        // A request that outgrew the replay buffer cannot be sent again: the call committed.
        if self.request.body.outgrew() {
            self.call.commit();
        }
        match self.call.on_status(status.code, status.pushback) {
            Decision::Retry { pause, .. } => Next::Retry(pause),
            Decision::Stop(Stop::Throttled) => {
                self.request.report(Event::Throttled);
                // A6's throttle is a retry budget of its server's.
                Next::GiveUp(GiveUpReason::Budget)
            }
            Decision::Stop(Stop::AttemptsExhausted) => Next::GiveUp(GiveUpReason::Exhausted),
            Decision::Stop(_) => Next::Return,
        }
    }
}

/// The decider of a call under a `hedgingPolicy`: [`HedgingCall`]. The copies are A6's
/// attempts, so the hedged attempt is never retried as a whole: when every copy failed, the
/// last failure is the call's. A copy that never reached the server's application is sent
/// again as [`Transparent`] allows ([`NextCopy::Resend`]: the same copy, the same
/// `grpc-previous-rpc-attempts`, not a new copy).
pub(super) struct Hedging<'r> {
    pub(super) call: HedgingCall,
    pub(super) request: &'r Request0<'r>,
    pub(super) transparent: Transparent<'r>,
}

impl Hedging<'_> {
    /// Whether another copy may go: the throttle allows it and the request can still be sent.
    fn may_send(&self) -> bool {
        !self.request.body.outgrew() && self.call.may_send()
    }
}

impl<RB> Decide<Failure<RB>> for Hedging<'_> {
    fn next(&mut self, failure: &Failed_<'_, Failure<RB>>) -> Next {
        // A status that ended the call (which no `copy_failed` saw) still counts: `OK` gives
        // `tokenRatio`, a pushback that says stop takes a token; a copy worth retrying was
        // counted when it failed.
        if let (Verdict::Fail, Some(Failure::Status(status, _))) = (failure.verdict, failure.error)
        {
            self.call.on_status(status.code, status.pushback);
        }
        Next::Return
    }

    fn copy_failed(&mut self, failure: &Failed_<'_, Failure<RB>>) -> NextCopy {
        let status = match failure.error {
            Some(Failure::Status(status, _)) => status,
            Some(Failure::Unsent(unsent, status, _)) => {
                if let Some(pause) = self.transparent.resend(*unsent) {
                    return NextCopy::Resend(pause);
                }
                status
            }
            _ => return NextCopy::Never,
        };
        let throttled = self.call.is_throttled();
        let next = self.call.on_status(status.code, status.pushback);
        if self.call.is_throttled() && !throttled {
            self.request.report(Event::Throttled);
        }
        if self.may_send() {
            next
        } else {
            NextCopy::Never
        }
    }

    fn copy_due(&mut self, _: u16) -> bool {
        // A6: a hedged copy goes only while the throttle allows it and the request can still
        // be replayed; otherwise no more copies for this call.
        self.may_send()
    }
}

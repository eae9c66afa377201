//! `aws2026` as a decider: one call's state under an [`Aws2026Standard`], asked by the loop
//! through the decision seam ([`Decide`]) like any door's decider. Written on the seam's public
//! face and `Aws2026Standard`'s own, so that it moves with `aws2026` wherever that goes.

use super::{Aws2026Decision, Aws2026Standard};
use crate::GiveUpReason;
use crate::engine::{Decide, Failure, Next};

/// One call under the AWS SDKs' updated standard mode: its decision after each failure, and the
/// cost of its last retry, which the quota gets back if the call succeeds.
#[derive(Clone, Copy, Debug)]
pub struct Aws2026Call<'a> {
    standard: &'a Aws2026Standard,
    /// The tokens the last retry took from the quota, if the last decision was a retry.
    cost: Option<u32>,
}

impl<'a> Aws2026Call<'a> {
    /// A call under `standard`, nothing taken from its quota yet.
    pub fn new(standard: &'a Aws2026Standard) -> Self {
        Aws2026Call {
            standard,
            cost: None,
        }
    }
}

impl<E> Decide<E> for Aws2026Call<'_> {
    /// The standard mode's decision on a failure worth retrying: a retry after its pause (its
    /// cost taken from the quota), no more attempts, or the quota's refusal, which a
    /// long-polling call takes after a pause. A failure not worth retrying is the answer.
    fn next(&mut self, failure: &Failure<'_, E>) -> Next {
        if !failure.verdict.is_retry() {
            return Next::Return;
        }
        self.cost = None;
        match self.standard.decide(failure.attempt, failure.verdict) {
            Aws2026Decision::Retry { delay, cost } => {
                self.cost = Some(cost);
                Next::Retry(delay)
            }
            Aws2026Decision::MaxAttempts => Next::GiveUp(GiveUpReason::Exhausted),
            Aws2026Decision::QuotaExhausted { pause: Some(pause) } => Next::Linger(pause),
            _ => Next::GiveUp(GiveUpReason::Budget),
        }
    }

    /// The quota gets back the last retry's cost only (earlier retries of the call are not
    /// given back), or its no-retry increment for a first try.
    fn accepted(&mut self, attempts: u32) {
        let last = if attempts <= 1 { None } else { self.cost };
        self.standard.quota().refund(last);
    }
}

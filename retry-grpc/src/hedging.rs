//! The hedging schedule of one call under a `hedgingPolicy` (gRFC A6, "Hedging Policy"), as a
//! pure state machine: the door feeds it the clock and the copies' outcomes, and does what it
//! answers (send a copy, cancel copies, finish).
//!
//! - Copy 1 is sent at once; copy `k` after another `hedgingDelay` without an answer, up to
//!   `maxAttempts` copies.
//! - A **non-fatal** status (in `nonFatalStatusCodes`) sends the next copy **at once**; the
//!   ones after it follow `hedgingDelay` apart again from then.
//! - Any other status, `OK` included, ends the call with it and cancels every other copy; so
//!   does a copy that **commits** (its headers or a message arrived).
//! - Pushback: "do not retry" sends no more copies; a pause of `n` ms sends the next copy `n` ms
//!   after this status (and the ones after it `hedgingDelay` apart from then).
//! - Throttling: each non-fatal failure takes a token and a success gives `tokenRatio`; a copy
//!   after the first is sent only while the count is above half of `maxTokens`.
//! - When every copy sent has failed and no more will be sent, the call ends with the last
//!   failure.
//!
//! Copy `k` carries `grpc-previous-rpc-attempts: k − 1`.
//!
//! C-core, and so `grpcio`, does not implement hedging (it reads `hedgingPolicy` and ignores it;
//! grpc/proposal#287), so this schedule is checked against A6's text and grpc-java's
//! `RetriableStream`, not against a measurement.

use crate::{HedgingPolicy, Pushback, RetryThrottle};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

/// What the door does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HedgeAction {
    /// Send copy `copy` (from 1), with `grpc-previous-rpc-attempts: previous_attempts` when it
    /// is not `None`.
    Send {
        /// The copy's number.
        copy: u32,
        /// `copy − 1`, or `None` for the first copy.
        previous_attempts: Option<u32>,
    },
    /// Cancel these copies (in flight).
    Cancel(Vec<u32>),
    /// The call ends with this copy's answer.
    Finish {
        /// The copy whose answer is the call's.
        copy: u32,
        /// Its status code.
        code: Code,
    },
}

/// The hedging state of one call.
///
/// ```
/// use retry_grpc::{HedgeAction, HedgingCall, HedgingPolicy, Pushback};
/// use std::time::Duration;
/// use tonic::Code;
///
/// let policy = HedgingPolicy::builder()
///     .max_attempts(3)
///     .hedging_delay(Duration::from_millis(100))
///     .non_fatal_status_codes([Code::Unavailable])
///     .build()?;
/// let ms = Duration::from_millis;
/// let mut call = HedgingCall::new(&policy, None);
/// assert_eq!(call.start(), [HedgeAction::Send { copy: 1, previous_attempts: None }]);
/// assert_eq!(call.next_copy_at(), Some(ms(100)));
/// assert_eq!(call.on_timer(ms(100)), [HedgeAction::Send { copy: 2, previous_attempts: Some(1) }]);
/// // Copy 1 fails with a non-fatal code: copy 3 goes at once, not at 200 ms.
/// assert_eq!(
///     call.on_status(ms(150), 1, Code::Unavailable, Pushback::Absent),
///     [HedgeAction::Send { copy: 3, previous_attempts: Some(2) }]
/// );
/// // Copy 2 succeeds: copy 3 is cancelled, the call ends with copy 2's answer.
/// assert_eq!(
///     call.on_status(ms(170), 2, Code::Ok, Pushback::Absent),
///     [HedgeAction::Cancel(vec![3]), HedgeAction::Finish { copy: 2, code: Code::Ok }]
/// );
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct HedgingCall {
    policy: HedgingPolicy,
    throttle: Option<Arc<RetryThrottle>>,
    sent: u32,
    outstanding: Vec<u32>,
    next_at: Option<Duration>,
    no_more_copies: bool,
    finished: bool,
}

impl HedgingCall {
    /// A call about to start; `throttle`: its server's, if the config has `retryThrottling`.
    pub fn new(policy: &HedgingPolicy, throttle: Option<Arc<RetryThrottle>>) -> Self {
        HedgingCall {
            policy: policy.clone(),
            throttle,
            sent: 0,
            outstanding: Vec::new(),
            next_at: None,
            no_more_copies: false,
            finished: false,
        }
    }

    /// Sends the first copy (at time 0 of the call).
    pub fn start(&mut self) -> Vec<HedgeAction> {
        if self.sent > 0 || self.finished {
            return Vec::new();
        }
        self.send(Duration::ZERO).into_iter().collect()
    }

    /// When the next copy is due, in time since the call started; `None`: no more copies will
    /// be sent by the clock.
    pub fn next_copy_at(&self) -> Option<Duration> {
        if self.finished || self.no_more_copies {
            None
        } else {
            self.next_at
        }
    }

    /// The copies in flight.
    pub fn outstanding(&self) -> &[u32] {
        &self.outstanding
    }

    /// The copies sent so far.
    pub fn sent(&self) -> u32 {
        self.sent
    }

    /// Whether the call has ended.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    fn send(&mut self, now: Duration) -> Option<HedgeAction> {
        if self.finished || self.no_more_copies || self.sent >= self.policy.max_attempts() {
            self.next_at = None;
            return None;
        }
        if self.sent > 0
            && self
                .throttle
                .as_ref()
                .is_some_and(|throttle| !throttle.allows_retry())
        {
            self.no_more_copies = true;
            self.next_at = None;
            return None;
        }
        self.sent += 1;
        self.outstanding.push(self.sent);
        self.next_at = (self.sent < self.policy.max_attempts())
            .then(|| now.saturating_add(self.policy.hedging_delay()));
        Some(HedgeAction::Send {
            copy: self.sent,
            previous_attempts: (self.sent > 1).then_some(self.sent - 1),
        })
    }

    /// The clock reached `now`: the next copy, if it is due.
    pub fn on_timer(&mut self, now: Duration) -> Vec<HedgeAction> {
        match self.next_copy_at() {
            Some(due) if due <= now => self.send(now).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// Copy `copy` committed (its headers or a message arrived): the others are cancelled and no
    /// more are sent; its answer will be the call's.
    pub fn on_commit(&mut self, copy: u32) -> Vec<HedgeAction> {
        if self.finished {
            return Vec::new();
        }
        self.no_more_copies = true;
        self.next_at = None;
        let others: Vec<u32> = self
            .outstanding
            .iter()
            .copied()
            .filter(|c| *c != copy)
            .collect();
        self.outstanding.retain(|c| *c == copy);
        if others.is_empty() {
            Vec::new()
        } else {
            vec![HedgeAction::Cancel(others)]
        }
    }

    /// Copy `copy` ended at `now` with `code` and `pushback`.
    pub fn on_status(
        &mut self,
        now: Duration,
        copy: u32,
        code: Code,
        pushback: Pushback,
    ) -> Vec<HedgeAction> {
        if self.finished || !self.outstanding.contains(&copy) {
            return Vec::new();
        }
        self.outstanding.retain(|c| *c != copy);
        let non_fatal = self.policy.non_fatal_status_codes().contains(code);
        if code == Code::Ok {
            if let Some(throttle) = &self.throttle {
                throttle.record_success();
            }
            return self.finish(copy, code);
        }
        if (non_fatal || pushback == Pushback::DoNotRetry)
            && self
                .throttle
                .as_ref()
                .is_some_and(|throttle| !throttle.record_failure())
        {
            self.no_more_copies = true;
        }
        if !non_fatal {
            return self.finish(copy, code);
        }
        let mut actions = Vec::new();
        match pushback {
            Pushback::DoNotRetry => self.no_more_copies = true,
            Pushback::RetryAfter(pause) => {
                if self.next_at.is_some() || self.sent < self.policy.max_attempts() {
                    self.next_at = Some(now.saturating_add(pause));
                }
            }
            Pushback::Absent => actions.extend(self.send(now)),
        }
        if self.outstanding.is_empty() && self.next_copy_at().is_none() {
            actions.extend(self.finish(copy, code));
        }
        actions
    }

    fn finish(&mut self, copy: u32, code: Code) -> Vec<HedgeAction> {
        self.finished = true;
        self.next_at = None;
        let others = std::mem::take(&mut self.outstanding);
        let mut actions = Vec::new();
        if !others.is_empty() {
            actions.push(HedgeAction::Cancel(others));
        }
        actions.push(HedgeAction::Finish { copy, code });
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RetryThrottling;

    fn policy(max_attempts: u32, delay_ms: u64) -> HedgingPolicy {
        HedgingPolicy::builder()
            .max_attempts(max_attempts)
            .hedging_delay(Duration::from_millis(delay_ms))
            .non_fatal_status_codes([Code::Unavailable, Code::Internal])
            .build()
            .expect("valid")
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn send(copy: u32) -> HedgeAction {
        HedgeAction::Send {
            copy,
            previous_attempts: (copy > 1).then(|| copy - 1),
        }
    }

    #[test]
    fn copies_every_hedging_delay_up_to_max_attempts() {
        let mut call = HedgingCall::new(&policy(4, 500), None);
        assert_eq!(call.start(), [send(1)]);
        assert_eq!(call.on_timer(ms(499)), []);
        assert_eq!(call.on_timer(ms(500)), [send(2)]);
        assert_eq!(call.next_copy_at(), Some(ms(1000)));
        assert_eq!(call.on_timer(ms(1000)), [send(3)]);
        assert_eq!(call.on_timer(ms(1500)), [send(4)]);
        assert_eq!(call.next_copy_at(), None);
        assert_eq!(call.outstanding(), [1, 2, 3, 4]);
    }

    #[test]
    fn zero_delay_sends_every_copy_at_once() {
        let mut call = HedgingCall::new(&policy(3, 0), None);
        assert_eq!(call.start(), [send(1)]);
        assert_eq!(call.on_timer(ms(0)), [send(2)]);
        assert_eq!(call.on_timer(ms(0)), [send(3)]);
    }

    #[test]
    fn a_non_fatal_failure_sends_the_next_copy_now_and_the_delay_restarts() {
        let mut call = HedgingCall::new(&policy(4, 100), None);
        call.start();
        assert_eq!(
            call.on_status(ms(30), 1, Code::Unavailable, Pushback::Absent),
            [send(2)]
        );
        assert_eq!(call.next_copy_at(), Some(ms(130)));
        assert_eq!(call.on_timer(ms(130)), [send(3)]);
    }

    #[test]
    fn a_fatal_status_cancels_everything() {
        let mut call = HedgingCall::new(&policy(3, 100), None);
        call.start();
        call.on_timer(ms(100));
        assert_eq!(
            call.on_status(ms(120), 2, Code::InvalidArgument, Pushback::Absent),
            [
                HedgeAction::Cancel(vec![1]),
                HedgeAction::Finish {
                    copy: 2,
                    code: Code::InvalidArgument
                }
            ]
        );
        assert!(call.is_finished());
        assert_eq!(call.on_timer(ms(200)), []);
    }

    #[test]
    fn every_copy_failing_ends_with_the_last_failure() {
        let mut call = HedgingCall::new(&policy(2, 100), None);
        call.start();
        assert_eq!(
            call.on_status(ms(10), 1, Code::Unavailable, Pushback::Absent),
            [send(2)]
        );
        assert_eq!(
            call.on_status(ms(20), 2, Code::Internal, Pushback::Absent),
            [HedgeAction::Finish {
                copy: 2,
                code: Code::Internal
            }]
        );
    }

    #[test]
    fn pushback_delays_the_next_copy_or_stops_them() {
        let mut call = HedgingCall::new(&policy(3, 100), None);
        call.start();
        assert_eq!(
            call.on_status(ms(10), 1, Code::Unavailable, Pushback::RetryAfter(ms(300))),
            []
        );
        assert_eq!(call.next_copy_at(), Some(ms(310)));
        assert_eq!(call.on_timer(ms(310)), [send(2)]);
        assert_eq!(call.next_copy_at(), Some(ms(410)));

        let mut call = HedgingCall::new(&policy(3, 100), None);
        call.start();
        call.on_timer(ms(100));
        assert_eq!(
            call.on_status(ms(110), 1, Code::Unavailable, Pushback::DoNotRetry),
            []
        );
        assert_eq!(call.next_copy_at(), None);
        assert_eq!(
            call.on_status(ms(120), 2, Code::Unavailable, Pushback::Absent),
            [HedgeAction::Finish {
                copy: 2,
                code: Code::Unavailable
            }]
        );
    }

    #[test]
    fn a_commit_cancels_the_other_copies() {
        let mut call = HedgingCall::new(&policy(3, 100), None);
        call.start();
        call.on_timer(ms(100));
        assert_eq!(call.on_commit(2), [HedgeAction::Cancel(vec![1])]);
        assert_eq!(call.next_copy_at(), None);
        assert_eq!(
            call.on_status(ms(300), 2, Code::Unavailable, Pushback::Absent),
            [HedgeAction::Finish {
                copy: 2,
                code: Code::Unavailable
            }]
        );
    }

    #[test]
    fn the_throttle_stops_hedges_but_not_the_first_copy() {
        let throttle = Arc::new(RetryThrottle::new(
            RetryThrottling::new(2, 0.1).expect("valid"),
        ));
        throttle.record_failure(); // 1 token: not above 1
        let mut call = HedgingCall::new(&policy(3, 100), Some(Arc::clone(&throttle)));
        assert_eq!(call.start(), [send(1)]);
        assert_eq!(call.on_timer(ms(100)), []);
        assert_eq!(call.next_copy_at(), None);
        assert_eq!(
            call.on_status(ms(150), 1, Code::Ok, Pushback::Absent),
            [HedgeAction::Finish {
                copy: 1,
                code: Code::Ok
            }]
        );
        assert_eq!(throttle.milli_tokens(), 1_100);
    }
}

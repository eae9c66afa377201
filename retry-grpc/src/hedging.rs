//! The hedging decision of one call under a `hedgingPolicy` (gRFC A6, "Hedging Policy"). The
//! copies run in the engine ([`retry_runtime::engine::drive_hedged`]) on the schedule
//! [`HedgingCall::hedge`] gives it; this says what A6 adds to that schedule:
//!
//! - Copy 1 is sent at once; copy `k` after another `hedgingDelay` without an answer, up to
//!   `maxAttempts` copies (the engine's [`Hedge`]).
//! - A **non-fatal** status (in `nonFatalStatusCodes`) sends the next copy **at once**
//!   ([`NextCopy::Now`]).
//! - Any other status ends the call with it and cancels every other copy, as does a copy that
//!   **commits** (its headers or a message arrived): the door's classifier says so, and the
//!   engine drops the other copies.
//! - Pushback: "do not retry" sends no more copies ([`NextCopy::Never`]); a pause of `n` ms sends
//!   the next copy `n` ms after this status ([`NextCopy::After`]). After a copy sent at once or
//!   after a pushback, the later ones follow `hedgingDelay` apart from it.
//! - Throttling: each non-fatal failure takes a token and a success gives `tokenRatio`; a copy
//!   after the first is sent only while the count is above half of `maxTokens`
//!   ([`may_send`](HedgingCall::may_send), which the door's decider answers when the engine
//!   asks before a copy due on the schedule).
//! - When every copy sent has failed and no more will be sent, the call ends with the last
//!   failure.
//!
//! Copy `k` carries `grpc-previous-rpc-attempts: k − 1`.
//!
//! C-core, and so `grpcio`, does not implement hedging (it reads `hedgingPolicy` and ignores it;
//! grpc/proposal#287), so these rules are checked against A6's text and grpc-java's
//! `RetriableStream`, not against a measurement.

use crate::{HedgingPolicy, Pushback, RetryThrottle};
use retry_runtime::Hedge;
use retry_runtime::engine::NextCopy;
use std::sync::Arc;
use tonic::Code;

/// The hedging state of one call: what A6 decides after a copy fails, and whether a copy may go.
///
/// ```
/// use retry_grpc::{HedgingCall, HedgingPolicy, Pushback};
/// use retry_runtime::engine::NextCopy;
/// use std::time::Duration;
/// use tonic::Code;
///
/// let policy = HedgingPolicy::builder()
///     .max_attempts(3)
///     .hedging_delay(Duration::from_millis(100))
///     .non_fatal_status_codes([Code::Unavailable])
///     .build()?;
/// let mut call = HedgingCall::new(&policy, None);
/// // The engine's schedule: a copy every 100 ms without an answer, two beside the first.
/// let hedge = call.hedge();
/// assert_eq!(hedge.delay(), Some(Duration::from_millis(100)));
/// assert_eq!(hedge.get_max_hedges(), 2);
/// // A copy fails with a non-fatal code: the next copy goes at once, not at 200 ms.
/// assert!(matches!(call.on_status(Code::Unavailable, Pushback::Absent), NextCopy::Now));
/// // The server asks for 300 ms: the next copy goes then.
/// let pushback = Pushback::RetryAfter(Duration::from_millis(300));
/// assert!(matches!(
///     call.on_status(Code::Unavailable, pushback),
///     NextCopy::After(pause) if pause == Duration::from_millis(300)
/// ));
/// // A fatal code: no more copies (the call ends with it).
/// assert!(matches!(call.on_status(Code::InvalidArgument, Pushback::Absent), NextCopy::Never));
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct HedgingCall {
    policy: HedgingPolicy,
    throttle: Option<Arc<RetryThrottle>>,
    /// A pushback said not to retry, or the throttle fell to its threshold: no more copies.
    stopped: bool,
    throttled: bool,
}

impl HedgingCall {
    /// A call about to start; `throttle`: its server's, if the config has `retryThrottling`.
    pub fn new(policy: &HedgingPolicy, throttle: Option<Arc<RetryThrottle>>) -> Self {
        HedgingCall {
            policy: policy.clone(),
            throttle,
            stopped: false,
            throttled: false,
        }
    }

    /// The engine's schedule of the copies: one more every `hedgingDelay` without an answer,
    /// `maxAttempts − 1` beside the first.
    pub fn hedge(&self) -> Hedge {
        Hedge::after(self.policy.hedging_delay())
            .max_hedges(self.policy.max_attempts().saturating_sub(1))
    }

    /// Whether a copy after the first may be sent now: no pushback said stop, and the
    /// throttle's count (if any) is above half of `maxTokens`.
    pub fn may_send(&self) -> bool {
        !self.stopped
            && self
                .throttle
                .as_ref()
                .is_none_or(|throttle| throttle.allows_retry())
    }

    /// Whether the throttle stopped the copies of this call.
    pub fn is_throttled(&self) -> bool {
        self.throttled
    }

    /// A copy ended with `code` and `pushback` before it committed (a trailers-only answer, an
    /// HTTP error, a transport error): when the next copy goes. `OK` gives the throttle
    /// `tokenRatio` (and ends the call); a non-fatal failure, or a pushback that says stop, takes
    /// a token.
    pub fn on_status(&mut self, code: Code, pushback: Pushback) -> NextCopy {
        if code == Code::Ok {
            if let Some(throttle) = &self.throttle {
                throttle.record_success();
            }
            return NextCopy::Never;
        }
        let non_fatal = self.policy.non_fatal_status_codes().contains(code);
        if (non_fatal || pushback == Pushback::DoNotRetry)
            && self
                .throttle
                .as_ref()
                .is_some_and(|throttle| !throttle.record_failure())
        {
            self.stopped = true;
            self.throttled = true;
        }
        if pushback == Pushback::DoNotRetry {
            self.stopped = true;
        }
        if !non_fatal || self.stopped {
            return NextCopy::Never;
        }
        match pushback {
            Pushback::RetryAfter(pause) => NextCopy::After(pause),
            _ => NextCopy::Now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RetryThrottling;
    use std::time::Duration;

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

    #[test]
    fn the_schedule_is_one_copy_per_delay_up_to_max_attempts() {
        let hedge = HedgingCall::new(&policy(4, 500), None).hedge();
        assert_eq!(hedge.delay(), Some(ms(500)));
        assert_eq!(hedge.get_max_hedges(), 3);
        let hedge = HedgingCall::new(&policy(2, 0), None).hedge();
        assert_eq!(hedge.get_max_hedges(), 1);
        assert_eq!(hedge.delay(), Some(Duration::ZERO));
    }

    #[test]
    fn a_non_fatal_failure_sends_the_next_copy_now_and_a_fatal_one_none() {
        let mut call = HedgingCall::new(&policy(4, 100), None);
        assert!(matches!(
            call.on_status(Code::Unavailable, Pushback::Absent),
            NextCopy::Now
        ));
        assert!(matches!(
            call.on_status(Code::InvalidArgument, Pushback::Absent),
            NextCopy::Never
        ));
        assert!(call.may_send(), "a fatal status stops nothing by itself");
    }

    #[test]
    fn pushback_delays_the_next_copy_or_stops_them() {
        let mut call = HedgingCall::new(&policy(3, 100), None);
        assert!(matches!(
            call.on_status(Code::Unavailable, Pushback::RetryAfter(ms(300))),
            NextCopy::After(pause) if pause == ms(300)
        ));
        assert!(matches!(
            call.on_status(Code::Unavailable, Pushback::DoNotRetry),
            NextCopy::Never
        ));
        assert!(!call.may_send());
        assert!(matches!(
            call.on_status(Code::Unavailable, Pushback::Absent),
            NextCopy::Never
        ));
    }

    #[test]
    fn the_throttle_stops_hedges_but_not_the_first_copy() {
        let throttle = Arc::new(RetryThrottle::new(
            RetryThrottling::new(2, 0.1).expect("valid"),
        ));
        throttle.record_failure(); // 1 token: not above 1
        let call = HedgingCall::new(&policy(3, 100), Some(Arc::clone(&throttle)));
        assert!(!call.may_send());
        throttle.record_success();
        assert!(call.may_send(), "1.1 tokens: above 1");
        // A trailers-only `OK` gives `tokenRatio` too.
        let mut call = call;
        assert!(matches!(
            call.on_status(Code::Ok, Pushback::Absent),
            NextCopy::Never
        ));
        assert_eq!(throttle.milli_tokens(), 1_200);
    }

    #[test]
    fn a_non_fatal_failure_takes_a_token_and_the_threshold_stops_the_copies() {
        let throttle = Arc::new(RetryThrottle::new(
            RetryThrottling::new(4, 0.1).expect("valid"),
        ));
        let mut call = HedgingCall::new(&policy(5, 100), Some(Arc::clone(&throttle)));
        // 4 → 3: above 2.
        assert!(matches!(
            call.on_status(Code::Unavailable, Pushback::Absent),
            NextCopy::Now
        ));
        // 3 → 2: not above 2.
        assert!(matches!(
            call.on_status(Code::Unavailable, Pushback::Absent),
            NextCopy::Never
        ));
        assert!(call.is_throttled());
        assert!(!call.may_send());
        // A fatal code takes none; a pushback that says stop takes one, whatever the code.
        call.on_status(Code::InvalidArgument, Pushback::Absent);
        assert_eq!(throttle.milli_tokens(), 2_000);
        call.on_status(Code::InvalidArgument, Pushback::DoNotRetry);
        assert_eq!(throttle.milli_tokens(), 1_000);
    }
}

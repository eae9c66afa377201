//! The retry decision of one call under a `retryPolicy`, in C-core's order (`ShouldRetry` in
//! `retry_filter_legacy_call_data.cc`), which is A6's:
//!
//! 1. `OK`: the call succeeded; the throttle gains `tokenRatio`. Done.
//! 2. A code not in `retryableStatusCodes`: final; the throttle is not touched (A6: a malformed
//!    request is no sign of an overloaded server), unless the pushback says not to retry,
//!    which A6 and grpc-java count as a failure (C-core does not).
//! 3. The throttle takes a token; if the count is then not above `maxTokens / 2`: final
//!    ([`Stop::Throttled`]).
//! 4. Committed (response headers or a message arrived, or the request outgrew the buffer):
//!    final.
//! 5. `maxAttempts` reached: final.
//! 6. Pushback: negative or malformed: final; otherwise the pause is exactly the pushback, and
//!    the backoff starts again from `initialBackoff` afterwards.
//! 7. Otherwise the pause is the backoff's.
//!
//! Each attempt after the first carries `grpc-previous-rpc-attempts`: the attempts before it
//! (1, 2, 3, ...), transparent retries not counted.

use crate::backoff::{Jitter, RetryBackoff};
use crate::{Commit, Pushback, RetryPolicy, RetryThrottle};
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

/// The metadata key that tells the server how many attempts came before this one.
pub const GRPC_PREVIOUS_RPC_ATTEMPTS: &str = "grpc-previous-rpc-attempts";

/// What to do after an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Send another attempt after `pause`, with `grpc-previous-rpc-attempts: previous_attempts`.
    Retry {
        /// The pause: the server's pushback exactly, or the backoff's draw.
        pause: Duration,
        /// The attempts made so far, which the next one carries in
        /// `grpc-previous-rpc-attempts`.
        previous_attempts: u32,
    },
    /// The call ends with this attempt's status.
    Stop(Stop),
}

/// Why a call is not retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stop {
    /// It succeeded.
    Succeeded,
    /// Its code is not in `retryableStatusCodes`.
    NotRetryable,
    /// The throttle's count is at or below half of `maxTokens`.
    Throttled,
    /// It was committed.
    Committed,
    /// `maxAttempts` attempts were made.
    AttemptsExhausted,
    /// The server's pushback said not to retry.
    Pushback,
}

/// The retry state of one call under a retry policy.
///
/// ```
/// use retry_grpc::{Decision, Pushback, RetryCall, RetryPolicy, Stop};
/// use retry_grpc::backoff::Jitter;
/// use std::time::Duration;
/// use tonic::Code;
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(3)
///     .initial_backoff(Duration::from_millis(100))
///     .max_backoff(Duration::from_secs(1))
///     .backoff_multiplier(2.0)
///     .retryable_status_codes([Code::Unavailable, Code::ResourceExhausted])
///     .build()?;
/// let mut call = RetryCall::new(&policy, Jitter::A6, None);
/// assert_eq!(call.previous_attempts_header(), None); // the first attempt has none
/// let pushback = Pushback::RetryAfter(Duration::from_millis(700));
/// assert_eq!(
///     call.on_status_with(Code::ResourceExhausted, pushback, 0.5),
///     Decision::Retry { pause: Duration::from_millis(700), previous_attempts: 1 }
/// );
/// assert_eq!(call.previous_attempts_header(), Some(1));
/// // After a pushback the backoff starts again: half of initialBackoff with u = 0.5.
/// assert_eq!(
///     call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
///     Decision::Retry { pause: Duration::from_millis(50), previous_attempts: 2 }
/// );
/// assert_eq!(
///     call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
///     Decision::Stop(Stop::AttemptsExhausted)
/// );
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct RetryCall {
    policy: RetryPolicy,
    backoff: RetryBackoff,
    throttle: Option<Arc<RetryThrottle>>,
    attempts: u32,
    committed: bool,
}

impl RetryCall {
    /// A call about to send its first attempt; `throttle`: its server's, if the config has
    /// `retryThrottling`.
    pub fn new(policy: &RetryPolicy, jitter: Jitter, throttle: Option<Arc<RetryThrottle>>) -> Self {
        RetryCall {
            policy: policy.clone(),
            backoff: RetryBackoff::new(policy, jitter),
            throttle,
            attempts: 0,
            committed: false,
        }
    }

    /// The value of `grpc-previous-rpc-attempts` for the attempt about to be sent: `None` for
    /// the first, then 1, 2, ...
    pub fn previous_attempts_header(&self) -> Option<u32> {
        (self.attempts > 0).then_some(self.attempts)
    }

    /// The attempts completed (transparent retries not counted).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The call committed: it will not be retried (see [`Commit`]).
    pub fn commit(&mut self) {
        self.committed = true;
    }

    /// Takes the commit state of `commit`.
    pub fn observe(&mut self, commit: &Commit) {
        self.committed |= commit.is_committed();
    }

    /// The attempt ended with `code` and `pushback`: retry (after what pause) or stop. The
    /// backoff draws with the runtime's random source ([`RetryBackoff::next_pause`]).
    pub fn on_status(&mut self, code: Code, pushback: Pushback) -> Decision {
        self.decide(code, pushback, RetryBackoff::next_pause)
    }

    /// [`on_status`](Self::on_status) with the backoff's uniform draw `u` in [0, 1) given.
    pub fn on_status_with(&mut self, code: Code, pushback: Pushback, u: f64) -> Decision {
        self.decide(code, pushback, |backoff| backoff.next_pause_with(u))
    }

    /// A6's order, with `draw` for the backoff's pause.
    fn decide(
        &mut self,
        code: Code,
        pushback: Pushback,
        draw: impl FnOnce(&mut RetryBackoff) -> Duration,
    ) -> Decision {
        if code == Code::Ok {
            if let Some(throttle) = &self.throttle {
                throttle.record_success();
            }
            return Decision::Stop(Stop::Succeeded);
        }
        let retryable = self.policy.retryable_status_codes().contains(code);
        let counts = retryable || pushback == Pushback::DoNotRetry;
        let throttled = counts
            && self
                .throttle
                .as_ref()
                .is_some_and(|throttle| !throttle.record_failure());
        if !retryable {
            return Decision::Stop(Stop::NotRetryable);
        }
        if throttled {
            return Decision::Stop(Stop::Throttled);
        }
        if self.committed {
            return Decision::Stop(Stop::Committed);
        }
        self.attempts = self.attempts.saturating_add(1);
        if self.attempts >= self.policy.max_attempts() {
            return Decision::Stop(Stop::AttemptsExhausted);
        }
        let pause = match pushback {
            Pushback::DoNotRetry => return Decision::Stop(Stop::Pushback),
            Pushback::RetryAfter(pause) => {
                self.backoff.reset();
                pause
            }
            Pushback::Absent => draw(&mut self.backoff),
        };
        Decision::Retry {
            pause,
            previous_attempts: self.attempts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RetryThrottling;

    fn policy(max_attempts: u32) -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(max_attempts)
            .initial_backoff(Duration::from_millis(100))
            .max_backoff(Duration::from_millis(1000))
            .backoff_multiplier(2.0)
            .retryable_status_codes([Code::Unavailable, Code::ResourceExhausted])
            .build()
            .expect("valid")
    }

    fn retry(pause_ms: u64, previous_attempts: u32) -> Decision {
        Decision::Retry {
            pause: Duration::from_millis(pause_ms),
            previous_attempts,
        }
    }

    #[test]
    fn unavailable_three_times_then_ok() {
        let mut call = RetryCall::new(&policy(4), Jitter::A6, None);
        // u = 0.999...: the top of each interval; C-core's form is checked below.
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
            retry(50, 1)
        );
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
            retry(100, 2)
        );
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
            retry(200, 3)
        );
        assert_eq!(
            call.on_status_with(Code::Ok, Pushback::Absent, 0.5),
            Decision::Stop(Stop::Succeeded)
        );
    }

    #[test]
    fn c_core_pauses() {
        let mut call = RetryCall::new(&policy(5), Jitter::CCore, None);
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.0),
            retry(80, 1)
        );
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
            retry(200, 2)
        );
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 1.0),
            retry(480, 3)
        );
    }

    #[test]
    fn pushback_replaces_the_pause_exactly_and_resets_the_backoff() {
        let mut call = RetryCall::new(&policy(5), Jitter::A6, None);
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
            retry(50, 1)
        );
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
            retry(100, 2)
        );
        // Longer than maxBackoff: still exactly the pushback.
        let long = Pushback::RetryAfter(Duration::from_millis(5_000));
        assert_eq!(
            call.on_status_with(Code::ResourceExhausted, long, 0.5),
            retry(5_000, 3)
        );
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
            retry(50, 4)
        );
    }

    #[test]
    fn pushback_that_says_stop() {
        let mut call = RetryCall::new(&policy(5), Jitter::A6, None);
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::DoNotRetry, 0.5),
            Decision::Stop(Stop::Pushback)
        );
    }

    #[test]
    fn exhausted_attempts_win_over_pushback() {
        let mut call = RetryCall::new(&policy(2), Jitter::A6, None);
        let pushback = Pushback::RetryAfter(Duration::from_millis(10));
        assert_eq!(
            call.on_status_with(Code::Unavailable, pushback, 0.5),
            retry(10, 1)
        );
        assert_eq!(
            call.on_status_with(Code::Unavailable, pushback, 0.5),
            Decision::Stop(Stop::AttemptsExhausted)
        );
    }

    #[test]
    fn a_code_not_in_the_list_is_final_and_not_counted() {
        let throttle = Arc::new(RetryThrottle::new(
            RetryThrottling::new(10, 0.1).expect("valid"),
        ));
        let mut call = RetryCall::new(&policy(5), Jitter::A6, Some(Arc::clone(&throttle)));
        assert_eq!(
            call.on_status_with(Code::Internal, Pushback::Absent, 0.5),
            Decision::Stop(Stop::NotRetryable)
        );
        assert_eq!(throttle.milli_tokens(), 10_000);
        // A6 and grpc-java: a pushback that says stop counts, whatever the code.
        assert_eq!(
            call.on_status_with(Code::Internal, Pushback::DoNotRetry, 0.5),
            Decision::Stop(Stop::NotRetryable)
        );
        assert_eq!(throttle.milli_tokens(), 9_000);
    }

    #[test]
    fn committed_calls_are_final() {
        let mut call = RetryCall::new(&policy(5), Jitter::A6, None);
        let mut commit = Commit::new(1024);
        commit.on_response_message();
        call.observe(&commit);
        assert_eq!(
            call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5),
            Decision::Stop(Stop::Committed)
        );
    }

    #[test]
    fn twenty_failing_calls_with_throttling_make_23_attempts() {
        let throttle = Arc::new(RetryThrottle::new(
            RetryThrottling::new(10, 0.1).expect("valid"),
        ));
        let mut attempts = 0;
        let mut stops = Vec::new();
        for _ in 0..20 {
            let mut call = RetryCall::new(&policy(4), Jitter::A6, Some(Arc::clone(&throttle)));
            let mut decision = Decision::Retry {
                pause: Duration::ZERO,
                previous_attempts: 0,
            };
            while let Decision::Retry { .. } = decision {
                attempts += 1;
                decision = call.on_status_with(Code::Unavailable, Pushback::Absent, 0.5);
            }
            if let Decision::Stop(stop) = decision {
                stops.push(stop);
            }
        }
        assert_eq!(attempts, 23);
        assert_eq!(stops[0], Stop::AttemptsExhausted);
        assert!(stops[1..].iter().all(|stop| *stop == Stop::Throttled));
        assert_eq!(throttle.milli_tokens(), 0);
    }
}

//! The AWS SDKs' standard retry behaviour as updated in 2026 (`AWS_NEW_RETRIES_2026`): throttling
//! priced apart from transient errors, in the delays and in the retry quota. The quota and the
//! kinds of failure are retry-overload's ([`RetryQuota`], [`FailureKind`]); the delays, the order
//! of the decisions and the verdict on an HTTP answer are here, beside the [`Verdict`](crate::Verdict)
//! they read and the loop that asks them.

use retry_overload::{FailureKind, RetryQuota};
use std::time::Duration;

/// The delays and the order of decisions of the AWS SDKs' standard retry mode as updated in
/// 2026 (opt-in through `AWS_NEW_RETRIES_2026=true`, the default from November 2026).
///
/// The delay before retry `n` (the attempt that failed was attempt `n`, 1 for the first) is
///
/// ```text
/// computed = random × min(base × 2^(n−1), max_backoff)      random in [0, 1]
/// delay    = clamp(x-amz-retry-after, computed, computed + 5 s)   when the server sent one
/// ```
///
/// with `base` 1 s for a [throttling](FailureKind::ThrottlingError) failure and 50 ms otherwise
/// (25 ms for DynamoDB), `max_backoff` 20 s applied *before* the random factor, and the server's
/// `x-amz-retry-after` (milliseconds) held to at least the computed delay and at most 5 s above
/// it (the cap does not apply to it). [`decide`](Aws2026::decide) adds the order of the
/// reference: the attempt limit (3 attempts, 4 for DynamoDB) is checked before the
/// [`RetryQuota`], and a long-polling operation whose quota is empty still pauses for the
/// backoff before it returns its error, so that a loop around it does not hammer the service.
///
/// Follows aws-sdk-go-v2's `aws/retry/jitter_backoff.go` (`backoffDelay2026`, the version
/// that goes with the test table) and its test table `aws/retry/retry2026_test.go`
/// (`TestRetry2026StandardMode`, commit `058d9848ce2d`), which this crate's tests run case by
/// case; the same rules are in aws-sdk-php's `Aws\Retry\V3\RetryMiddleware` and
/// `QuotaManager`, and aws-sdk-net's `StandardRetryPolicy` ("SEP 2.1").
/// Pure arithmetic: no clock, no state; the quota is the shared part.
///
/// ```
/// use retry_runtime::{Aws2026, Aws2026Decision, FailureKind, RetryQuota};
/// use std::time::Duration;
///
/// static QUOTA: RetryQuota = RetryQuota::new();
/// let policy = Aws2026::new();
///
/// // The first attempt failed with a 500: retry after 50 ms × random, 14 tokens taken.
/// let decision = policy.decide(1, FailureKind::TransientError, &QUOTA, 1.0, None);
/// assert_eq!(decision, Aws2026Decision::Retry { delay: Duration::from_millis(50), cost: 14 });
/// assert_eq!(QUOTA.available(), 486);
///
/// // The retry succeeded: its cost comes back.
/// QUOTA.refund(Some(14));
/// assert_eq!(QUOTA.available(), 500);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Aws2026 {
    base: Duration,
    throttling_base: Duration,
    max_backoff: Duration,
    max_attempts: u32,
    retry_after_window: Duration,
    long_polling: bool,
}

default_is_new!(Aws2026);

impl Aws2026 {
    /// The standard mode for most services: 3 attempts, a 50 ms base for transient failures
    /// and 1 s for throttling, at most 20 s before the random factor, `x-amz-retry-after` held
    /// to [computed, computed + 5 s], not long-polling.
    pub const fn new() -> Self {
        Self {
            base: Duration::from_millis(50),
            throttling_base: Duration::from_secs(1),
            max_backoff: Duration::from_secs(20),
            max_attempts: 3,
            retry_after_window: Duration::from_secs(5),
            long_polling: false,
        }
    }

    /// The standard mode for DynamoDB and DynamoDB Streams: a 25 ms base for transient failures
    /// and 4 attempts; the rest as [`new`](Aws2026::new).
    ///
    /// ```
    /// use retry_runtime::{Aws2026, FailureKind};
    /// use std::time::Duration;
    ///
    /// let dynamodb = Aws2026::dynamodb();
    /// assert_eq!(dynamodb.get_max_attempts(), 4);
    /// let delays: Vec<_> = (1..=3).map(|n| dynamodb.delay(n, FailureKind::TransientError, 1.0, None)).collect();
    /// assert_eq!(delays, [25, 50, 100].map(Duration::from_millis));
    /// ```
    pub const fn dynamodb() -> Self {
        Self::new().base(Duration::from_millis(25)).max_attempts(4)
    }

    setters! {
        /// The base of a transient failure's delay (the first retry waits up to this long).
        pub fn base(base: Duration) => self.base;

        /// The base of a throttled attempt's delay: 1 s.
        pub fn throttling_base(base: Duration) => self.throttling_base;

        /// The most the exponential part may grow to, before the random factor: 20 s.
        pub fn max_backoff(max: Duration) => self.max_backoff;

        /// Attempts in all, the first one included: 3 (4 for DynamoDB). 0 is taken as 1.
        pub fn max_attempts(attempts: u32) => self.max_attempts = super::at_least_one(attempts);

        /// How far above the computed delay a server's `x-amz-retry-after` may push it: 5 s.
        pub fn retry_after_window(window: Duration) => self.retry_after_window;

        /// Marks a long-polling operation (SQS `ReceiveMessage`, ...): when the quota is empty it
        /// still pauses for the backoff before returning its error (see
        /// [`Aws2026Decision::QuotaExhausted`]).
        pub fn long_polling(long_polling: bool) => self.long_polling;
    }

    /// Attempts in all, the first one included.
    pub const fn get_max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Whether this is a long-polling operation's policy.
    pub const fn is_long_polling(&self) -> bool {
        self.long_polling
    }

    /// The pause before the next attempt, after attempt `attempt` (1 for the first) failed as
    /// `kind`.
    ///
    /// `random` is the random factor, in [0, 1] (values outside are clamped, NaN is taken as
    /// 0): pass `1.0` for the largest delay, or a uniform draw, as the loop does for its own
    /// jitter. `retry_after` is the server's `x-amz-retry-after` (see
    /// [`parse_retry_after`](Aws2026::parse_retry_after)); it replaces the computed delay,
    /// held to [computed, computed + 5 s]. Truncated to whole nanoseconds, as Go's
    /// `time.Duration`; it never panics (a huge `max_backoff` saturates).
    ///
    /// ```
    /// use retry_runtime::{Aws2026, FailureKind};
    /// use std::time::Duration;
    ///
    /// let policy = Aws2026::new();
    /// let ms = Duration::from_millis;
    /// let delay = |retry_after| policy.delay(1, FailureKind::TransientError, 1.0, retry_after);
    /// assert_eq!(delay(Some(ms(1500))), ms(1500));
    /// assert_eq!(delay(Some(ms(0))), ms(50)); // at least the computed delay
    /// assert_eq!(delay(Some(ms(10_000))), ms(5050)); // at most 5 s above it
    /// ```
    pub fn delay(
        &self,
        attempt: u32,
        kind: FailureKind,
        random: f64,
        retry_after: Option<Duration>,
    ) -> Duration {
        let base = match kind {
            FailureKind::TransientError => self.base,
            FailureKind::ThrottlingError => self.throttling_base,
        };
        // 2^1100 is already infinite in f64; min() below turns it into max_backoff.
        let exponent = attempt.saturating_sub(1).min(1100) as i32;
        let exponential = base.as_nanos() as f64 * 2f64.powi(exponent);
        let capped = exponential.min(self.max_backoff.as_nanos() as f64);
        // `random >= 0.0` is false for NaN too.
        let random = if random >= 0.0 { random.min(1.0) } else { 0.0 };
        // A float-to-integer `as` saturates, so this cannot overflow.
        let computed = Duration::from_nanos((random * capped) as u64);
        match retry_after {
            Some(asked) => asked
                .max(computed)
                .min(computed.saturating_add(self.retry_after_window)),
            None => computed,
        }
    }

    /// What to do after attempt `attempt` (1 for the first) failed as `kind` with a retryable
    /// error, in the reference's order: the attempt limit first (nothing is taken from the
    /// quota), then the quota, whose cost for `kind` is taken when there is enough.
    ///
    /// A non-retryable error is the caller's to return before asking; a success is reported
    /// with [`RetryQuota::refund`].
    ///
    /// ```
    /// use retry_runtime::{Aws2026, Aws2026Decision, FailureKind, RetryQuota};
    /// use std::time::Duration;
    ///
    /// // SQS ReceiveMessage with an empty quota: no retry, but a pause before the error.
    /// let quota = RetryQuota::new().tokens(0);
    /// let receive = Aws2026::new().long_polling(true);
    /// assert_eq!(
    ///     receive.decide(1, FailureKind::TransientError, &quota, 1.0, None),
    ///     Aws2026Decision::QuotaExhausted { pause: Some(Duration::from_millis(50)) },
    /// );
    /// ```
    pub fn decide(
        &self,
        attempt: u32,
        kind: FailureKind,
        quota: &RetryQuota,
        random: f64,
        retry_after: Option<Duration>,
    ) -> Aws2026Decision {
        if attempt >= self.max_attempts {
            return Aws2026Decision::MaxAttempts;
        }
        match quota.acquire(kind) {
            Some(cost) => Aws2026Decision::Retry {
                delay: self.delay(attempt, kind, random, retry_after),
                cost,
            },
            // The reference computes the long-polling pause without the error's kind (Go
            // passes a nil error), so with the transient base even after a throttle, but with
            // the response's `x-amz-retry-after`.
            None => Aws2026Decision::QuotaExhausted {
                pause: self
                    .long_polling
                    .then(|| self.delay(attempt, FailureKind::TransientError, random, retry_after)),
            },
        }
    }

    /// The header in which an AWS service asks for a pause before the next attempt, in
    /// milliseconds ([`parse_retry_after`](Aws2026::parse_retry_after)).
    pub const RETRY_AFTER_HEADER: &str = "x-amz-retry-after";

    /// The header that carries an AWS error's code in the JSON protocols
    /// ([`FailureKind::of_error_code`]), `x-amzn-ErrorType` (lowercase, as `http` names
    /// headers).
    pub const ERROR_TYPE_HEADER: &str = "x-amzn-errortype";

    /// The verdict on an HTTP answer by the AWS SDKs' conventions: what `retry-http`'s doors ask
    /// with `aws2026` (feature `http`).
    ///
    /// - A retry: the statuses of the HTTP status table
    ///   ([`status_verdict`](crate::integrations::http::status_verdict): 408, 429, 500, 502, 503,
    ///   504), and any status whose `x-amzn-ErrorType` names a throttling or transient error
    ///   code ([`FailureKind::of_error_code`]: a `400` with `ThrottlingException`).
    /// - Throttled ([`Verdict::Throttled`](crate::Verdict::Throttled)) for a throttling code, a
    ///   429, or a 503 with `Retry-After`: [`Aws2026`] then waits from its 1 s base and the quota
    ///   takes 5 tokens.
    /// - The server's pause: `x-amz-retry-after` (milliseconds), or without a valid one
    ///   `Retry-After`, which [`Aws2026::delay`] holds to [computed, computed + 5 s].
    /// - Anything else ([`Verdict::Fail`](crate::Verdict::Fail)) is the answer: a success, a
    ///   `404`, a `400` with `ValidationException`.
    ///
    /// The code is read from the header only: a protocol that writes it in the body alone (the
    /// XML protocols: S3, EC2, the query services) is judged by its status, as the table does.
    ///
    /// ```
    /// use http::{HeaderMap, StatusCode};
    /// use retry_runtime::{Aws2026, Verdict};
    /// use std::time::Duration;
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/".parse().unwrap());
    /// assert_eq!(Aws2026::response_verdict(StatusCode::BAD_REQUEST, &headers), Verdict::Throttled);
    ///
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-amz-retry-after", "1500".parse().unwrap());
    /// assert_eq!(
    ///     Aws2026::response_verdict(StatusCode::INTERNAL_SERVER_ERROR, &headers),
    ///     Verdict::RetryAfter(Duration::from_millis(1500)),
    /// );
    /// assert_eq!(Aws2026::response_verdict(StatusCode::BAD_REQUEST, &HeaderMap::new()), Verdict::Fail);
    /// ```
    #[cfg(feature = "http")]
    pub fn response_verdict(status: http::StatusCode, headers: &http::HeaderMap) -> crate::Verdict {
        use crate::Verdict;
        // A success is the answer: one compare, as in the status table.
        if status.as_u16() < 300 {
            return Verdict::Fail;
        }
        let table = crate::integrations::http::status_verdict(status, headers);
        let code = headers
            .get(Self::ERROR_TYPE_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(FailureKind::of_error_code);
        if code.is_none() && !table.is_retry() {
            return Verdict::Fail;
        }
        let throttled = code == Some(FailureKind::ThrottlingError) || table.is_throttled();
        let pause = headers
            .get(Self::RETRY_AFTER_HEADER)
            .and_then(|value| value.to_str().ok())
            .and_then(Self::parse_retry_after)
            .or(table.suggested_pause());
        match (throttled, pause) {
            (true, Some(pause)) => Verdict::ThrottledAfter(pause),
            (true, None) => Verdict::Throttled,
            (false, Some(pause)) => Verdict::RetryAfter(pause),
            (false, None) => Verdict::Retry,
        }
    }

    /// Reads an `x-amz-retry-after` header value: whole milliseconds, ASCII digits only
    /// (surrounding whitespace allowed). Anything else, or a value too large for a `u64`, is
    /// `None`, and the computed delay is used, as the reference does with an invalid header.
    ///
    /// ```
    /// use retry_runtime::Aws2026;
    /// use std::time::Duration;
    ///
    /// assert_eq!(Aws2026::parse_retry_after("1500"), Some(Duration::from_millis(1500)));
    /// assert_eq!(Aws2026::parse_retry_after("invalid"), None);
    /// assert_eq!(Aws2026::parse_retry_after("-5"), None);
    /// ```
    pub fn parse_retry_after(value: &str) -> Option<Duration> {
        let value = value.trim_ascii();
        if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        value.parse().ok().map(Duration::from_millis)
    }
}

/// What [`Aws2026::decide`] says after a retryable failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Aws2026Decision {
    /// Pause for `delay`, then retry. `cost` tokens were taken from the quota: keep them, and
    /// pass them to [`RetryQuota::refund`] if this retry succeeds.
    Retry {
        /// The pause before the retry.
        delay: Duration,
        /// The tokens taken for this retry.
        cost: u32,
    },
    /// The attempt limit is reached: return the error. Nothing was taken from the quota.
    MaxAttempts,
    /// The quota cannot pay for the retry: return the error. A long-polling operation
    /// ([`Aws2026::long_polling`]) pauses for `pause` first; for others it is `None`.
    QuotaExhausted {
        /// The pause before returning the error, for a long-polling operation.
        pause: Option<Duration>,
    },
}

/// The AWS SDKs' updated standard mode as the loop's decision, for every door: `#[retry(aws2026
/// = AWS)]`, `retry_block!`, the [`Retrier`](crate::Retrier)'s
/// [`aws2026`](crate::Retrier::aws2026), the engine's
/// [`Settings::aws2026`](crate::engine::Settings::aws2026). The [`Aws2026`] arithmetic and a
/// [`RetryQuota`] of its own, shared by every call that names it (a `static`).
///
/// With it, after each failure that may be retried the loop asks [`Aws2026::decide`] in place
/// of the policy: the attempt limit ([`Aws2026::max_attempts`], not the policy's `max`), then the
/// quota (14 tokens for a transient failure, 5 for a throttled one, out of 500), then the delay
/// (`random × min(base × 2^(n−1), 20 s)`, with a 50 ms base, or 1 s after a throttling verdict,
/// [`Verdict::Throttled`](crate::Verdict::Throttled); a server's pause,
/// [`Verdict::RetryAfter`](crate::Verdict::RetryAfter) from `x-amz-retry-after`, held to
/// [computed, computed + 5 s]). The quota's refusal ends the loop
/// ([`GiveUpReason::Budget`](crate::GiveUpReason::Budget)); a success gives back 1 token after
/// a first attempt, and only the last retry's cost after retries. The policy's `deadline`
/// still holds, and so do the `budget`, `breaker` and `gate` if given.
///
/// The long-polling rule holds through the loop too: with a long-polling policy
/// ([`Aws2026::long_polling`], SQS `ReceiveMessage`), a failure the empty quota cannot pay for
/// is returned only after the backoff's pause ([`Aws2026Decision::QuotaExhausted`]), without
/// another attempt and without a retry event, so that a loop around the call does not hammer
/// the service; a pause that would end past the policy's `deadline` is not taken. Reaching the
/// attempt limit, a success and an error that is not retried return at once, as the reference
/// says. The loop holds the outcome over that pause, so an async function with `aws2026` has a
/// `Send` future only if its `T` and `E` are `Send` (without `aws2026` the loop holds neither).
///
/// Through `retry-http`'s doors (`HttpRetry::aws2026`) the answers are judged by AWS's
/// conventions as well (`Aws2026::response_verdict`, feature `http`): the throttling error codes
/// of `x-amzn-ErrorType` in any status, and `x-amz-retry-after` as the server's pause.
///
/// ```
/// use retry_runtime::{Aws2026, Aws2026Standard, RetryQuota};
///
/// static S3: Aws2026Standard = Aws2026Standard::new();
/// static DYNAMODB: Aws2026Standard =
///     Aws2026Standard::with(Aws2026::dynamodb(), RetryQuota::new().name("dynamodb"));
/// assert_eq!(S3.quota().available(), 500);
/// assert_eq!(DYNAMODB.policy().get_max_attempts(), 4);
/// ```
#[derive(Debug)]
pub struct Aws2026Standard {
    policy: Aws2026,
    quota: RetryQuota,
    /// A fixed random factor, as the reference's test table fixes `exponential_base`; a draw
    /// per delay when `NaN`.
    random: f64,
}

default_is_new!(Aws2026Standard);

loom_const_fn! {
    impl Aws2026Standard {
        /// The standard mode for most services ([`Aws2026::new`]) with a full quota
        /// ([`RetryQuota::new`]).
        pub fn new() -> Self {
            Self::with(Aws2026::new(), RetryQuota::new())
        }

        /// `policy`'s arithmetic with `quota`.
        pub fn with(policy: Aws2026, quota: RetryQuota) -> Self {
            Self {
                policy,
                quota,
                random: f64::NAN,
            }
        }

        /// Every delay's random factor fixed at `random` (clamped to [0, 1]) instead of drawn:
        /// for tests, as the reference's table fixes it (`1.0` gives the largest delays).
        pub fn fixed_random(mut self, random: f64) -> Self {
            self.random = super::clamp_or(random, 0.0, 1.0, 0.0);
            self
        }
    }
}

impl Aws2026Standard {
    /// The arithmetic.
    pub const fn policy(&self) -> &Aws2026 {
        &self.policy
    }

    /// The quota.
    pub const fn quota(&self) -> &RetryQuota {
        &self.quota
    }

    /// The decision after attempt `attempt` (1 for the first) failed with `verdict`, which
    /// retries: the random factor drawn from the loop's source (the seeded one inside
    /// [`testing::record`](crate::testing::record)) unless fixed.
    pub(crate) fn decide(&self, attempt: u32, verdict: crate::Verdict) -> Aws2026Decision {
        let kind = if verdict.is_throttled() {
            FailureKind::ThrottlingError
        } else {
            FailureKind::TransientError
        };
        let random = if self.random.is_nan() {
            const ONE: u64 = 1 << 53;
            crate::random::with(|draw| draw(0, ONE)) as f64 / ONE as f64
        } else {
            self.random
        };
        self.policy.decide(
            attempt,
            kind,
            &self.quota,
            random,
            verdict.suggested_pause(),
        )
    }
}

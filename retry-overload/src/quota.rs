//! The shared part of the AWS SDKs' standard retry behaviour as updated in 2026
//! (`AWS_NEW_RETRIES_2026`): the kinds of failure it tells apart, and the retry quota that prices
//! them. The delays and the order of the decisions (`Aws2026`, `Aws2026Standard`) are
//! retry-runtime's, beside the verdicts they read.

use crate::sync::{AtomicU64, Ordering};
use std::fmt;

/// Why an attempt failed, as the AWS SDKs' updated standard mode tells failures apart (its
/// "transient errors" and "throttling errors"): a throttled attempt waits longer (a 1 s base
/// against 50 ms, in retry-runtime's `Aws2026::delay`) and costs the [`RetryQuota`] less (5
/// tokens against 14), since the service answered and only asked for less traffic.
///
/// ```
/// use retry_overload::{FailureKind, RetryQuota};
///
/// let quota = RetryQuota::new();
/// assert_eq!(quota.cost(FailureKind::TransientError), 14);
/// assert_eq!(quota.cost(FailureKind::ThrottlingError), 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// A passing failure that says nothing about load: a 500, 502, 503 or 504, a timeout, a
    /// broken connection.
    TransientError,
    /// The service shed the attempt: a 429, an AWS throttling error code (`Throttling`,
    /// `ThrottlingException`, `SlowDown`, ...), gRPC `RESOURCE_EXHAUSTED`.
    ThrottlingError,
}

impl FailureKind {
    /// The AWS SDKs' throttling error codes (aws-sdk-go-v2's `DefaultThrottleErrorCodes`, the same
    /// in the other SDKs): an answer with one of these is a
    /// [throttling error](FailureKind::ThrottlingError), whatever its status (a `400` with
    /// `ThrottlingException` included).
    pub const THROTTLING_CODES: [&str; 14] = [
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        "TransactionInProgressException",
        "RequestLimitExceeded",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    ];

    /// The AWS SDKs' transient error codes besides the statuses 500, 502, 503 and 504
    /// (aws-sdk-go-v2's `DefaultRetryableErrorCodes`): an answer with one of these is a
    /// [transient error](FailureKind::TransientError), whatever its status.
    pub const TRANSIENT_CODES: [&str; 2] = ["RequestTimeout", "RequestTimeoutException"];

    /// The kind of failure an AWS error code names, as the SDKs classify it: one of the
    /// [`THROTTLING_CODES`](FailureKind::THROTTLING_CODES) is throttling, one of the
    /// [`TRANSIENT_CODES`](FailureKind::TRANSIENT_CODES) transient, any other
    /// (`ValidationException`, `AccessDeniedException`, ...) is `None`: not retried for its code.
    ///
    /// The code may be written as an `x-amzn-ErrorType` header or a JSON error's `__type` carries
    /// it: whatever follows the first `:` is dropped
    /// (`ThrottlingException:http://internal.amazon.com/...`), and so is a namespace before a `#`
    /// (`com.amazonaws.dynamodb.v20120810#ThrottlingException`), as the SDKs' protocols sanitize
    /// it; surrounding whitespace is ignored. The comparison is exact, as the SDKs' is
    /// (`throttling` is no code).
    ///
    /// ```
    /// use retry_overload::FailureKind;
    ///
    /// let kind = FailureKind::of_error_code;
    /// assert_eq!(kind("ThrottlingException"), Some(FailureKind::ThrottlingError));
    /// assert_eq!(
    ///     kind("ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/"),
    ///     Some(FailureKind::ThrottlingError),
    /// );
    /// assert_eq!(kind("aws.dynamodb#ProvisionedThroughputExceededException"), Some(FailureKind::ThrottlingError));
    /// assert_eq!(kind("RequestTimeoutException"), Some(FailureKind::TransientError));
    /// assert_eq!(kind("ValidationException"), None);
    /// ```
    pub fn of_error_code(code: &str) -> Option<FailureKind> {
        let code = code.split_once(':').map_or(code, |(code, _)| code);
        let code = code.split_once('#').map_or(code, |(_, name)| name).trim();
        if Self::THROTTLING_CODES.contains(&code) {
            Some(FailureKind::ThrottlingError)
        } else if Self::TRANSIENT_CODES.contains(&code) {
            Some(FailureKind::TransientError)
        } else {
            None
        }
    }
}

/// The retry quota of the AWS SDKs' updated standard mode: a bucket of 500 tokens shared by
/// every call that names it, from which each retry pays 14 tokens, or 5 for a throttled
/// attempt. When it cannot pay, the error is returned without retrying: under a widespread
/// outage a client stops retrying and fails fast.
///
/// Successes pay back: a call that succeeds at its first attempt adds 1 token, and one that
/// succeeds after retries gives back the cost of its *last* retry only, never above the
/// starting capacity. Follows aws-sdk-php's `Aws\Retry\V3\QuotaManager` and the quota levels of
/// aws-sdk-go-v2's `retry2026_test.go` (see retry-runtime's `Aws2026`, whose `decide` takes
/// from it).
///
/// Lock-free (one atomic word) and `const`-constructible, so it can live in a `static`.
///
/// ```
/// use retry_overload::{FailureKind, RetryQuota};
///
/// static QUOTA: RetryQuota = RetryQuota::new().tokens(30);
/// assert_eq!(QUOTA.acquire(FailureKind::TransientError), Some(14));
/// assert_eq!(QUOTA.acquire(FailureKind::TransientError), Some(14));
/// assert_eq!(QUOTA.acquire(FailureKind::TransientError), None); // 2 left
/// assert_eq!(QUOTA.acquire(FailureKind::ThrottlingError), None);
/// QUOTA.refund(Some(14)); // the last retry succeeded
/// assert_eq!(QUOTA.available(), 16);
/// ```
pub struct RetryQuota {
    max: u32,
    retry_cost: u32,
    throttling_cost: u32,
    no_retry_increment: u32,
    available: AtomicU64,
    name: &'static str,
}

default_is_new!(RetryQuota);

loom_const_fn! {
    impl RetryQuota {
        /// A full quota with the defaults: 500 tokens, 14 per retry, 5 per retry of a
        /// throttled attempt, 1 back for a success at the first attempt.
        ///
        /// ```
        /// use retry_overload::RetryQuota;
        ///
        /// static QUOTA: RetryQuota = RetryQuota::new();
        /// assert_eq!(QUOTA.available(), 500);
        /// ```
        pub fn new() -> Self {
            Self {
                max: 500,
                retry_cost: 14,
                throttling_cost: 5,
                no_retry_increment: 1,
                available: AtomicU64::new(500),
                name: "unnamed",
            }
        }

        /// The starting and largest number of tokens: 500.
        pub fn tokens(self, tokens: u32) -> Self {
            Self {
                max: tokens,
                available: AtomicU64::new(tokens as u64),
                ..self
            }
        }
    }
}

impl RetryQuota {
    setters! {
        /// What a retry after a transient failure costs: 14.
        pub fn retry_cost(cost: u32) => self.retry_cost;

        /// What a retry after a throttled attempt costs: 5.
        pub fn throttling_cost(cost: u32) => self.throttling_cost;

        /// What a success at the first attempt adds: 1.
        pub fn no_retry_increment(tokens: u32) => self.no_retry_increment;

        /// Its name, for the metrics and logs that name it: a name of the code's, never anything a
        /// request brings. `unnamed` if none was given.
        pub fn name(name: &'static str) => self.name;
    }

    /// Its name ([`name`](RetryQuota::name)).
    pub const fn get_name(&self) -> &'static str {
        self.name
    }

    /// The starting and largest number of tokens.
    pub const fn get_tokens(&self) -> u32 {
        self.max
    }

    /// What a retry after a failure of `kind` costs.
    pub const fn cost(&self, kind: FailureKind) -> u32 {
        match kind {
            FailureKind::TransientError => self.retry_cost,
            FailureKind::ThrottlingError => self.throttling_cost,
        }
    }

    /// Takes the cost of a retry after a failure of `kind`: `Some(cost)` when there were at
    /// least that many tokens (keep it for [`refund`](RetryQuota::refund)), `None` when there
    /// were not (nothing is taken; return the error).
    pub fn acquire(&self, kind: FailureKind) -> Option<u32> {
        let cost = self.cost(kind);
        // Relaxed: the counter publishes no other data; each update is one atomic
        // read-modify-write, so tokens are neither lost nor made up.
        self.available
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |available| {
                available.checked_sub(u64::from(cost))
            })
            .ok()
            .map(|_| cost)
    }

    /// Reports a success: `last_retry_cost` is what [`acquire`](RetryQuota::acquire) took for
    /// the retry that succeeded (`None` when the first attempt succeeded, which adds
    /// [`no_retry_increment`](RetryQuota::no_retry_increment) instead). Costs of earlier
    /// retries of the same call are not given back. Never above the starting capacity.
    pub fn refund(&self, last_retry_cost: Option<u32>) {
        let amount = u64::from(last_retry_cost.unwrap_or(self.no_retry_increment));
        if amount == 0 {
            return;
        }
        let max = u64::from(self.max);
        let _ = self
            .available
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |available| {
                (available < max).then(|| (available + amount).min(max))
            });
    }

    /// Tokens left.
    pub fn available(&self) -> u32 {
        // Never above `max`, a u32.
        u32::try_from(self.available.load(Ordering::Relaxed)).unwrap_or(u32::MAX)
    }
}

impl fmt::Debug for RetryQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryQuota")
            .field("name", &self.name)
            .field("tokens", &self.max)
            .field("retry_cost", &self.retry_cost)
            .field("throttling_cost", &self.throttling_cost)
            .field("no_retry_increment", &self.no_retry_increment)
            .field("available", &self.available())
            .finish()
    }
}

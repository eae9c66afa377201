//! The AWS SDKs' updated standard retry behaviour (`AWS_NEW_RETRIES_2026`): `Aws2026` and
//! `RetryQuota` against every case of the reference table, aws-sdk-go-v2
//! `aws/retry/retry2026_test.go` (`TestRetry2026StandardMode`, commit `058d9848ce2d`), driven the
//! way that test drives the Go retryer: one step per response, the quota checked after each.
//!
//! The table's responses are HTTP statuses and AWS error codes; the classification is the
//! reference's defaults (`standard.go`): 500, 502, 503 and 504 are transient, the 14 throttling
//! codes throttle, everything else fails at once.

use retry_runtime::{Aws2026, Aws2026Decision, FailureKind, RetryQuota};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Outcome {
    Success,
    RetryRequest,
    MaxAttemptsExceeded,
    RetryQuotaExceeded,
    FailRequest,
}
use Outcome::*;

struct Step {
    status: u16,
    error_code: &'static str,
    retry_after: Option<&'static str>,
    outcome: Outcome,
    quota: Option<u32>,
    delay_ms: u64,
}

/// A step as the Go table writes it: `status`, then the expected outcome, quota and delay.
const fn step(status: u16, outcome: Outcome, quota: Option<u32>, delay_ms: u64) -> Step {
    Step {
        status,
        error_code: "",
        retry_after: None,
        outcome,
        quota,
        delay_ms,
    }
}

const fn throttled(outcome: Outcome, quota: Option<u32>, delay_ms: u64) -> Step {
    Step {
        error_code: "Throttling",
        ..step(400, outcome, quota, delay_ms)
    }
}

const fn with_retry_after(header: &'static str, quota: u32, delay_ms: u64) -> Step {
    Step {
        retry_after: Some(header),
        ..step(500, RetryRequest, Some(quota), delay_ms)
    }
}

struct Case {
    name: &'static str,
    max_attempts: u32,
    initial_tokens: Option<u32>,
    /// The random factor; `None`: random (the case must hold for any draw).
    exponential_base: Option<f64>,
    max_backoff: Option<Duration>,
    service: &'static str,
    long_polling: bool,
    steps: Vec<Step>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            max_attempts: 0,
            initial_tokens: None,
            exponential_base: Some(1.0),
            max_backoff: None,
            service: "",
            long_polling: false,
            steps: Vec::new(),
        }
    }
}

/// `TestRetry2026StandardMode`'s cases, in its order, with its names.
fn reference_table() -> Vec<Case> {
    let q = Some;
    vec![
        Case {
            name: "retry eventually succeeds",
            steps: vec![
                step(500, RetryRequest, q(486), 50),
                step(500, RetryRequest, q(472), 100),
                step(200, Success, q(486), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "fail due to max attempts reached",
            steps: vec![
                step(502, RetryRequest, q(486), 50),
                step(502, RetryRequest, q(472), 100),
                step(502, MaxAttemptsExceeded, q(472), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "retry quota reached after a single retry",
            initial_tokens: Some(14),
            steps: vec![
                step(500, RetryRequest, q(0), 50),
                step(500, RetryQuotaExceeded, q(0), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "no retries at all if retry quota is 0",
            initial_tokens: Some(0),
            steps: vec![step(500, RetryQuotaExceeded, q(0), 0)],
            ..Case::default()
        },
        Case {
            name: "verifying exponential backoff timing",
            max_attempts: 5,
            steps: vec![
                step(500, RetryRequest, q(486), 50),
                step(500, RetryRequest, q(472), 100),
                step(500, RetryRequest, q(458), 200),
                step(500, RetryRequest, q(444), 400),
                step(500, MaxAttemptsExceeded, q(444), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "verify max backoff time",
            max_attempts: 5,
            max_backoff: Some(Duration::from_millis(200)),
            steps: vec![
                step(500, RetryRequest, q(486), 50),
                step(500, RetryRequest, q(472), 100),
                step(500, RetryRequest, q(458), 200),
                step(500, RetryRequest, q(444), 200),
                step(500, MaxAttemptsExceeded, q(444), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "retry stops after retry quota exhaustion",
            max_attempts: 5,
            initial_tokens: Some(20),
            steps: vec![
                step(500, RetryRequest, q(6), 50),
                step(502, RetryQuotaExceeded, q(6), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "retry quota recovery after successful responses",
            max_attempts: 5,
            initial_tokens: Some(30),
            steps: vec![
                step(500, RetryRequest, q(16), 50),
                step(502, RetryRequest, q(2), 100),
                step(200, Success, q(16), 0),
                step(500, RetryRequest, q(2), 50),
                step(200, Success, q(16), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "throttling error token bucket drain and backoff duration",
            steps: vec![
                throttled(RetryRequest, q(495), 1000),
                step(200, Success, q(500), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "dynamodb base backoff and increased retries",
            service: "dynamodb",
            steps: vec![
                step(500, RetryRequest, q(486), 25),
                step(500, RetryRequest, q(472), 50),
                step(500, RetryRequest, q(458), 100),
                step(500, MaxAttemptsExceeded, q(458), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "long-polling backoff when token bucket empty",
            service: "sqs",
            long_polling: true,
            initial_tokens: Some(0),
            steps: vec![step(500, RetryQuotaExceeded, q(0), 50)],
            ..Case::default()
        },
        Case {
            name: "long-polling backoff after throttling error when token bucket empty",
            service: "sqs",
            long_polling: true,
            initial_tokens: Some(0),
            steps: vec![throttled(RetryQuotaExceeded, q(0), 50)],
            ..Case::default()
        },
        Case {
            name: "long-polling max attempts exceeded must not delay",
            service: "sqs",
            long_polling: true,
            max_attempts: 2,
            steps: vec![
                step(500, RetryRequest, q(486), 50),
                step(500, MaxAttemptsExceeded, q(486), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "long-polling success must not delay",
            service: "sqs",
            long_polling: true,
            max_attempts: 2,
            steps: vec![
                step(500, RetryRequest, q(486), 50),
                step(200, Success, q(500), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "long-polling non-retriable errors must not delay",
            service: "sqs",
            long_polling: true,
            max_attempts: 2,
            steps: vec![step(404, FailRequest, None, 0)],
            ..Case::default()
        },
        Case {
            name: "honor x-amz-retry-after header",
            exponential_base: None,
            steps: vec![
                with_retry_after("1500", 486, 1500),
                step(200, Success, q(500), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "x-amz-retry-after minimum is exponential backoff duration",
            steps: vec![
                with_retry_after("0", 486, 50),
                step(200, Success, q(500), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "x-amz-retry-after maximum is 5+exponential backoff duration",
            steps: vec![
                with_retry_after("10000", 486, 5050),
                step(200, Success, q(500), 0),
            ],
            ..Case::default()
        },
        Case {
            name: "invalid x-amz-retry-after falls back to exponential backoff",
            steps: vec![
                with_retry_after("invalid", 486, 50),
                step(200, Success, q(500), 0),
            ],
            ..Case::default()
        },
    ]
}

/// The reference's `DefaultThrottleErrorCodes`.
const THROTTLING_CODES: [&str; 14] = [
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

/// The reference's default classification: `None` for an error that is not retried.
fn classify(step: &Step) -> Option<FailureKind> {
    if THROTTLING_CODES.contains(&step.error_code) {
        Some(FailureKind::ThrottlingError)
    } else if [500, 502, 503, 504].contains(&step.status)
        || ["RequestTimeout", "RequestTimeoutException"].contains(&step.error_code)
    {
        Some(FailureKind::TransientError)
    } else {
        None
    }
}

/// Runs one case with the random factor `random`, as `TestRetry2026StandardMode` runs it.
fn run(case: &Case, random: f64) {
    let name = case.name;
    let mut policy = if case.service == "dynamodb" {
        Aws2026::dynamodb()
    } else {
        Aws2026::new()
    };
    if case.max_attempts != 0 {
        policy = policy.max_attempts(case.max_attempts);
    }
    if let Some(max) = case.max_backoff {
        policy = policy.max_backoff(max);
    }
    let policy = policy.long_polling(case.long_polling);
    let quota = RetryQuota::new().tokens(case.initial_tokens.unwrap_or(500));

    let mut attempt = 0;
    // The cost of the retry that made the current attempt, to give back on its success.
    let mut retry_cost = None;
    for (i, step) in case.steps.iter().enumerate() {
        attempt += 1;
        let retry_after = step.retry_after.and_then(Aws2026::parse_retry_after);
        let expected_delay = Duration::from_millis(step.delay_ms);
        if step.status < 300 {
            assert_eq!(step.outcome, Success, "{name}, step {i}");
            quota.refund(retry_cost.take());
            attempt = 0;
        } else {
            let kind = classify(step);
            let decision =
                kind.map(|kind| policy.decide(attempt, kind, &quota, random, retry_after));
            match step.outcome {
                Success => panic!("{name}, step {i}: an error cannot succeed"),
                FailRequest => assert_eq!(kind, None, "{name}, step {i}"),
                RetryRequest => {
                    let Some(Aws2026Decision::Retry { delay, cost }) = decision else {
                        panic!("{name}, step {i}: expected a retry, got {decision:?}");
                    };
                    assert_eq!(delay, expected_delay, "{name}, step {i}");
                    retry_cost = Some(cost);
                }
                MaxAttemptsExceeded => {
                    assert_eq!(
                        decision,
                        Some(Aws2026Decision::MaxAttempts),
                        "{name}, step {i}"
                    );
                    assert_eq!(attempt, policy.get_max_attempts(), "{name}, step {i}");
                }
                RetryQuotaExceeded => {
                    let pause = (case.long_polling && step.delay_ms != 0).then_some(expected_delay);
                    assert_eq!(
                        decision,
                        Some(Aws2026Decision::QuotaExhausted { pause }),
                        "{name}, step {i}"
                    );
                }
            }
        }
        if let Some(expected) = step.quota {
            assert_eq!(quota.available(), expected, "{name}, step {i}: the quota");
        }
    }
}

#[test]
fn every_case_of_the_reference_table() {
    let table = reference_table();
    assert_eq!(table.len(), 19);
    for case in &table {
        match case.exponential_base {
            Some(random) => run(case, random),
            // The reference draws a random factor here; the case holds for any.
            None => {
                for random in [0.0, 0.25, 0.5, 0.999_999, 1.0] {
                    run(case, random);
                }
            }
        }
    }
}

#[test]
fn the_delay_is_the_random_factor_times_the_capped_exponential() {
    let policy = Aws2026::new();
    let ms = Duration::from_millis;
    // Cap before jitter: at the 11th retry, 50 ms × 2^10 = 51.2 s is capped to 20 s first.
    assert_eq!(
        policy.delay(11, FailureKind::TransientError, 0.5, None),
        ms(10_000)
    );
    assert_eq!(
        policy.delay(3, FailureKind::ThrottlingError, 0.25, None),
        ms(1000)
    );
    // The retry-after window is above the jittered delay, and not capped by max_backoff.
    assert_eq!(
        policy.delay(11, FailureKind::TransientError, 0.5, Some(ms(60_000))),
        ms(15_000)
    );
    // Out-of-range factors and attempt numbers never panic.
    assert_eq!(
        policy.delay(1, FailureKind::TransientError, f64::NAN, None),
        ms(0)
    );
    assert_eq!(
        policy.delay(1, FailureKind::TransientError, 7.0, None),
        ms(50)
    );
    assert_eq!(
        policy.delay(0, FailureKind::TransientError, 1.0, None),
        ms(50)
    );
    assert_eq!(
        policy.delay(u32::MAX, FailureKind::ThrottlingError, 1.0, None),
        ms(20_000)
    );
    let endless = policy.max_backoff(Duration::MAX);
    assert!(endless.delay(u32::MAX, FailureKind::TransientError, 1.0, None) > ms(1_000_000_000));
    assert_eq!(
        endless.delay(1, FailureKind::TransientError, 1.0, Some(Duration::MAX)),
        ms(5050)
    );
}

#[test]
fn a_first_attempt_success_adds_one_token_up_to_the_capacity() {
    let quota = RetryQuota::new().tokens(30);
    assert_eq!(quota.acquire(FailureKind::ThrottlingError), Some(5));
    quota.refund(None);
    assert_eq!(quota.available(), 26);
    for _ in 0..10 {
        quota.refund(None);
    }
    assert_eq!(quota.available(), 30);
    // A success after two retries gives back the last one's cost only.
    assert_eq!(quota.acquire(FailureKind::TransientError), Some(14));
    assert_eq!(quota.acquire(FailureKind::ThrottlingError), Some(5));
    quota.refund(Some(5));
    assert_eq!(quota.available(), 16);
}

#[test]
fn the_retry_after_header_is_read_as_whole_milliseconds() {
    let parse = Aws2026::parse_retry_after;
    assert_eq!(parse(" 250 "), Some(Duration::from_millis(250)));
    for invalid in [
        "",
        " ",
        "1.5",
        "1e3",
        "-1",
        "+5",
        "99999999999999999999999",
        "5s",
    ] {
        assert_eq!(parse(invalid), None, "{invalid:?}");
    }
}

#[test]
fn concurrent_retries_never_overdraw_the_quota() {
    static QUOTA: RetryQuota = RetryQuota::new();
    let taken: u32 = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    (0..100)
                        .filter_map(|_| QUOTA.acquire(FailureKind::TransientError))
                        .sum::<u32>()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("no panic"))
            .sum()
    });
    // 500 tokens pay for 35 retries of 14 (490), and 10 are left.
    assert_eq!((taken, QUOTA.available()), (490, 10));
}

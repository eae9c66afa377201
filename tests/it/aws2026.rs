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
fn error_codes_are_read_in_the_forms_the_protocols_write_them() {
    let kind = FailureKind::of_error_code;
    assert_eq!(FailureKind::THROTTLING_CODES, THROTTLING_CODES);
    for code in THROTTLING_CODES {
        for form in [
            code.to_string(),
            format!(" {code} "),
            format!("{code}:http://internal.amazon.com/coral/com.amazon.coral.availability/"),
            format!("com.amazonaws.dynamodb.v20120810#{code}"),
            format!("aws.protocoltests#{code}:http://internal.amazon.com/"),
        ] {
            assert_eq!(kind(&form), Some(FailureKind::ThrottlingError), "{form}");
        }
    }
    for code in ["RequestTimeout", "RequestTimeoutException"] {
        assert_eq!(kind(code), Some(FailureKind::TransientError), "{code}");
    }
    // Exact, as the SDKs compare: no other code, no other case, nothing after a `#` missing.
    for other in [
        "",
        "ValidationException",
        "throttling",
        "THROTTLING",
        "ThrottlingExceptions",
        "InternalFailure",
        "Throttling#",
    ] {
        assert_eq!(kind(other), None, "{other:?}");
    }
}

#[test]
fn answers_are_judged_by_the_sdks_conventions() {
    use http::{HeaderMap, HeaderValue, StatusCode};
    use retry_runtime::Verdict;
    let verdict = |status: u16, headers: &[(&'static str, &'static [u8])]| {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                *name,
                HeaderValue::from_bytes(value).expect("a header value"),
            );
        }
        let status = StatusCode::from_u16(status).expect("a status");
        Aws2026::response_verdict(status, &map)
    };
    let ms = Duration::from_millis;
    let throttling: (&str, &[u8]) = ("x-amzn-errortype", b"ThrottlingException");
    // A throttling code in any error status, with or without a pause.
    assert_eq!(verdict(400, &[throttling]), Verdict::Throttled);
    assert_eq!(verdict(500, &[throttling]), Verdict::Throttled);
    assert_eq!(
        verdict(400, &[throttling, ("x-amz-retry-after", b"1500")]),
        Verdict::ThrottledAfter(ms(1500))
    );
    // x-amz-retry-after before Retry-After; Retry-After when it is missing or invalid.
    assert_eq!(
        verdict(503, &[("x-amz-retry-after", b"250"), ("retry-after", b"2")]),
        Verdict::ThrottledAfter(ms(250))
    );
    assert_eq!(
        verdict(
            502,
            &[("x-amz-retry-after", b"soon"), ("retry-after", b"2")]
        ),
        Verdict::RetryAfter(ms(2000))
    );
    assert_eq!(verdict(502, &[]), Verdict::Retry);
    assert_eq!(verdict(429, &[]), Verdict::Throttled);
    // A pause alone retries nothing; a success is the answer whatever its headers say.
    assert_eq!(
        verdict(400, &[("x-amz-retry-after", b"100")]),
        Verdict::Fail
    );
    assert_eq!(verdict(200, &[throttling]), Verdict::Fail);
    assert_eq!(
        verdict(400, &[("x-amzn-errortype", b"ValidationException")]),
        Verdict::Fail
    );
    assert_eq!(
        verdict(404, &[("x-amzn-errortype", b"RequestTimeoutException")]),
        Verdict::Retry
    );
    // A value that is not text is no code.
    assert_eq!(
        verdict(400, &[("x-amzn-errortype", b"Throttling\xff")]),
        Verdict::Fail
    );
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

// ---- through the loop: `aws2026 = ...` on tokio's paused clock ----

mod through_the_loop {
    use retry_runtime::{
        Aws2026, Aws2026Standard, GiveUp, GiveUpReason, Policy, Retrier, RetryQuota, Verdict, retry,
    };
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;
    use tokio::time::Instant;

    const MS: Duration = Duration::from_millis(1);

    /// An answer of the service, as the reference's table writes it.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Answer {
        Fine,
        /// A 500, 502, 503 or 504.
        Transient,
        /// A throttling error code.
        Throttled,
        /// A 500 with `x-amz-retry-after` (milliseconds).
        After(u64),
        /// A 404: not retried.
        Missing,
    }

    fn classify(answer: &Answer) -> Verdict {
        match answer {
            Fine => Verdict::Fail,
            Transient => Verdict::Retry,
            Throttled => Verdict::Throttled,
            After(ms) => Verdict::RetryAfter(Duration::from_millis(*ms)),
            Missing => Verdict::Fail,
        }
    }

    /// One call through the `Retrier` with `aws`: the service answers `answers` in turn. The
    /// result, the attempts' start times, and the quota after the call.
    async fn call(aws: &Aws2026Standard, answers: &[Answer]) -> (Result<u32, Answer>, Vec<u64>) {
        let t0 = Instant::now();
        let starts = Mutex::new(Vec::new());
        let n = AtomicU32::new(0);
        let policy = Policy::new();
        let result = Retrier::<u32, Answer>::new(&policy)
            .on(classify)
            .aws2026(aws)
            .run_async(|| {
                starts
                    .lock()
                    .expect("not poisoned")
                    .push(t0.elapsed().as_millis() as u64);
                let i = n.fetch_add(1, Ordering::Relaxed);
                let answer = answers[i as usize];
                async move { if answer == Fine { Ok(i) } else { Err(answer) } }
            })
            .await;
        (result, starts.into_inner().expect("not poisoned"))
    }

    use Answer::*;

    #[tokio::test(start_paused = true)]
    async fn retry_eventually_succeeds_and_refunds_the_last_retry() {
        let aws = Aws2026Standard::new().fixed_random(1.0);
        assert_eq!(
            call(&aws, &[Transient, Transient, Fine]).await,
            (Ok(2), vec![0, 50, 150])
        );
        assert_eq!(aws.quota().available(), 486);
    }

    #[tokio::test(start_paused = true)]
    async fn max_attempts_reached() {
        let aws = Aws2026Standard::new().fixed_random(1.0);
        let (result, starts) = call(&aws, &[Transient; 3]).await;
        assert_eq!((result, starts), (Err(Transient), vec![0, 50, 150]));
        assert_eq!(aws.quota().available(), 472);
    }

    #[tokio::test(start_paused = true)]
    async fn the_quota_ends_the_loop_after_a_single_retry() {
        let aws =
            Aws2026Standard::with(Aws2026::new(), RetryQuota::new().tokens(14)).fixed_random(1.0);
        assert_eq!(
            call(&aws, &[Transient; 3]).await,
            (Err(Transient), vec![0, 50])
        );
        assert_eq!(aws.quota().available(), 0);
        // No retries at all once it is empty.
        assert_eq!(call(&aws, &[Transient; 3]).await, (Err(Transient), vec![0]));
    }

    #[tokio::test(start_paused = true)]
    async fn exponential_delays_and_the_cap_before_the_random_factor() {
        let five = Aws2026Standard::with(Aws2026::new().max_attempts(5), RetryQuota::new())
            .fixed_random(1.0);
        let (_, starts) = call(&five, &[Transient; 5]).await;
        // 50, 100, 200, 400 ms apart.
        assert_eq!(starts, [0, 50, 150, 350, 750]);
        assert_eq!(five.quota().available(), 444);
        let capped = Aws2026Standard::with(
            Aws2026::new().max_attempts(5).max_backoff(200 * MS),
            RetryQuota::new(),
        )
        .fixed_random(1.0);
        let (_, starts) = call(&capped, &[Transient; 5]).await;
        assert_eq!(starts, [0, 50, 150, 350, 550]);
        // Half the random factor: half the delay.
        let half = Aws2026Standard::new().fixed_random(0.5);
        assert_eq!(call(&half, &[Transient; 3]).await.1, [0, 25, 75]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttle_waits_from_one_second_and_costs_five() {
        let aws = Aws2026Standard::new().fixed_random(1.0);
        assert_eq!(call(&aws, &[Throttled, Fine]).await, (Ok(1), vec![0, 1000]));
        // 500 − 5 + 5.
        assert_eq!(aws.quota().available(), 500);
        assert_eq!(call(&aws, &[Throttled; 3]).await.0, Err(Throttled));
        assert_eq!(aws.quota().available(), 490);
    }

    #[tokio::test(start_paused = true)]
    async fn dynamodb_has_a_25_ms_base_and_four_attempts() {
        let aws = Aws2026Standard::with(Aws2026::dynamodb(), RetryQuota::new()).fixed_random(1.0);
        assert_eq!(
            call(&aws, &[Transient; 4]).await,
            (Err(Transient), vec![0, 25, 75, 175])
        );
        assert_eq!(aws.quota().available(), 458);
    }

    #[tokio::test(start_paused = true)]
    async fn the_servers_pause_is_held_to_the_computed_delay_and_five_seconds_above() {
        let aws = Aws2026Standard::new().fixed_random(1.0);
        // 1500 → 1500, 0 → 50, 10000 → 5050 (the computed 50 ms + 5 s).
        for (ms, delay) in [(1500, 1500), (0, 50), (10_000, 5050)] {
            assert_eq!(call(&aws, &[After(ms), Fine]).await.1, [0, delay], "{ms}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_quota_recovers_after_successes() {
        let aws =
            Aws2026Standard::with(Aws2026::new().max_attempts(5), RetryQuota::new().tokens(30))
                .fixed_random(1.0);
        assert_eq!(call(&aws, &[Transient, Transient, Fine]).await.0, Ok(2));
        // 30 − 14 − 14 + 14: only the last retry's cost comes back.
        assert_eq!(aws.quota().available(), 16);
        assert_eq!(call(&aws, &[Transient, Fine]).await.0, Ok(1));
        assert_eq!(aws.quota().available(), 16);
        // A first-try success adds one, up to the starting capacity.
        assert_eq!(call(&aws, &[Fine]).await.0, Ok(0));
        assert_eq!(aws.quota().available(), 17);
    }

    static S3: Aws2026Standard = Aws2026Standard::new().fixed_random(1.0);
    static HEARD: Mutex<Vec<GiveUpReason>> = Mutex::new(Vec::new());
    static CALLS: AtomicU32 = AtomicU32::new(0);

    fn heard(_: &Answer, why: &GiveUp) {
        HEARD.lock().expect("not poisoned").push(why.reason);
    }

    #[retry(aws2026 = S3, on = classify, on_give_up = heard)]
    async fn get_object() -> Result<u32, Answer> {
        CALLS.fetch_add(1, Ordering::Relaxed);
        Err(Transient)
    }

    // ---- the long-polling rule, through the loop (`TestLongPollingContextBackoff`) ----

    /// SQS `ReceiveMessage`'s policy with `tokens` in its quota and the largest random factor.
    fn receive_message(attempts: u32, tokens: u32) -> Aws2026Standard {
        Aws2026Standard::with(
            Aws2026::new().max_attempts(attempts).long_polling(true),
            RetryQuota::new().tokens(tokens),
        )
        .fixed_random(1.0)
    }

    /// `call` with `on_give_up` listening: the result, the attempts' starts, the time the call
    /// took, and why it gave up, if it did.
    async fn call_heard(
        aws: &Aws2026Standard,
        policy: &Policy,
        answers: &[Answer],
    ) -> (Result<u32, Answer>, Vec<u64>, Duration, Vec<GiveUpReason>) {
        let t0 = Instant::now();
        let starts = Mutex::new(Vec::new());
        let heard = Mutex::new(Vec::new());
        let n = AtomicU32::new(0);
        let result = Retrier::<u32, Answer>::new(policy)
            .on(classify)
            .aws2026(aws)
            .on_give_up(|_: &Answer, why: &GiveUp| {
                heard.lock().expect("not poisoned").push(why.reason);
            })
            .run_async(|| {
                starts
                    .lock()
                    .expect("not poisoned")
                    .push(t0.elapsed().as_millis() as u64);
                let i = n.fetch_add(1, Ordering::Relaxed);
                let answer = answers[i as usize];
                async move { if answer == Fine { Ok(i) } else { Err(answer) } }
            })
            .await;
        let starts = starts.into_inner().expect("not poisoned");
        let heard = heard.into_inner().expect("not poisoned");
        (result, starts, t0.elapsed(), heard)
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_polling_call_with_an_empty_quota_pauses_for_the_backoff_before_its_error() {
        // The reference's case: quota 0, 3 attempts, a 500: no retry, but the backoff (50 ms
        // with the random factor at 1) is slept before the error is returned.
        let aws = receive_message(3, 0);
        let (result, starts, took, heard) =
            call_heard(&aws, &Policy::new(), &[Transient, Fine]).await;
        assert_eq!(result, Err(Transient));
        assert_eq!(starts, [0], "no second attempt");
        assert_eq!(took, 50 * MS);
        assert_eq!(heard, [GiveUpReason::Budget]);
        assert_eq!(aws.quota().available(), 0);
        // After a throttle too, with the transient base (the reference passes no error to the
        // backoff there): 50 ms, not 1 s.
        let (result, _, took, _) = call_heard(&aws, &Policy::new(), &[Throttled, Fine]).await;
        assert_eq!((result, took), (Err(Throttled), 50 * MS));
        // With the server's pause, held to [computed, computed + 5 s] as any.
        let (_, _, took, _) = call_heard(&aws, &Policy::new(), &[After(1500), Fine]).await;
        assert_eq!(took, 1500 * MS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_is_not_long_polling_returns_at_once_when_the_quota_is_empty() {
        let aws =
            Aws2026Standard::with(Aws2026::new(), RetryQuota::new().tokens(0)).fixed_random(1.0);
        let (result, starts, took, heard) =
            call_heard(&aws, &Policy::new(), &[Transient, Fine]).await;
        assert_eq!(
            (result, starts, took),
            (Err(Transient), vec![0], Duration::ZERO)
        );
        assert_eq!(heard, [GiveUpReason::Budget]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_polling_call_does_not_pause_after_its_last_attempt_a_success_or_an_answer() {
        // "long-polling max attempts exceeded must not delay": 2 attempts, 50 ms apart, and
        // nothing after the second.
        let aws = receive_message(2, 500);
        let (result, starts, took, heard) =
            call_heard(&aws, &Policy::new(), &[Transient, Transient]).await;
        assert_eq!((result, starts), (Err(Transient), vec![0, 50]));
        assert_eq!((took, heard), (50 * MS, vec![GiveUpReason::Exhausted]));
        // "long-polling success must not delay".
        let (result, _, took, _) = call_heard(&aws, &Policy::new(), &[Transient, Fine]).await;
        assert_eq!((result, took), (Ok(1), 50 * MS));
        // "long-polling non-retriable errors must not delay".
        let (result, _, took, heard) = call_heard(&aws, &Policy::new(), &[Missing]).await;
        assert_eq!(
            (result, took, heard),
            (Err(Missing), Duration::ZERO, vec![])
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_polling_pause_that_would_pass_the_deadline_is_not_taken() {
        let aws = receive_message(3, 0);
        let policy = Policy::new().deadline(40 * MS);
        let (result, _, took, heard) = call_heard(&aws, &policy, &[Transient, Fine]).await;
        assert_eq!((result, took), (Err(Transient), Duration::ZERO));
        assert_eq!(heard, [GiveUpReason::Budget]);
    }

    #[test]
    fn a_sync_long_polling_call_pauses_too() {
        let aws = receive_message(3, 0);
        let policy = Policy::new();
        let calls = AtomicU32::new(0);
        let (result, pauses) = retry_runtime::testing::record(|| {
            Retrier::<u32, Answer>::new(&policy)
                .on(classify)
                .aws2026(&aws)
                .run(|| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    Err(Transient)
                })
        });
        assert_eq!((result, pauses), (Err(Transient), vec![50 * MS]));
        assert_eq!(calls.load(Ordering::Relaxed), 1);
    }

    static SQS: Aws2026Standard = Aws2026Standard::with(
        Aws2026::new().long_polling(true),
        RetryQuota::new().tokens(0).name("sqs"),
    )
    .fixed_random(1.0);
    static RECEIVED: AtomicU32 = AtomicU32::new(0);
    static RECEIVED_SYNC: AtomicU32 = AtomicU32::new(0);

    #[retry(aws2026 = SQS, on = classify)]
    async fn receive() -> Result<u32, Answer> {
        RECEIVED.fetch_add(1, Ordering::Relaxed);
        Err(Transient)
    }

    #[retry(aws2026 = SQS, on = classify)]
    fn receive_blocking() -> Result<u32, Answer> {
        RECEIVED_SYNC.fetch_add(1, Ordering::Relaxed);
        Err(Transient)
    }

    #[tokio::test(start_paused = true)]
    async fn the_attribute_pauses_a_long_polling_call_whose_quota_is_empty() {
        let t0 = Instant::now();
        assert_eq!(receive().await, Err(Transient));
        assert_eq!(RECEIVED.load(Ordering::Relaxed), 1);
        assert_eq!(t0.elapsed(), 50 * MS);
        let (result, pauses) = retry_runtime::testing::record(receive_blocking);
        assert_eq!((result, pauses), (Err(Transient), vec![50 * MS]));
        assert_eq!(RECEIVED_SYNC.load(Ordering::Relaxed), 1);
    }

    static SHARED: retry_runtime::RetryBudget = retry_runtime::RetryBudget::new();

    /// An error that is not `Send`: a loop without `aws2026` holds no outcome over a pause, so
    /// the future stays `Send` (only a long-polling pause holds one).
    #[retry(budget = SHARED, on = |_| true)]
    async fn not_send_error() -> Result<u32, std::rc::Rc<u32>> {
        tokio::task::yield_now().await;
        Ok(1)
    }

    #[test]
    fn without_aws2026_the_future_holds_no_outcome_and_stays_send() {
        fn assert_send<F: Send>(_: &F) {}
        assert_send(&not_send_error());
    }

    #[tokio::test(start_paused = true)]
    async fn the_attribute_takes_the_preset() {
        let t0 = Instant::now();
        assert_eq!(get_object().await, Err(Transient));
        // 3 attempts (not the policy's 4), 50 + 100 ms apart.
        assert_eq!(CALLS.load(Ordering::Relaxed), 3);
        assert_eq!(t0.elapsed(), 150 * MS);
        assert_eq!(S3.quota().available(), 472);
        assert_eq!(
            *HEARD.lock().expect("not poisoned"),
            [GiveUpReason::Exhausted]
        );
    }
}

// ---- through the HTTP doors: the tower layer and the reqwest middleware, against the loopback
// server of `tower_layer` ----

mod through_the_http_door {
    use crate::tower_layer::{PAID, TestBody, full, scripted};
    use http::{Method, Request, Response, StatusCode};
    use hyper_util::client::legacy::Client;
    use hyper_util::client::legacy::connect::HttpConnector;
    use hyper_util::rt::TokioExecutor;
    use retry_http::reqwest::RetryMiddleware;
    use retry_http::tower::RetryLayer;
    use retry_http::{HttpRetry, ReplayBody};
    use retry_runtime::{
        Aws2026, Aws2026Standard, FailureKind, GiveUp, GiveUpReason, Jitter, Policy, RetryQuota,
    };
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use tokio::time::Instant;
    use tower::{ServiceBuilder, ServiceExt};

    const MS: Duration = Duration::from_millis(1);

    /// A scripted answer that lives as long as the test binary (the server's script is
    /// `'static`).
    fn answer(status: &str, headers: &[(&str, &str)]) -> &'static str {
        let headers: String = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        let text = format!("HTTP/1.1 {status}\r\n{headers}content-length: 0\r\n\r\n");
        Box::leak(text.into_boxed_str())
    }

    fn script(answers: Vec<&'static str>) -> &'static [&'static str] {
        Box::leak(answers.into_boxed_slice())
    }

    /// The standard mode with the reference table's random factor (1: the largest delays).
    fn standard() -> Arc<Aws2026Standard> {
        Arc::new(Aws2026Standard::new().fixed_random(1.0))
    }

    /// A policy whose own pauses (1 s, no jitter) tell them apart from the standard mode's.
    fn policy() -> Policy {
        Policy::new()
            .max(2)
            .base(Duration::from_secs(1))
            .jitter(Jitter::None)
    }

    /// The tower layer over hyper's client: the response, how many requests the server saw, and
    /// the time the call took on tokio's paused clock.
    async fn through_tower(
        config: HttpRetry,
        answers: &'static [&'static str],
    ) -> (StatusCode, usize, Duration) {
        let (url, received) = scripted(answers).await;
        let client: Client<HttpConnector, ReplayBody<TestBody>> =
            Client::builder(TokioExecutor::new()).build_http();
        let service = ServiceBuilder::new()
            .layer(RetryLayer::new(config))
            .service_fn(move |request: Request<ReplayBody<TestBody>>| client.request(request));
        let request = Request::builder()
            .method(Method::GET)
            .uri(url)
            .body(full(""))
            .expect("a valid request");
        let started = Instant::now();
        let response: Response<_> = service.oneshot(request).await.expect("an answer");
        let took = started.elapsed();
        let received = received.lock().expect("the log").len();
        (response.status(), received, took)
    }

    #[tokio::test(start_paused = true)]
    async fn x_amz_retry_after_is_the_pause_held_as_the_reference_holds_it() {
        // The reference's four cases: "honor x-amz-retry-after header" (1500), its minimum (0:
        // the computed 50 ms), its maximum (10000: the computed 50 ms + 5 s), and an invalid
        // value (the computed delay).
        for (header, waited) in [("1500", 1500), ("0", 50), ("10000", 5050), ("invalid", 50)] {
            let aws = standard();
            let failed = answer(
                "500 Internal Server Error",
                &[("x-amz-retry-after", header)],
            );
            let config = HttpRetry::new(policy()).aws2026(Arc::clone(&aws));
            let (status, sent, took) = through_tower(config, script(vec![failed, PAID])).await;
            assert_eq!((status, sent), (StatusCode::OK, 2), "{header}");
            assert_eq!(took, waited * MS, "{header}");
            // 500 − 14 for the retry, + 14 for its success.
            assert_eq!(aws.quota().available(), 500, "{header}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn every_throttling_code_of_the_sdks_is_a_throttled_attempt_in_any_status() {
        let codes = FailureKind::THROTTLING_CODES;
        assert_eq!(codes, super::THROTTLING_CODES, "the reference's list");
        for code in codes {
            for form in [
                code.to_string(),
                format!("{code}:http://internal.amazon.com/coral/com.amazon.coral.availability/"),
            ] {
                let aws = standard();
                let throttled = answer("400 Bad Request", &[("x-amzn-ErrorType", &form)]);
                let config = HttpRetry::new(policy()).aws2026(Arc::clone(&aws));
                let (status, sent, took) =
                    through_tower(config, script(vec![throttled, PAID])).await;
                // Retried after the throttling base (1 s), at 5 tokens.
                assert_eq!(
                    (status, sent, took),
                    (StatusCode::OK, 2, 1000 * MS),
                    "{form}"
                );
                assert_eq!(aws.quota().available(), 500, "{form}");
            }
        }
        // Three throttles: 1 s and 2 s apart, 5 tokens each, the last returned.
        let aws = standard();
        let throttled = answer(
            "400 Bad Request",
            &[("x-amzn-ErrorType", "ThrottlingException")],
        );
        let config = HttpRetry::new(policy()).aws2026(Arc::clone(&aws));
        let (status, sent, took) = through_tower(config, script(vec![throttled])).await;
        assert_eq!(
            (status, sent, took),
            (StatusCode::BAD_REQUEST, 3, 3000 * MS)
        );
        assert_eq!(aws.quota().available(), 490);
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_code_that_is_not_retried_is_the_answer_and_a_timeout_code_is_transient() {
        let aws = standard();
        let invalid = answer(
            "400 Bad Request",
            &[("x-amzn-ErrorType", "ValidationException")],
        );
        let config = HttpRetry::new(policy()).aws2026(Arc::clone(&aws));
        let (status, sent, took) = through_tower(config, script(vec![invalid, PAID])).await;
        assert_eq!(
            (status, sent, took),
            (StatusCode::BAD_REQUEST, 1, Duration::ZERO)
        );
        // `RequestTimeoutException`: transient, 50 ms and 14 tokens.
        let timeout = answer(
            "400 Bad Request",
            &[("x-amzn-ErrorType", "RequestTimeoutException")],
        );
        let config = HttpRetry::new(policy()).aws2026(Arc::clone(&aws));
        let (status, sent, took) = through_tower(config, script(vec![timeout, timeout])).await;
        assert_eq!((status, sent, took), (StatusCode::BAD_REQUEST, 3, 150 * MS));
        assert_eq!(aws.quota().available(), 500 - 28);
    }

    #[tokio::test(start_paused = true)]
    async fn without_aws2026_the_aws_headers_change_nothing() {
        // The policy's 1 s, not the header's 1.5 s.
        let failed = answer(
            "500 Internal Server Error",
            &[("x-amz-retry-after", "1500")],
        );
        let (status, sent, took) =
            through_tower(HttpRetry::new(policy()), script(vec![failed, PAID])).await;
        assert_eq!((status, sent, took), (StatusCode::OK, 2, 1000 * MS));
        // A 400 is the answer, whatever its error type says.
        let throttled = answer(
            "400 Bad Request",
            &[("x-amzn-ErrorType", "ThrottlingException")],
        );
        let (status, sent, took) =
            through_tower(HttpRetry::new(policy()), script(vec![throttled, PAID])).await;
        assert_eq!(
            (status, sent, took),
            (StatusCode::BAD_REQUEST, 1, Duration::ZERO)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_polling_request_with_an_empty_quota_pauses_before_its_answer() {
        // SQS ReceiveMessage over HTTP: quota 0, a 500. One request, the answer returned after
        // the backoff (50 ms), not at once; no retry counted; `on_give_up` hears the quota.
        let aws = Arc::new(
            Aws2026Standard::with(
                Aws2026::new().long_polling(true),
                RetryQuota::new().tokens(0),
            )
            .fixed_random(1.0),
        );
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&heard);
        let config = HttpRetry::new(policy())
            .aws2026(aws)
            .on_give_up(move |why: &GiveUp| log.lock().expect("the log").push(why.reason));
        let counters = config.counters();
        let failed = answer("500 Internal Server Error", &[]);
        let (status, sent, took) = through_tower(config, script(vec![failed, PAID])).await;
        assert_eq!(
            (status, sent, took),
            (StatusCode::INTERNAL_SERVER_ERROR, 1, 50 * MS)
        );
        assert_eq!(counters.retries(), 0);
        assert_eq!(*heard.lock().expect("the log"), [GiveUpReason::Budget]);
    }

    /// The reqwest middleware: the response's status, the requests the server saw, and the
    /// pauses (recorded, not slept).
    async fn through_reqwest(
        config: HttpRetry,
        answers: &'static [&'static str],
    ) -> (u16, usize, Vec<Duration>) {
        let (url, received) = scripted(answers).await;
        let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
            .with(RetryMiddleware::new(config))
            .build();
        let (response, pauses) =
            retry_runtime::testing::record_async(client.get(&url).send()).await;
        let status = response.expect("an answer").status().as_u16();
        let received = received.lock().expect("the log").len();
        (status, received, pauses)
    }

    #[tokio::test]
    async fn the_reqwest_middleware_reads_the_same_headers() {
        for (header, waited) in [("1500", 1500), ("10000", 5050)] {
            let failed = answer(
                "500 Internal Server Error",
                &[("x-amz-retry-after", header)],
            );
            let config = HttpRetry::new(policy()).aws2026(standard());
            let outcome = through_reqwest(config, script(vec![failed, PAID])).await;
            assert_eq!(outcome, (200, 2, vec![waited * MS]), "{header}");
        }
        let throttled = answer(
            "400 Bad Request",
            &[(
                "x-amzn-ErrorType",
                "ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/",
            )],
        );
        let config = HttpRetry::new(policy()).aws2026(standard());
        let outcome = through_reqwest(config, script(vec![throttled, PAID])).await;
        assert_eq!(outcome, (200, 2, vec![1000 * MS]));
        // A long-polling request with an empty quota: one request, one pause, its answer.
        let aws = Arc::new(
            Aws2026Standard::with(
                Aws2026::new().long_polling(true),
                RetryQuota::new().tokens(0),
            )
            .fixed_random(1.0),
        );
        let failed = answer("503 Service Unavailable", &[]);
        let config = HttpRetry::new(policy()).aws2026(aws);
        let outcome = through_reqwest(config, script(vec![failed, PAID])).await;
        assert_eq!(outcome, (503, 1, vec![50 * MS]));
    }
}

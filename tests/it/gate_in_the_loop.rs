//! `gate = G` in the one loop: every door (the attribute, `retry_block!`, the `Retrier`, the
//! engine's `Settings`) asks the `AdmissionGate` before every attempt, first tries included;
//! a shed attempt never reaches the body and is its own error (`E::from(Rejected)`), which a
//! fallback hears with its reason; every attempt that ran teaches the gate (a throttling
//! verdict as shed load); a dropped call gives its slot back. Under tokio's paused clock, with
//! exact call counts, virtual times and gate states.
//!
//! Each test has its own static gate, since tests run in parallel.

use retry_runtime::TokioTimer;
use retry_runtime::engine::{self, DynHooks, Settings};
use retry_runtime::{
    AdaptiveThrottling, AdmissionGate, Aimd, CircuitOpen, ClientRateLimit, Elapsed, GateMode,
    GateOutcome, GateState, GiveUp, GiveUpReason, Jitter, Policy, RejectReason, Rejected, Retrier,
    Verdict, retry, retry_block,
};
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

#[derive(Debug, PartialEq)]
enum StockError {
    /// The service shed the call (a 429).
    Throttled,
    /// A passing failure that says nothing about load (a 500).
    Flaky,
    Shed(Rejected),
}

impl From<Elapsed> for StockError {
    fn from(_: Elapsed) -> Self {
        StockError::Flaky
    }
}

impl From<CircuitOpen> for StockError {
    fn from(_: CircuitOpen) -> Self {
        StockError::Flaky
    }
}

impl From<Rejected> for StockError {
    fn from(rejected: Rejected) -> Self {
        StockError::Shed(rejected)
    }
}

fn classify(error: &StockError) -> Verdict {
    match error {
        StockError::Throttled => Verdict::Throttled,
        StockError::Flaky => Verdict::Retry,
        StockError::Shed(_) => Verdict::Fail,
    }
}

fn concurrency(gate: &AdmissionGate) -> (u32, u32) {
    match gate.state(std::time::Instant::now()) {
        GateState::Concurrency { limit, in_flight } => (limit, in_flight),
        other => panic!("not a concurrency limit: {other:?}"),
    }
}

// ---- the attribute ----

static ONE_AT_A_TIME: AdmissionGate =
    AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1)).name("stock");
static ONE_AT_A_TIME_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(gate = ONE_AT_A_TIME, on = classify, jitter = none)]
async fn reserve(latency: Duration) -> Result<u32, StockError> {
    ONE_AT_A_TIME_CALLS.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(latency).await;
    Ok(7)
}

#[tokio::test(start_paused = true)]
async fn a_first_try_beyond_the_limit_is_shed_without_calling() {
    let t0 = Instant::now();
    let (slow, shed) = tokio::join!(reserve(100 * MS), async {
        // The slow call holds the only slot while this one asks.
        tokio::time::sleep(10 * MS).await;
        reserve(MS).await
    });
    assert_eq!(slow, Ok(7));
    assert_eq!(
        shed,
        Err(StockError::Shed(Rejected::new(
            GateMode::Aimd,
            RejectReason::ConcurrencyLimit { limit: 1 },
            "stock"
        )))
    );
    assert_eq!(
        ONE_AT_A_TIME_CALLS.load(Ordering::Relaxed),
        1,
        "the shed call never ran"
    );
    assert_eq!(t0.elapsed(), 100 * MS);
    // The slot came back with the answer, which raised the limit (+1: the call used the whole
    // limit): the next call runs.
    assert_eq!(concurrency(&ONE_AT_A_TIME), (2, 0));
    assert_eq!(reserve(MS).await, Ok(7));
    assert_eq!(ONE_AT_A_TIME_CALLS.load(Ordering::Relaxed), 2);
}

static CANCELLED: AdmissionGate = AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1));

#[retry(gate = CANCELLED, on = classify)]
async fn slow_lookup() -> Result<u32, StockError> {
    tokio::time::sleep(Duration::from_secs(60)).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_gives_its_slot_back() {
    for _ in 0..3 {
        // Cut off from outside: the call's future is dropped while its attempt holds the slot.
        let cut = tokio::time::timeout(10 * MS, slow_lookup()).await;
        assert!(cut.is_err());
        assert_eq!(concurrency(&CANCELLED), (1, 0), "no capacity lost");
    }
    // The limit learnt nothing from the cancellations either.
    let mut call = Box::pin(slow_lookup());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(call.as_mut().poll(&mut cx).is_pending());
    assert_eq!(concurrency(&CANCELLED), (1, 1));
    drop(call);
    assert_eq!(concurrency(&CANCELLED), (1, 0));
}

static LEARNS: AdmissionGate = AdmissionGate::aimd(Aimd::new().initial_limit(10).min_limit(1));
static LEARNS_CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(gate = LEARNS, on = classify, max = 3, base = "10ms", jitter = none)]
async fn throttled_twice() -> Result<u32, StockError> {
    match LEARNS_CALLS.fetch_add(1, Ordering::Relaxed) {
        0 => Err(StockError::Throttled),
        1 => Err(StockError::Flaky),
        2 => Err(StockError::Throttled),
        n => Ok(n),
    }
}

#[tokio::test(start_paused = true)]
async fn every_attempt_teaches_the_gate_and_throttling_shrinks_it() {
    assert_eq!(throttled_twice().await, Ok(3));
    // Two throttles: 10 → 9 → 8 (×0.9, floored); the 500 and the success each add 1/limit,
    // which the floor of the limit does not show yet.
    assert_eq!(concurrency(&LEARNS), (8, 0));
}

static FALLBACK_GATE: AdmissionGate =
    AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1)).name("ledger");
static HEARD: Mutex<Vec<(GiveUpReason, u32)>> = Mutex::new(Vec::new());

async fn from_cache(error: StockError, why: GiveUp) -> Result<u32, StockError> {
    HEARD
        .lock()
        .expect("not poisoned")
        .push((why.reason, why.attempts));
    match error {
        StockError::Shed(rejected) => Ok(rejected.retry_after().map_or(0, |_| 1)),
        other => Err(other),
    }
}

#[retry(gate = FALLBACK_GATE, on = classify, fallback = from_cache)]
async fn balance(latency: Duration) -> Result<u32, StockError> {
    tokio::time::sleep(latency).await;
    Ok(100)
}

#[tokio::test(start_paused = true)]
async fn a_fallback_hears_the_gate_and_answers_instead() {
    let (held, shed) = tokio::join!(balance(50 * MS), balance(MS));
    assert_eq!((held, shed), (Ok(100), Ok(0)));
    assert_eq!(
        *HEARD.lock().expect("not poisoned"),
        [(
            GiveUpReason::GateRejected {
                gate: "ledger",
                mode: GateMode::Aimd
            },
            0
        )],
        "no attempt ran"
    );
}

// ---- the rate limiter: its wait is taken before the attempt ----

static WAITING: AdmissionGate = AdmissionGate::rate_limit(ClientRateLimit::new());
static TWIN: AdmissionGate = AdmissionGate::rate_limit(ClientRateLimit::new());
static STARTS: Mutex<Vec<Duration>> = Mutex::new(Vec::new());

#[tokio::test(start_paused = true)]
async fn a_rate_limiters_wait_is_taken_before_the_attempt() {
    let t0 = Instant::now();
    let policy = Policy::new().max(6).base(10 * MS).jitter(Jitter::None);
    let calls = AtomicU32::new(0);
    let result = Retrier::<u32, StockError>::new(&policy)
        .on(classify)
        .gate(&WAITING)
        .run_async(|| {
            let n = calls.fetch_add(1, Ordering::Relaxed);
            STARTS.lock().expect("not poisoned").push(t0.elapsed());
            async move {
                tokio::time::sleep(MS).await;
                if n < 4 {
                    Err(StockError::Throttled)
                } else {
                    Ok(n)
                }
            }
        })
        .await;
    assert_eq!(result, Ok(4));
    let starts = STARTS.lock().expect("not poisoned").clone();
    assert_eq!(starts.len(), 5);
    // The twin replays the loop's timeline by hand: attempt k is admitted when the previous
    // one ended (its start + 1 ms) plus the policy's pause (10, 20, 40, 80 ms), and must start
    // after exactly the wait the twin's permit names (tokio's timer rounds up to its 1 ms tick).
    let base = t0.into_std();
    let mut admitted = Duration::ZERO;
    let mut waited = Duration::ZERO;
    for (k, start) in starts.iter().enumerate() {
        let permit = TWIN
            .admit(base + admitted)
            .expect("a waiting limiter admits");
        let due = admitted + permit.wait();
        waited += permit.wait();
        assert!(
            *start >= due && *start < due + MS,
            "attempt {}: {start:?} against {due:?}",
            k + 1
        );
        let end = *start + MS;
        let outcome = if k < 4 {
            GateOutcome::Throttled
        } else {
            GateOutcome::Accepted
        };
        permit.record(outcome, base + end);
        admitted = end + 10 * MS * 2u32.pow(k as u32);
    }
    assert!(
        waited > Duration::ZERO,
        "the limiter never made an attempt wait"
    );
}

static FAST: AdmissionGate =
    AdmissionGate::rate_limit(ClientRateLimit::new().fail_fast(true)).name("s3");

#[tokio::test(start_paused = true)]
async fn a_fail_fast_limiter_sheds_once_throttled_and_says_when_to_come_back() {
    let policy = Policy::new().max(20).base(MS).jitter(Jitter::None);
    let calls = AtomicU32::new(0);
    let result = Retrier::<u32, StockError>::new(&policy)
        .on(classify)
        .gate(&FAST)
        .run_async(|| {
            calls.fetch_add(1, Ordering::Relaxed);
            async { Err::<u32, _>(StockError::Throttled) }
        })
        .await;
    let Err(StockError::Shed(rejected)) = result else {
        panic!("expected the limiter to shed a retry: {result:?}");
    };
    assert_eq!(rejected.gate(), "s3");
    assert_eq!(rejected.mode(), GateMode::RateLimit);
    assert!(
        rejected
            .retry_after()
            .is_some_and(|wait| wait > Duration::ZERO)
    );
    // The first throttle turned the limiter on at a rate of one attempt in seconds: the retry
    // 1 ms later found no token, and was shed rather than kept waiting.
    assert!(matches!(
        rejected.reason(),
        RejectReason::RateLimited { .. }
    ));
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

// ---- the other doors ----

static BLOCK_GATE: AdmissionGate = AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1));

#[tokio::test(start_paused = true)]
async fn retry_block_asks_the_gate() {
    let calls = AtomicU32::new(0);
    let (a, b) = tokio::join!(
        retry_block!(gate = BLOCK_GATE, on = classify => async {
            calls.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(20 * MS).await;
            Ok::<u32, StockError>(1)
        }),
        retry_block!(gate = BLOCK_GATE, on = classify => async {
            calls.fetch_add(1, Ordering::Relaxed);
            Ok::<u32, StockError>(2)
        }),
    );
    assert_eq!(a, Ok(1));
    assert!(matches!(b, Err(StockError::Shed(_))), "{b:?}");
    assert_eq!(calls.load(Ordering::Relaxed), 1);
}

static SYNC_GATE: AdmissionGate = AdmissionGate::aimd(Aimd::new().initial_limit(4).min_limit(1));

#[test]
fn a_blocking_retrier_asks_the_gate_before_every_attempt() {
    let policy = Policy::new()
        .max(3)
        .base(Duration::ZERO)
        .jitter(Jitter::None);
    let calls = AtomicU32::new(0);
    let result = Retrier::<u32, StockError>::new(&policy)
        .on(classify)
        .gate(&SYNC_GATE)
        .run(|| {
            // Each attempt holds a slot while it runs, the first one included.
            assert_eq!(concurrency(&SYNC_GATE).1, 1);
            match calls.fetch_add(1, Ordering::Relaxed) {
                0 => Err(StockError::Throttled),
                n => Ok(n),
            }
        });
    assert_eq!(result, Ok(1));
    assert_eq!(
        concurrency(&SYNC_GATE),
        (3, 0),
        "⌊4 × 0.9⌋ after the throttle"
    );
}

static ENGINE_GATE: AdmissionGate =
    AdmissionGate::adaptive_throttling(AdaptiveThrottling::new()).name("engine");

#[tokio::test(start_paused = true)]
async fn the_engines_hooks_carry_the_gate() {
    let policy = Policy::new().max(2).base(10 * MS).jitter(Jitter::None);
    let classify = |error: &StockError| classify(error);
    let calls = AtomicU32::new(0);
    let settings = Settings::new(&policy).name("engine");
    // Accepts stay at least half the requests, so the rejection probability stays 0 and no
    // draw is made: a first call accepted, then a second throttled once and accepted.
    for expected in [0, 2] {
        let answer = engine::drive(
            &settings,
            DynHooks::new(&classify).gate(Some(&ENGINE_GATE)),
            TokioTimer,
            || {
                let n = calls.fetch_add(1, Ordering::Relaxed);
                async move {
                    if n == 1 {
                        Err(StockError::Throttled)
                    } else {
                        Ok(n)
                    }
                }
            },
        )
        .await;
        assert_eq!(answer, Ok(expected));
    }
    // Three answers reached the gate: one throttled, two accepted.
    match ENGINE_GATE.state(std::time::Instant::now()) {
        GateState::AdaptiveThrottling {
            requests, accepts, ..
        } => {
            assert_eq!((requests, accepts), (3, 2));
        }
        other => panic!("{other:?}"),
    }
}

// ---- the throttling base ----

#[tokio::test(start_paused = true)]
async fn a_throttled_attempt_pauses_by_the_throttling_base() {
    let policy = Policy::new()
        .max(3)
        .base(50 * MS)
        .throttle_base(Duration::from_secs(1))
        .jitter(Jitter::None);
    let starts = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let calls = AtomicU32::new(0);
    let result = Retrier::<u32, StockError>::new(&policy)
        .on(classify)
        .run_async(|| {
            starts.lock().expect("not poisoned").push(t0.elapsed());
            let n = calls.fetch_add(1, Ordering::Relaxed);
            async move {
                match n {
                    0 => Err(StockError::Flaky),
                    1 => Err(StockError::Throttled),
                    2 => Err(StockError::Flaky),
                    n => Ok(n),
                }
            }
        })
        .await;
    assert_eq!(result, Ok(3));
    // 50 ms after the 500, 2 s (1 s × 2) after the throttle, 200 ms (50 ms × 4) after the 500.
    assert_eq!(
        *starts.lock().expect("not poisoned"),
        [0, 50, 2050, 2250].map(|ms| ms * MS)
    );
}

/// The same pauses with `throttle_base` written in the attribute, in `retry_block!` and given to
/// the `Retrier`'s method over a policy without it: the grammar's key reaches the policy.
#[tokio::test(start_paused = true)]
async fn throttle_base_in_the_attribute_the_block_and_the_retrier() {
    static CALLS: AtomicU32 = AtomicU32::new(0);
    static STARTS: Mutex<Vec<Duration>> = Mutex::new(Vec::new());
    async fn scripted(t0: Instant) -> Result<u32, StockError> {
        STARTS.lock().expect("not poisoned").push(t0.elapsed());
        match CALLS.fetch_add(1, Ordering::Relaxed) % 4 {
            0 => Err(StockError::Flaky),
            1 => Err(StockError::Throttled),
            2 => Err(StockError::Flaky),
            n => Ok(n),
        }
    }
    #[retry(max = 3, base = "50ms", throttle_base = "1s", jitter = none, on = classify)]
    async fn attribute(t0: Instant) -> Result<u32, StockError> {
        scripted(t0).await
    }
    let expected = [0, 50, 2050, 2250].map(|ms| ms * MS);
    let take = || std::mem::take(&mut *STARTS.lock().expect("not poisoned"));

    let t0 = Instant::now();
    assert_eq!(attribute(t0).await, Ok(3));
    assert_eq!(take(), expected, "#[retry(throttle_base = \"1s\")]");

    let t0 = Instant::now();
    let block = retry_block!(max = 3, base = "50ms", throttle_base = "1s", jitter = none, on = classify => async {
        scripted(t0).await
    })
    .await;
    assert_eq!(block, Ok(3));
    assert_eq!(take(), expected, "retry_block!(throttle_base = \"1s\")");

    let policy = Policy::new().max(3).base(50 * MS).jitter(Jitter::None);
    let t0 = Instant::now();
    let retrier = Retrier::<u32, StockError>::new(&policy)
        .throttle_base(Duration::from_secs(1))
        .on(classify)
        .run_async(|| scripted(t0))
        .await;
    assert_eq!(retrier, Ok(3));
    assert_eq!(take(), expected, "Retrier::throttle_base");
}

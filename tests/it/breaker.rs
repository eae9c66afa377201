//! `#[retry(breaker = B)]`: every transition of the `CircuitBreaker`, driven through the
//! attribute under tokio's paused clock, counting the calls that reached the body.
//!
//! Each test has its own static breaker, since tests run in parallel.

use retry_runtime::{BreakerState, CircuitBreaker, CircuitOpen, retry};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use tokio::time::{Duration, Instant};

#[derive(Debug, PartialEq)]
enum ContractError {
    Overloaded,
    InvalidClaim,
    Unavailable(CircuitOpen),
}

impl From<CircuitOpen> for ContractError {
    fn from(open: CircuitOpen) -> Self {
        ContractError::Unavailable(open)
    }
}

fn is_transient(error: &ContractError) -> bool {
    matches!(error, ContractError::Overloaded)
}

const UP: u8 = 0;
const OVERLOADED: u8 = 1;
const INVALID: u8 = 2;

/// The contract service: answers as `mode` says, after `latency`, and counts the calls that
/// reached it.
struct Contract {
    mode: AtomicU8,
    latency: Duration,
    calls: AtomicU32,
}

impl Contract {
    fn new(mode: u8) -> Self {
        Self::slow(mode, Duration::ZERO)
    }

    fn slow(mode: u8, latency: Duration) -> Self {
        Contract {
            mode: AtomicU8::new(mode),
            latency,
            calls: AtomicU32::new(0),
        }
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::Relaxed);
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::Relaxed)
    }

    async fn check(&self) -> Result<&'static str, ContractError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if !self.latency.is_zero() {
            tokio::time::sleep(self.latency).await;
        }
        match self.mode.load(Ordering::Relaxed) {
            UP => Ok("covered"),
            OVERLOADED => Err(ContractError::Overloaded),
            _ => Err(ContractError::InvalidClaim),
        }
    }
}

/// The breaker's clock: the one async `#[retry]` functions read, tokio's (paused) clock.
fn now() -> std::time::Instant {
    Instant::now().into_std()
}

fn refused(remaining: Option<Duration>) -> Result<&'static str, ContractError> {
    Err(ContractError::Unavailable(CircuitOpen::new(remaining)))
}

const OPEN_FOR: Duration = Duration::from_secs(10);

static TRANSITIONS: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(3)
    .open_for(OPEN_FOR);

#[retry(max = 5, base = "1s", jitter = none, on = is_transient, breaker = TRANSITIONS)]
async fn check_coverage(contract: &Contract) -> Result<&'static str, ContractError> {
    contract.check().await
}

#[tokio::test(start_paused = true)]
async fn closed_open_half_open_and_back_through_the_attribute() {
    let contract = Contract::new(OVERLOADED);
    assert_eq!(TRANSITIONS.state(now()), BreakerState::Closed);

    // Closed → open: the third failure in a row opens the circuit (at 3 s, after pauses of 1 s
    // and 2 s), and the loop ends there with that failure: no pause for an attempt that would
    // be refused. 3 calls reached the service instead of 6.
    let t0 = Instant::now();
    assert_eq!(
        check_coverage(&contract).await,
        Err(ContractError::Overloaded)
    );
    assert_eq!(contract.calls(), 3);
    assert_eq!(t0.elapsed(), Duration::from_secs(1 + 2));
    assert_eq!(
        TRANSITIONS.state(now()),
        BreakerState::Open {
            remaining: Duration::from_secs(10)
        }
    );
    tokio::time::advance(Duration::from_secs(4)).await;

    // Open: 100 calls return the converted `CircuitOpen` at once; none reaches the body, none
    // retries, no virtual time passes.
    let t = Instant::now();
    for _ in 0..100 {
        assert_eq!(
            check_coverage(&contract).await,
            refused(Some(Duration::from_secs(6)))
        );
    }
    assert_eq!(contract.calls(), 3);
    assert_eq!(t.elapsed(), Duration::ZERO);

    // One nanosecond before `open_for` is over, still open.
    tokio::time::advance(Duration::from_secs(6) - Duration::from_nanos(1)).await;
    assert_eq!(
        check_coverage(&contract).await,
        refused(Some(Duration::from_nanos(1)))
    );
    assert_eq!(contract.calls(), 3);

    // Open → half-open after `open_for`; the trial fails → open again for another 10 s, and the
    // loop ends with the trial's failure at once, without its 1 s pause.
    tokio::time::advance(Duration::from_nanos(1)).await;
    assert_eq!(TRANSITIONS.state(now()), BreakerState::HalfOpen);
    let t = Instant::now();
    assert_eq!(
        check_coverage(&contract).await,
        Err(ContractError::Overloaded)
    );
    assert_eq!(contract.calls(), 4);
    assert_eq!(t.elapsed(), Duration::ZERO);
    tokio::time::advance(Duration::from_secs(1)).await;

    // Half-open again 9 s later; the service is back, so the trial succeeds → closed.
    tokio::time::advance(Duration::from_secs(9)).await;
    assert_eq!(TRANSITIONS.state(now()), BreakerState::HalfOpen);
    contract.set(UP);
    assert_eq!(check_coverage(&contract).await, Ok("covered"));
    assert_eq!(contract.calls(), 5);
    assert_eq!(TRANSITIONS.state(now()), BreakerState::Closed);

    // Closed with fresh counts: calls go through again, and it takes three new failures in a
    // row to open it.
    for _ in 0..10 {
        assert_eq!(check_coverage(&contract).await, Ok("covered"));
    }
    assert_eq!(contract.calls(), 15);
    contract.set(OVERLOADED);
    assert_eq!(
        check_coverage(&contract).await,
        Err(ContractError::Overloaded)
    );
    assert_eq!(contract.calls(), 18);
    assert_eq!(
        check_coverage(&contract).await,
        refused(Some(Duration::from_secs(10)))
    );
}

static PERMANENT: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(3)
    .open_for(OPEN_FOR);

#[retry(max = 0, on = is_transient, breaker = PERMANENT)]
async fn check_once(contract: &Contract) -> Result<&'static str, ContractError> {
    contract.check().await
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_counts_for_the_service_and_never_opens_the_circuit() {
    // A valid "no" says the service is up: 20 in a row leave the circuit closed.
    let contract = Contract::new(INVALID);
    for _ in 0..20 {
        assert_eq!(
            check_once(&contract).await,
            Err(ContractError::InvalidClaim)
        );
    }
    assert_eq!(contract.calls(), 20);
    assert_eq!(PERMANENT.state(now()), BreakerState::Closed);

    // And it breaks a run of transient failures, as a success does: 2 + 2 + 2 failures,
    // separated by a permanent error and an `Ok`, never make 3 in a row.
    for mode in [OVERLOADED, OVERLOADED, INVALID, OVERLOADED, OVERLOADED, UP] {
        contract.set(mode);
        let _ = check_once(&contract).await;
    }
    contract.set(OVERLOADED);
    for _ in 0..2 {
        assert_eq!(check_once(&contract).await, Err(ContractError::Overloaded));
    }
    assert_eq!(PERMANENT.state(now()), BreakerState::Closed);
    assert_eq!(contract.calls(), 28);

    // The third transient failure in a row opens it.
    assert_eq!(check_once(&contract).await, Err(ContractError::Overloaded));
    assert_eq!(
        PERMANENT.state(now()),
        BreakerState::Open {
            remaining: OPEN_FOR
        }
    );
    assert_eq!(check_once(&contract).await, refused(Some(OPEN_FOR)));
    assert_eq!(contract.calls(), 29);
}

static HALF_OPEN: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(3)
    .open_for(OPEN_FOR);

#[retry(max = 2, base = "1ms", jitter = none, on = is_transient, breaker = HALF_OPEN)]
async fn check_slowly(contract: &Contract) -> Result<&'static str, ContractError> {
    contract.check().await
}

/// `n` concurrent calls, spawned on the test's current-thread runtime: what each returned, and
/// the virtual time it took.
async fn concurrent(
    contract: &Arc<Contract>,
    n: usize,
) -> Vec<(Result<&'static str, ContractError>, Duration)> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let contract = Arc::clone(contract);
            tokio::spawn(async move {
                let t = Instant::now();
                let result = check_slowly(&contract).await;
                (result, t.elapsed())
            })
        })
        .collect();
    let mut results = Vec::with_capacity(n);
    for task in tasks {
        results.push(task.await.expect("no panic"));
    }
    results
}

#[tokio::test(start_paused = true)]
async fn in_half_open_exactly_one_of_many_concurrent_callers_reaches_the_service() {
    const CALLERS: usize = 100;
    let latency = Duration::from_millis(50);
    let contract = Arc::new(Contract::slow(OVERLOADED, latency));

    // Open it: one call, three failed attempts.
    assert_eq!(
        check_slowly(&contract).await,
        Err(ContractError::Overloaded)
    );
    assert_eq!(contract.calls(), 3);
    assert!(matches!(HALF_OPEN.state(now()), BreakerState::Open { .. }));

    // 100 concurrent callers while open: none reaches the service, all at once.
    let results = concurrent(&contract, CALLERS).await;
    assert_eq!(contract.calls(), 3);
    assert!(results.iter().all(|(result, took)| {
        matches!(result, Err(ContractError::Unavailable(open)) if open.remaining() == Some(OPEN_FOR))
            && took.is_zero()
    }));

    // Half-open, the service back: 100 concurrent callers, exactly one is the trial. The 99
    // others are refused at once, with no time left to report (it depends on the trial).
    tokio::time::advance(OPEN_FOR).await;
    contract.set(UP);
    let results = concurrent(&contract, CALLERS).await;
    assert_eq!(contract.calls(), 4);
    let (trials, others): (Vec<_>, Vec<_>) = results.into_iter().partition(|(r, _)| r.is_ok());
    assert_eq!(trials, [(Ok("covered"), latency)]);
    assert_eq!(others.len(), CALLERS - 1);
    assert!(
        others
            .iter()
            .all(|(result, took)| *result == refused(None) && took.is_zero())
    );

    // The trial succeeded → closed: now all 100 get through.
    assert_eq!(HALF_OPEN.state(now()), BreakerState::Closed);
    let results = concurrent(&contract, CALLERS).await;
    assert_eq!(contract.calls(), 4 + 100);
    assert!(
        results
            .iter()
            .all(|(r, took)| r.is_ok() && *took == latency)
    );
}

static CANCELLED: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(1)
    .open_for(OPEN_FOR);

#[retry(max = 0, on = is_transient, breaker = CANCELLED)]
async fn check_cancellable(contract: &Contract) -> Result<&'static str, ContractError> {
    contract.check().await
}

#[tokio::test(start_paused = true)]
async fn a_trial_cancelled_by_its_caller_opens_the_circuit_again() {
    let contract = Contract::slow(OVERLOADED, Duration::from_secs(5));
    assert_eq!(
        check_cancellable(&contract).await,
        Err(ContractError::Overloaded)
    );
    tokio::time::advance(OPEN_FOR).await;

    // The trial takes 5 s; its caller gives up after 1 s and drops the call.
    contract.set(UP);
    let gave_up = tokio::time::timeout(Duration::from_secs(1), check_cancellable(&contract)).await;
    assert!(gave_up.is_err());
    assert_eq!(contract.calls(), 2);
    // A service so slow that its callers give up is not taken as recovered. A dropped
    // admission has no clock, so the new open time runs from the latest time the breaker saw:
    // the trial's start, 1 s ago.
    let left = OPEN_FOR - Duration::from_secs(1);
    assert_eq!(
        CANCELLED.state(now()),
        BreakerState::Open { remaining: left }
    );
    assert_eq!(check_cancellable(&contract).await, refused(Some(left)));
    assert_eq!(contract.calls(), 2);
    tokio::time::advance(left).await;
    assert_eq!(CANCELLED.state(now()), BreakerState::HalfOpen);
    assert_eq!(check_cancellable(&contract).await, Ok("covered"));
    assert_eq!(CANCELLED.state(now()), BreakerState::Closed);
}

static SYNC: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(2)
    .open_for(Duration::from_secs(3600));

#[retry(max = 5, base = "1ms", jitter = none, on = is_transient, breaker = SYNC)]
fn check_blocking(calls: &AtomicU32) -> Result<&'static str, ContractError> {
    calls.fetch_add(1, Ordering::Relaxed);
    Err(ContractError::Overloaded)
}

#[test]
fn a_sync_function_is_refused_without_running_its_body() {
    let calls = AtomicU32::new(0);
    // Two failures open it, and the loop ends with the second at once.
    assert_eq!(check_blocking(&calls), Err(ContractError::Overloaded));
    assert_eq!(calls.load(Ordering::Relaxed), 2);
    let Err(ContractError::Unavailable(open)) = check_blocking(&calls) else {
        panic!("expected the open circuit to refuse");
    };
    assert!(
        open.remaining()
            .is_some_and(|r| r > Duration::from_secs(3590))
    );
    for _ in 0..10 {
        assert!(matches!(
            check_blocking(&calls),
            Err(ContractError::Unavailable(_))
        ));
    }
    assert_eq!(calls.load(Ordering::Relaxed), 2);
}

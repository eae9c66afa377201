//! `hedge = "50ms"`, `max_hedges = N`: an attempt that has not answered after the delay gets a
//! copy beside it; the first acceptable answer wins and the other copies are dropped. Hedges
//! draw tokens from the budget, ask the breaker, carry the attempt's key, and are counted in
//! `RetryEvent::hedges` and `attempt().hedge()`.
//!
//! All on tokio's paused clock: the times asserted are exact.

use crate::common::{MS, S};
use retry_runtime::{
    BreakerState, CircuitBreaker, CircuitOpen, Elapsed, IdempotencyKey, RetryBudget, RetryEvent,
    Transient, attempt, non_idempotent, retry,
};
use std::cell::{Cell, RefCell};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, PartialEq)]
enum CallError {
    /// Worth retrying.
    Busy(u32),
    /// Not worth retrying: an answer.
    Refused(u32),
    TimedOut(Elapsed),
    Open(CircuitOpen),
}

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        matches!(self, CallError::Busy(_) | CallError::TimedOut(_))
    }
}

impl From<Elapsed> for CallError {
    fn from(elapsed: Elapsed) -> Self {
        CallError::TimedOut(elapsed)
    }
}

impl From<CircuitOpen> for CallError {
    fn from(open: CircuitOpen) -> Self {
        CallError::Open(open)
    }
}

/// A call as the service saw it start.
#[derive(Debug, PartialEq)]
struct Start {
    /// Since the test began.
    at: Duration,
    attempt: u32,
    hedge: u16,
    key: Option<String>,
}

/// A service whose call `n` (from 1) answers `plan(n)` after the time it gives, and which
/// counts the calls dropped before they answered.
struct Service {
    t0: Instant,
    calls: Cell<u32>,
    starts: RefCell<Vec<Start>>,
    dropped: Cell<u32>,
    plan: fn(u32) -> (Duration, Result<u32, CallError>),
}

/// Counts a call dropped before it answered.
struct Unanswered<'a>(&'a Cell<u32>, bool);

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.1 {
            self.0.set(self.0.get() + 1);
        }
    }
}

impl Service {
    fn new(plan: fn(u32) -> (Duration, Result<u32, CallError>)) -> Service {
        Service {
            t0: Instant::now(),
            calls: Cell::new(0),
            starts: RefCell::new(Vec::new()),
            dropped: Cell::new(0),
            plan,
        }
    }

    async fn call(&self) -> Result<u32, CallError> {
        let n = self.calls.get() + 1;
        self.calls.set(n);
        let now = attempt();
        self.starts.borrow_mut().push(Start {
            at: self.t0.elapsed(),
            attempt: now.number(),
            hedge: now.hedge(),
            key: now.key().map(|k| k.as_str().to_owned()),
        });
        let (after, answer) = (self.plan)(n);
        let mut unanswered = Unanswered(&self.dropped, true);
        tokio::time::sleep(after).await;
        unanswered.1 = false;
        answer
    }

    /// When each call started, and as which attempt and hedge.
    fn started(&self) -> Vec<(Duration, u32, u16)> {
        self.starts
            .borrow()
            .iter()
            .map(|s| (s.at, s.attempt, s.hedge))
            .collect()
    }
}

#[retry(hedge = "50ms", max_hedges = 2, max = 0)]
async fn two_hedges(service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_gets_a_hedge_after_the_delay_and_the_first_answer_wins() {
    // The attempt takes 1 s; its hedge, started at 50 ms, answers 30 ms later.
    let service = Service::new(|n| match n {
        1 => (S, Ok(1)),
        _ => (30 * MS, Ok(n)),
    });
    assert_eq!(two_hedges(&service).await, Ok(2));
    assert_eq!(service.t0.elapsed(), 80 * MS);
    assert_eq!(service.started(), [(Duration::ZERO, 1, 0), (50 * MS, 1, 1)]);
    // The attempt itself was dropped unanswered; the second hedge (due at 100 ms) never started.
    assert_eq!(service.dropped.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn hedges_start_one_delay_apart_up_to_max_hedges() {
    let service = Service::new(|n| (S, Ok(n)));
    assert_eq!(two_hedges(&service).await, Ok(1));
    assert_eq!(service.t0.elapsed(), S);
    assert_eq!(
        service.started(),
        [(Duration::ZERO, 1, 0), (50 * MS, 1, 1), (100 * MS, 1, 2)]
    );
    assert_eq!(service.dropped.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn copy_k_starts_k_delays_after_the_attempt_and_the_first_answer_wins() {
    // gRPC's rule: copy 1 at 50 ms, copy 2 at 100 ms (not both at 50 ms, and not 50 ms after
    // copy 1 answered). The attempt and copy 1 take 1 s; copy 2 answers 30 ms after its start.
    let service = Service::new(|n| match n {
        3 => (30 * MS, Ok(3)),
        _ => (S, Ok(n)),
    });
    assert_eq!(two_hedges(&service).await, Ok(3));
    assert_eq!(service.t0.elapsed(), 130 * MS);
    assert_eq!(
        service.started(),
        [(Duration::ZERO, 1, 0), (50 * MS, 1, 1), (100 * MS, 1, 2)]
    );
    // The attempt and copy 1, still running at 130 ms, were dropped (their guards counted it).
    assert_eq!(service.dropped.get(), 2);
}

#[retry(hedge = "50ms", max_hedges = 3, max = 0)]
async fn three_hedges(service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn a_copy_that_fails_keeps_the_schedule_of_the_next_ones() {
    // Copy 1 (at 50 ms) fails at 60 ms with an error worth retrying: copy 2 still starts at
    // 100 ms and copy 3 at 150 ms, each 50 ms after the one before; copy 3 answers first.
    let service = Service::new(|n| match n {
        2 => (10 * MS, Err(CallError::Busy(2))),
        4 => (5 * MS, Ok(4)),
        _ => (S, Ok(n)),
    });
    assert_eq!(three_hedges(&service).await, Ok(4));
    assert_eq!(
        service.started(),
        [
            (Duration::ZERO, 1, 0),
            (50 * MS, 1, 1),
            (100 * MS, 1, 2),
            (150 * MS, 1, 3)
        ]
    );
    assert_eq!(service.t0.elapsed(), 155 * MS);
    // The attempt and copy 2 dropped; copy 1 had answered (with its failure).
    assert_eq!(service.dropped.get(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_answer_before_the_delay_starts_no_hedge() {
    let service = Service::new(|n| (49 * MS, Ok(n)));
    assert_eq!(two_hedges(&service).await, Ok(1));
    assert_eq!(service.calls.get(), 1);
    assert_eq!(service.dropped.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_copy_that_fails_transiently_leaves_the_others_running() {
    // The hedge fails at 60 ms with an error worth retrying; the attempt answers at 200 ms.
    // (gRPC and Polly would start the next copy at once after such a failure; here it keeps
    // its time, see the hedging guide.)
    let service = Service::new(|n| match n {
        1 => (200 * MS, Ok(1)),
        _ => (10 * MS, Err(CallError::Busy(n))),
    });
    assert_eq!(two_hedges(&service).await, Ok(1));
    assert_eq!(service.t0.elapsed(), 200 * MS);
    // The second hedge started at 100 ms and failed at 110 ms.
    assert_eq!(service.calls.get(), 3);
    assert_eq!(service.dropped.get(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_error_not_worth_retrying_is_an_answer_and_wins() {
    let service = Service::new(|n| match n {
        1 => (S, Ok(1)),
        _ => (10 * MS, Err(CallError::Refused(n))),
    });
    assert_eq!(two_hedges(&service).await, Err(CallError::Refused(2)));
    assert_eq!(service.t0.elapsed(), 60 * MS);
    assert_eq!(service.dropped.get(), 1);
}

static HEARD: std::sync::Mutex<Vec<(u32, u32)>> = std::sync::Mutex::new(Vec::new());

fn hear(_: &CallError, event: &RetryEvent) {
    HEARD
        .lock()
        .expect("not poisoned")
        .push((event.attempt, event.hedges));
}

#[retry(hedge = "50ms", max = 1, base = "1s", jitter = none, notify = hear)]
async fn hedged_and_retried(service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn when_every_copy_fails_the_attempt_fails_and_is_retried_with_its_hedges_in_the_event() {
    // The attempt fails at 100 ms, its hedge at 120 ms: the attempt has failed, 1 s pause.
    let service = Service::new(|n| match n {
        1 => (100 * MS, Err(CallError::Busy(1))),
        2 => (70 * MS, Err(CallError::Busy(2))),
        _ => (10 * MS, Ok(n)),
    });
    assert_eq!(hedged_and_retried(&service).await, Ok(3));
    assert_eq!(
        service.started(),
        [(Duration::ZERO, 1, 0), (50 * MS, 1, 1), (1120 * MS, 2, 0),]
    );
    assert_eq!(service.t0.elapsed(), 1130 * MS);
    assert_eq!(*HEARD.lock().expect("not poisoned"), [(1, 1)]);
}

static ONE_TOKEN: RetryBudget = RetryBudget::new().ratio(1.0).min_per_second(0);

#[retry(hedge = "50ms", max_hedges = 3, max = 0, budget = ONE_TOKEN)]
async fn on_a_budget(service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn each_hedge_takes_a_token_and_an_empty_budget_stops_hedging() {
    // The first attempt deposits one token: one hedge at 50 ms, none at 100 ms or 150 ms.
    let service = Service::new(|n| (S, Ok(n)));
    assert_eq!(on_a_budget(&service).await, Ok(1));
    assert_eq!(service.started(), [(Duration::ZERO, 1, 0), (50 * MS, 1, 1)]);
    assert_eq!(ONE_TOKEN.available(), 0.0);
}

static TWO_FAILURES: CircuitBreaker = CircuitBreaker::new().consecutive_failures(2);

#[retry(hedge = "50ms", max = 3, base = "1s", breaker = TWO_FAILURES)]
async fn behind_a_breaker(service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn the_breaker_hears_every_copy() {
    // The hedge fails at 60 ms and the attempt at 100 ms: two failures, which open the circuit,
    // so the loop gives up at once instead of pausing. Without the hedge's failure counted,
    // one failure would leave it closed and the loop would retry.
    let service = Service::new(|n| match n {
        1 => (100 * MS, Err(CallError::Busy(1))),
        _ => (10 * MS, Err(CallError::Busy(n))),
    });
    assert_eq!(behind_a_breaker(&service).await, Err(CallError::Busy(1)));
    assert_eq!(service.calls.get(), 2);
    assert_eq!(service.t0.elapsed(), 100 * MS);
    assert!(matches!(
        TWO_FAILURES.state(std::time::Instant::now()),
        BreakerState::Open { .. }
    ));
}

#[non_idempotent]
#[retry(hedge = "50ms", max_hedges = 2, max = 0)]
async fn pay(key: &IdempotencyKey, service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn every_hedge_carries_the_attempts_key() {
    let service = Service::new(|n| (S, Ok(n)));
    let key = IdempotencyKey::from("payout-4711");
    assert_eq!(pay(&key, &service).await, Ok(1));
    let keys: Vec<Option<String>> = service
        .starts
        .borrow()
        .iter()
        .map(|s| s.key.clone())
        .collect();
    assert_eq!(keys, vec![Some("payout-4711".to_owned()); 3]);
}

#[retry(hedge = "50ms", timeout = "100ms", max = 0)]
async fn hedged_with_a_timeout(service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn with_timeout_each_copy_has_its_own_limit() {
    // The attempt is cut off at 100 ms while its hedge runs; the hedge at 150 ms ends it.
    let service = Service::new(|n| (S, Ok(n)));
    let result = hedged_with_a_timeout(&service).await;
    assert!(matches!(result, Err(CallError::TimedOut(_))), "{result:?}");
    assert_eq!(service.t0.elapsed(), 150 * MS);
    assert_eq!(service.calls.get(), 2);
}

#[retry(hedge = "p95", max = 0)]
async fn after_the_95th_percentile(service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn a_percentile_hedges_after_the_observed_latency_once_it_has_enough_samples() {
    // 20 calls of 10 ms: no hedge while the histogram fills.
    let fast = Service::new(|n| (10 * MS, Ok(n)));
    for _ in 0..20 {
        after_the_95th_percentile(&fast).await.expect("answers");
    }
    assert_eq!(fast.calls.get(), 20);
    // Then a slow one gets a hedge after the 95th percentile, 10 ms read as the upper end of its
    // bucket (a quarter of a power of two wide): 10.24 ms, which tokio's timer, whose ticks are
    // whole milliseconds, ends at 11 ms.
    let slow = Service::new(|n| match n {
        1 => (S, Ok(1)),
        _ => (10 * MS, Ok(n)),
    });
    assert_eq!(after_the_95th_percentile(&slow).await, Ok(2));
    assert_eq!(slow.started(), [(Duration::ZERO, 1, 0), (11 * MS, 1, 1)]);
}

#[retry(hedge = "p95", max_hedges = 2, max = 0)]
async fn twice_after_the_95th_percentile(service: &Service) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn with_a_percentile_copy_k_is_due_k_delays_after_the_attempt() {
    let fast = Service::new(|n| (10 * MS, Ok(n)));
    for _ in 0..20 {
        twice_after_the_95th_percentile(&fast)
            .await
            .expect("answers");
    }
    // The delay is 10.24 ms (see above): copy 1 at 11 ms (the timer's next whole millisecond),
    // copy 2 due at 2 × 10.24 = 20.48 ms after the attempt, so at 21 ms; counted from copy 1's
    // start it would have been 11 + 10.24, at 22 ms.
    let slow = Service::new(|n| (S, Ok(n)));
    assert_eq!(twice_after_the_95th_percentile(&slow).await, Ok(1));
    assert_eq!(
        slow.started(),
        [(Duration::ZERO, 1, 0), (11 * MS, 1, 1), (21 * MS, 1, 2)]
    );
    assert_eq!(slow.dropped.get(), 2);
}

static HEARD_ASYNC: std::sync::Mutex<Vec<(u32, u32, Duration, Duration)>> =
    std::sync::Mutex::new(Vec::new());

#[retry(
    hedge = "50ms",
    max = 1,
    base = "1s",
    jitter = none,
    notify = async |_: &CallError, event: &RetryEvent| {
        let began = t0.elapsed();
        tokio::time::sleep(300 * MS).await;
        HEARD_ASYNC.lock().expect("not poisoned").push((event.attempt, event.hedges, began, t0.elapsed()));
    },
)]
async fn hedged_with_an_async_notify(service: &Service, t0: Instant) -> Result<u32, CallError> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn an_async_notify_hears_a_hedged_attempt_and_is_awaited_inside_its_pause() {
    // The attempt fails at 100 ms, its hedge at 120 ms: the attempt has failed. The hook runs
    // from 120 ms to 420 ms, inside the 1 s pause, so the next attempt still starts at 1120 ms.
    let service = Service::new(|n| match n {
        1 => (100 * MS, Err(CallError::Busy(1))),
        2 => (70 * MS, Err(CallError::Busy(2))),
        _ => (10 * MS, Ok(n)),
    });
    assert_eq!(
        hedged_with_an_async_notify(&service, service.t0).await,
        Ok(3)
    );
    assert_eq!(
        service.started(),
        [(Duration::ZERO, 1, 0), (50 * MS, 1, 1), (1120 * MS, 2, 0)]
    );
    assert_eq!(service.t0.elapsed(), 1130 * MS);
    assert_eq!(
        *HEARD_ASYNC.lock().expect("not poisoned"),
        [(1, 1, 120 * MS, 420 * MS)]
    );
    // Both copies answered (failed) before the pause: none was dropped.
    assert_eq!(service.dropped.get(), 0);
}

//! `#[retry(budget = B)]`: retries draw from a shared `RetryBudget`, so a storm of callers
//! adds a bounded share of calls, not `max` extra calls each. Measured under tokio's paused
//! clock, against a service that always fails.
//!
//! The bound, from `budget.rs`: each call's first attempt deposits `ratio` of a token (capped
//! at `max_tokens`), each retry takes one from the second's reserve (`min_per_second`) or else
//! one whole token. Within one reserve window, `n` first attempts therefore allow at most
//! `min(ratio·n + banked, max_tokens) + min_per_second` retries.

use retry_runtime::{RetryBudget, Transient, attempt, retry, testing};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use tokio::time::{Duration, Instant};

/// The service always answers after this long, always with an overload.
const LATENCY: Duration = Duration::from_millis(10);
const CALLERS: u32 = 1_000;
const MAX_RETRIES: u32 = 3;
const RESERVE: u32 = 5;

#[derive(Debug, PartialEq)]
struct Overloaded {
    /// The attempt that got this answer: which error the loop returned.
    attempt: u32,
}

impl Transient for Overloaded {
    fn is_transient(&self) -> bool {
        true
    }
}

/// What the service saw: first attempts and retries, told apart by `attempt()`.
#[derive(Default)]
struct Service {
    first: AtomicU32,
    retries: AtomicU32,
}

impl Service {
    async fn call(&self) -> Result<(), Overloaded> {
        let now = attempt().number();
        if now == 1 {
            self.first.fetch_add(1, Ordering::Relaxed);
        } else {
            self.retries.fetch_add(1, Ordering::Relaxed);
        }
        tokio::time::sleep(LATENCY).await;
        Err(Overloaded { attempt: now })
    }

    fn first(&self) -> u32 {
        self.first.load(Ordering::Relaxed)
    }

    fn retries(&self) -> u32 {
        self.retries.load(Ordering::Relaxed)
    }

    fn total(&self) -> u32 {
        self.first() + self.retries()
    }
}

/// The defaults (ratio 0.1, at most 100 tokens) with a reserve of 5 retries per second.
static STORM_BUDGET: RetryBudget = RetryBudget::new().min_per_second(RESERVE);

#[retry(max = 3, base = "1ms", jitter = none, budget = STORM_BUDGET)]
async fn check_with_budget(service: &Service) -> Result<(), Overloaded> {
    service.call().await
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn check_without_budget(service: &Service) -> Result<(), Overloaded> {
    service.call().await
}

/// `CALLERS` tasks, spawned on the test's current-thread runtime, each making one call.
async fn storm<F, Fut>(service: &Arc<Service>, call: F)
where
    F: Fn(Arc<Service>) -> Fut,
    Fut: Future<Output = Result<(), Overloaded>> + Send + 'static,
{
    let tasks: Vec<_> = (0..CALLERS)
        .map(|_| tokio::spawn(call(Arc::clone(service))))
        .collect();
    for task in tasks {
        assert!(task.await.expect("no panic").is_err());
    }
}

#[tokio::test(start_paused = true)]
async fn a_storm_of_callers_adds_only_the_ratio_plus_the_reserve() {
    assert_eq!(STORM_BUDGET.get_ratio(), 0.1);
    assert_eq!(STORM_BUDGET.get_max_tokens(), 100);

    let service = Arc::new(Service::default());
    let t0 = Instant::now();
    storm(&service, |s| async move { check_with_budget(&s).await }).await;

    // Every call made its first attempt; the retries stayed within one reserve window (the
    // storm took 21 ms: a first attempt, one 1 ms pause, one retry), so the bound is
    // min(0.1 · 1,000 + 0 banked, 100) + 5 = 105.
    let bound = (STORM_BUDGET.get_ratio() * f64::from(CALLERS)) as u32 + RESERVE;
    assert_eq!(service.first(), CALLERS);
    assert_eq!(bound, 105);
    assert!(service.retries() <= bound);
    // The callers wanted 3,000 retries, so the budget was spent to the last token.
    assert_eq!(service.retries(), 105);
    assert_eq!(service.total(), 1_105);
    assert_eq!(STORM_BUDGET.available(), 0.0);
    assert_eq!(t0.elapsed(), 2 * LATENCY + Duration::from_millis(1));

    // A second of virtual time later, the reserve is back: a single caller gets all 3 retries
    // although the bucket is empty.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let quiet = Service::default();
    let t1 = Instant::now();
    assert_eq!(
        check_with_budget(&quiet).await,
        Err(Overloaded { attempt: 4 })
    );
    assert_eq!((quiet.first(), quiet.retries()), (1, MAX_RETRIES));
    assert_eq!(t1.elapsed(), 4 * LATENCY + Duration::from_millis(1 + 2 + 4));
}

#[tokio::test(start_paused = true)]
async fn without_a_budget_the_same_storm_makes_four_calls_per_caller() {
    let service = Arc::new(Service::default());
    let t0 = Instant::now();
    storm(&service, |s| async move { check_without_budget(&s).await }).await;

    assert_eq!(service.first(), CALLERS);
    assert_eq!(service.retries(), MAX_RETRIES * CALLERS);
    assert_eq!(service.total(), 4_000);
    assert_eq!(t0.elapsed(), 4 * LATENCY + Duration::from_millis(1 + 2 + 4));
}

/// A reserve of 2 per second and no traffic to speak of: 1 first attempt deposits 0.1 token.
static QUIET_BUDGET: RetryBudget = RetryBudget::new().min_per_second(2);

#[retry(max = 3, base = "100ms", jitter = none, budget = QUIET_BUDGET)]
async fn check_quietly(service: &Service) -> Result<(), Overloaded> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn a_quiet_client_retries_from_the_reserve_and_an_empty_budget_returns_at_once() {
    // Second 0: two retries from the reserve; the third is refused, and the loop returns the
    // third attempt's error at once instead of pausing 400 ms first.
    let service = Service::default();
    let t0 = Instant::now();
    assert_eq!(
        check_quietly(&service).await,
        Err(Overloaded { attempt: 3 })
    );
    assert_eq!((service.first(), service.retries()), (1, 2));
    assert_eq!(t0.elapsed(), 3 * LATENCY + Duration::from_millis(100 + 200));
    assert_eq!(QUIET_BUDGET.available(), 0.1);

    // Still second 0: the reserve is spent and 0.2 tokens make no retry.
    let service = Service::default();
    let t = Instant::now();
    assert_eq!(
        check_quietly(&service).await,
        Err(Overloaded { attempt: 1 })
    );
    assert_eq!((service.first(), service.retries()), (1, 0));
    assert_eq!(t.elapsed(), LATENCY);

    // One second of virtual time after the first withdrawal, the reserve has refilled.
    tokio::time::sleep_until(t0 + LATENCY + Duration::from_secs(1)).await;
    let service = Service::default();
    assert_eq!(
        check_quietly(&service).await,
        Err(Overloaded { attempt: 3 })
    );
    assert_eq!((service.first(), service.retries()), (1, 2));
}

/// Ratio 0.1, reserve 5, for callers that arrive in waves over a long outage.
static OUTAGE_BUDGET: RetryBudget = RetryBudget::new().min_per_second(RESERVE);

#[retry(max = 3, base = "1ms", jitter = none, budget = OUTAGE_BUDGET)]
async fn check_during_outage(service: &Service) -> Result<(), Overloaded> {
    service.call().await
}

#[tokio::test(start_paused = true)]
async fn over_a_long_outage_retries_stay_near_the_ratio() {
    // 10 waves of 100 callers, one wave per second: each second, 100 first attempts pay for
    // 10 retries and the reserve adds 5.
    const WAVES: u32 = 10;
    const WAVE: u32 = 100;
    let service = Arc::new(Service::default());
    let t0 = Instant::now();
    for wave in 0..WAVES {
        tokio::time::sleep_until(t0 + Duration::from_secs(wave.into())).await;
        let tasks: Vec<_> = (0..WAVE)
            .map(|_| {
                let service = Arc::clone(&service);
                tokio::spawn(async move { check_during_outage(&service).await })
            })
            .collect();
        for task in tasks {
            assert!(task.await.expect("no panic").is_err());
        }
    }
    let first = WAVES * WAVE;
    assert_eq!(service.first(), first);
    // ratio · 1,000 + reserve · 10 s = 100 + 50, against 3,000 without a budget.
    assert_eq!(service.retries(), first / 10 + RESERVE * WAVES);
    assert_eq!(service.retries(), 150);
}

/// Only the reserve, one retry per second: ratio 0 makes deposits worth nothing.
static SYNC_BUDGET: RetryBudget = RetryBudget::new().ratio(0.0).min_per_second(1);

#[retry(max = 3, base = "1ms", jitter = none, budget = SYNC_BUDGET)]
fn read_tariffs(calls: &Cell<u32>) -> Result<(), Overloaded> {
    calls.set(calls.get() + 1);
    Err(Overloaded {
        attempt: attempt().number(),
    })
}

#[test]
fn a_sync_function_draws_from_the_same_kind_of_budget() {
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| read_tariffs(&calls));
    // One retry from the reserve, then the second attempt's error without a second pause.
    assert_eq!(result, Err(Overloaded { attempt: 2 }));
    assert_eq!(calls.get(), 2);
    assert_eq!(pauses, [Duration::from_millis(1)]);
}

//! How many calls, and how long the pauses between them are, for each backoff form and limit.
//!
//! Async tests run on tokio's paused clock, so the pauses take no real time and the elapsed
//! virtual time is exact. Sync tests sleep for real with millisecond bases and only check lower
//! bounds: a loaded machine may sleep longer, never shorter.

use crate::common::{Busy, MS, NEVER, S, step};
use retry_runtime::retry;
use std::cell::{Cell, RefCell};
use std::time::Duration;
use tokio::time::Instant;

// ---- async, on the paused clock -------------------------------------------------------------

/// Records the virtual time of each call, relative to `t0`.
#[retry(max = 3, base = "1s", jitter = none)]
async fn exponential(
    t0: Instant,
    seen: &RefCell<Vec<Duration>>,
    calls: &Cell<u32>,
    ok_on: u32,
) -> Result<u32, Busy> {
    seen.borrow_mut().push(t0.elapsed());
    step(calls, ok_on)
}

#[tokio::test(start_paused = true)]
async fn exponential_always_failing_takes_7_s_and_4_calls() {
    let (t0, seen, calls) = (Instant::now(), RefCell::new(Vec::new()), Cell::new(0));
    assert_eq!(exponential(t0, &seen, &calls, NEVER).await, Err(Busy(4)));
    assert_eq!(calls.get(), 4);
    assert_eq!(t0.elapsed(), 7 * S);
    // Pauses of 1 s, 2 s and 4 s, and the last error is returned without a fourth pause.
    assert_eq!(*seen.borrow(), [Duration::ZERO, S, 3 * S, 7 * S]);
}

#[tokio::test(start_paused = true)]
async fn success_on_the_third_call_takes_3_s() {
    let (t0, seen, calls) = (Instant::now(), RefCell::new(Vec::new()), Cell::new(0));
    assert_eq!(exponential(t0, &seen, &calls, 3).await, Ok(3));
    assert_eq!(calls.get(), 3);
    assert_eq!(t0.elapsed(), 3 * S);
}

#[tokio::test(start_paused = true)]
async fn success_on_the_first_call_does_not_pause() {
    let (t0, seen, calls) = (Instant::now(), RefCell::new(Vec::new()), Cell::new(0));
    assert_eq!(exponential(t0, &seen, &calls, 1).await, Ok(1));
    assert_eq!(calls.get(), 1);
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

#[retry(jitter = none)]
async fn defaults(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn defaults_are_3_retries_from_1_s_doubling() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(defaults(&calls).await, Err(Busy(4)));
    assert_eq!(calls.get(), 4);
    assert_eq!(t0.elapsed(), 7 * S);
}

#[retry(max = 3, base = "1s", backoff = linear, jitter = none)]
async fn linear(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn linear_pauses_1_2_3_s() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(linear(&calls).await, Err(Busy(4)));
    assert_eq!(calls.get(), 4);
    assert_eq!(t0.elapsed(), 6 * S);
}

#[retry(max = 3, base = "1s", backoff = constant, jitter = none)]
async fn constant(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn constant_pauses_1_s_each() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(constant(&calls).await, Err(Busy(4)));
    assert_eq!(calls.get(), 4);
    assert_eq!(t0.elapsed(), 3 * S);
}

#[retry(max = 3, base = "1s", factor = 3, jitter = none)]
async fn tripling(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn factor_3_pauses_1_3_9_s() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(tripling(&calls).await, Err(Busy(4)));
    assert_eq!(calls.get(), 4);
    assert_eq!(t0.elapsed(), 13 * S);
}

#[retry(max = 3, base = "100ms", factor = 1.5, jitter = none)]
async fn fractional_factor(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn factor_1_5_pauses_100_150_225_ms() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(fractional_factor(&calls).await, Err(Busy(4)));
    assert_eq!(t0.elapsed(), 475 * MS);
}

#[retry(max = 4, base = "1s", max_delay = "3s", jitter = none)]
async fn capped(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn max_delay_caps_each_pause() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(capped(&calls).await, Err(Busy(5)));
    assert_eq!(calls.get(), 5);
    // 1 + 2 + 3 (not 4) + 3 (not 8).
    assert_eq!(t0.elapsed(), 9 * S);
}

#[retry(max = 10, base = "10s", factor = 10, jitter = none)]
async fn saturating(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn growth_saturates_at_the_default_30_s_cap() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(saturating(&calls).await, Err(Busy(11)));
    // 10 s, then nine pauses capped at 30 s.
    assert_eq!(t0.elapsed(), 10 * S + 9 * 30 * S);
}

#[retry(attempts = 2, base = "1s", jitter = none)]
async fn two_attempts(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn attempts_2_is_2_calls_and_one_pause() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(two_attempts(&calls).await, Err(Busy(2)));
    assert_eq!(calls.get(), 2);
    assert_eq!(t0.elapsed(), S);
}

#[retry(max = 0, base = "1s")]
async fn no_retries(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn max_0_is_one_call_without_a_pause() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(no_retries(&calls).await, Err(Busy(1)));
    assert_eq!(calls.get(), 1);
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

#[retry(max = 2, base = "1s")]
async fn default_jitter(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[tokio::test(start_paused = true)]
async fn default_jitter_only_lengthens_pauses() {
    for _ in 0..50 {
        let (t0, calls) = (Instant::now(), Cell::new(0));
        assert_eq!(default_jitter(&calls).await, Err(Busy(3)));
        // 1 s + 2 s, each plus up to half of itself; tokio rounds each timer up to the next
        // millisecond, so the half-open bound is reached but not passed.
        let elapsed = t0.elapsed();
        assert!(elapsed >= 3 * S && elapsed <= 4500 * MS, "{elapsed:?}");
    }
}

// ---- sync, with real millisecond pauses -----------------------------------------------------

#[retry(max = 3, base = "2ms", jitter = none)]
fn sync_exponential(
    seen: &RefCell<Vec<std::time::Instant>>,
    calls: &Cell<u32>,
    ok_on: u32,
) -> Result<u32, Busy> {
    seen.borrow_mut().push(std::time::Instant::now());
    step(calls, ok_on)
}

#[test]
fn sync_always_failing_makes_4_calls_with_growing_pauses() {
    let (seen, calls) = (RefCell::new(Vec::new()), Cell::new(0));
    let t0 = std::time::Instant::now();
    assert_eq!(sync_exponential(&seen, &calls, NEVER), Err(Busy(4)));
    assert_eq!(calls.get(), 4);
    assert!(t0.elapsed() >= 14 * MS);
    let seen = seen.borrow();
    let gaps: Vec<_> = seen.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, at_least) in gaps.iter().zip([2 * MS, 4 * MS, 8 * MS]) {
        assert!(*gap >= at_least, "{gaps:?}");
    }
}

#[test]
fn sync_success_on_the_third_call() {
    let (seen, calls) = (RefCell::new(Vec::new()), Cell::new(0));
    let t0 = std::time::Instant::now();
    assert_eq!(sync_exponential(&seen, &calls, 3), Ok(3));
    assert_eq!(calls.get(), 3);
    assert!(t0.elapsed() >= 6 * MS);
}

#[retry(max = 3, base = "2ms", backoff = linear, jitter = none)]
fn sync_linear(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[retry(max = 3, base = "2ms", backoff = constant, jitter = none)]
fn sync_constant(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[test]
fn sync_linear_and_constant() {
    let calls = Cell::new(0);
    let t0 = std::time::Instant::now();
    assert_eq!(sync_linear(&calls), Err(Busy(4)));
    assert!(t0.elapsed() >= 12 * MS);

    let calls = Cell::new(0);
    let t0 = std::time::Instant::now();
    assert_eq!(sync_constant(&calls), Err(Busy(4)));
    assert!(t0.elapsed() >= 6 * MS);
}

#[retry(attempts = 2, base = "1ms")]
fn sync_two_attempts(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[retry(max = 0)]
fn sync_no_retries(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[test]
fn sync_attempts_and_max_0() {
    let calls = Cell::new(0);
    let t0 = std::time::Instant::now();
    assert_eq!(sync_two_attempts(&calls), Err(Busy(2)));
    assert_eq!(calls.get(), 2);
    assert!(t0.elapsed() >= MS);

    // The default base is 1 s: were there a pause, this test would take a second.
    let calls = Cell::new(0);
    assert_eq!(sync_no_retries(&calls), Err(Busy(1)));
    assert_eq!(calls.get(), 1);
}

#[retry(max = 2, base = "2ms")]
fn sync_default_jitter(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[test]
fn sync_default_jitter_pauses_at_least_the_nominal_time() {
    let calls = Cell::new(0);
    let t0 = std::time::Instant::now();
    assert_eq!(sync_default_jitter(&calls), Err(Busy(3)));
    assert!(t0.elapsed() >= 6 * MS);
}

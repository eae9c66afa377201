//! `deadline`: the time budget from the first call, calls and pauses included. A pause that
//! would end past it is not taken; the last error is returned at once.
//!
//! Async functions read tokio's clock, so these run on the paused clock with exact times.

use crate::common::{Busy, MS, S, fail};
use retry_runtime::retry;
use std::cell::Cell;
use tokio::time::Instant;

#[retry(deadline = "2500ms", base = "1s", jitter = none, max = 5)]
async fn within_2500_ms(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn a_pause_that_would_end_past_the_deadline_is_not_taken() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    // Call 1 at 0 s; 0 + 1 s ≤ 2.5 s, pause. Call 2 at 1 s; 1 s + 2 s > 2.5 s: return its error.
    assert_eq!(within_2500_ms(&calls).await, Err(Busy(2)));
    assert_eq!(calls.get(), 2);
    assert_eq!(t0.elapsed(), S);
}

#[tokio::test(start_paused = true)]
async fn the_budget_starts_at_the_first_call_not_when_the_future_is_made() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    let future = within_2500_ms(&calls);
    tokio::time::sleep(10 * S).await;
    assert_eq!(future.await, Err(Busy(2)));
    assert_eq!(t0.elapsed(), 11 * S);
}

#[retry(deadline = "3s", base = "1s", jitter = none, max = 5)]
async fn within_3_s(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn a_pause_that_ends_exactly_at_the_deadline_is_taken() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    // Pauses of 1 s and 2 s end at 1 s and 3 s; the third, 4 s, would end at 7 s.
    assert_eq!(within_3_s(&calls).await, Err(Busy(3)));
    assert_eq!(calls.get(), 3);
    assert_eq!(t0.elapsed(), 3 * S);
}

#[retry(deadline = "3500ms", base = "1s", backoff = constant, jitter = none, max = 10)]
async fn slow_attempts(calls: &Cell<u32>) -> Result<u32, Busy> {
    tokio::time::sleep(500 * MS).await;
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn the_time_spent_in_attempts_counts() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    // Attempts end at 0.5 s, 2 s and 3.5 s, each followed by a 1 s pause while it fits:
    // 1.5 s ≤ 3.5 s, 3 s ≤ 3.5 s, 4.5 s > 3.5 s. Pauses alone would allow 4 calls.
    assert_eq!(slow_attempts(&calls).await, Err(Busy(3)));
    assert_eq!(calls.get(), 3);
    assert_eq!(t0.elapsed(), 3500 * MS);
}

#[retry(deadline = "1h", base = "1s", jitter = none, max = 2)]
async fn generous(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn the_retry_limit_still_applies_within_the_deadline() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(generous(&calls).await, Err(Busy(3)));
    assert_eq!(t0.elapsed(), 3 * S);
}

#[retry(deadline = "2500ms", base = "1s", jitter = none, max = 5)]
async fn succeeds_second(calls: &Cell<u32>) -> Result<u32, Busy> {
    calls.set(calls.get() + 1);
    if calls.get() == 2 {
        Ok(2)
    } else {
        Err(Busy(calls.get()))
    }
}

#[tokio::test(start_paused = true)]
async fn success_within_the_deadline_is_returned() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(succeeds_second(&calls).await, Ok(2));
    assert_eq!(t0.elapsed(), S);
}

#[retry(deadline = "2500ms", base = "1s", jitter = full, max = 20)]
async fn jittered(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn with_jitter_no_run_outlasts_the_deadline() {
    let mut counts = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let (t0, calls) = (Instant::now(), Cell::new(0));
        assert!(jittered(&calls).await.is_err());
        // The first pause is at most 1 s and always fits.
        assert!(calls.get() >= 2);
        assert!(t0.elapsed() <= 2500 * MS, "{:?}", t0.elapsed());
        counts.insert(calls.get());
    }
    assert!(
        counts.len() > 1,
        "the number of calls never varied: {counts:?}"
    );
}

#[retry(deadline = "25ms", base = "10ms", jitter = none, max = 5)]
fn sync_within_25_ms(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[test]
fn sync_functions_measure_the_deadline_on_the_real_clock() {
    let calls = Cell::new(0);
    let t0 = std::time::Instant::now();
    // 0 + 10 ms fits; after at least 10 ms, another 20 ms does not.
    assert_eq!(sync_within_25_ms(&calls), Err(Busy(2)));
    assert!(t0.elapsed() >= 10 * MS);
}

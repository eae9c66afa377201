//! Each jitter form keeps its pauses within its formula, over many samples, and spreads them
//! over the whole range.
//!
//! Every sample is one call of a function that fails once and then succeeds, so the elapsed
//! virtual time is exactly the first pause. Tokio's timer rounds each deadline up to the next
//! millisecond, so a half-open upper bound `d + U[0, x)` shows up as the closed bound `d + x`.

use crate::common::{Busy, MS, fail, step};
use retry_runtime::retry;
use std::cell::Cell;
use std::time::Duration;
use tokio::time::Instant;

const SAMPLES: usize = 1000;

/// Fails on the first call, succeeds on the second.
fn fail_once(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, 2)
}

/// The first pause of `SAMPLES` calls of `f`.
async fn first_pauses(f: impl AsyncFn(&Cell<u32>) -> Result<u32, Busy>) -> Vec<Duration> {
    let mut pauses = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let calls = Cell::new(0);
        let t0 = Instant::now();
        assert_eq!(f(&calls).await, Ok(2));
        assert_eq!(calls.get(), 2);
        pauses.push(t0.elapsed());
    }
    pauses
}

/// Every pause is in `[low, high]`, and the samples reach both ends: with 1000 draws, none
/// landing in the lowest (or highest) 5% of a uniform range has a chance below 1e-22, so a
/// failure means the range is narrower than the formula says.
fn assert_within(pauses: &[Duration], low: Duration, high: Duration) {
    for pause in pauses {
        assert!(
            (low..=high).contains(pause),
            "{pause:?} outside [{low:?}, {high:?}]"
        );
    }
    let band = (high - low) / 20;
    let (min, max) = (pauses.iter().min(), pauses.iter().max());
    assert!(min.is_some_and(|min| *min <= low + band), "lowest: {min:?}");
    assert!(
        max.is_some_and(|max| *max >= high - band),
        "highest: {max:?}"
    );
}

#[retry(max = 1, base = "1s")]
async fn unwritten(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn default_adds_up_to_half() {
    let pauses = first_pauses(unwritten).await;
    assert_within(&pauses, 1000 * MS, 1500 * MS);
}

#[retry(max = 1, base = "1s", jitter)]
async fn bare(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn bare_jitter_adds_up_to_half() {
    let pauses = first_pauses(bare).await;
    assert_within(&pauses, 1000 * MS, 1500 * MS);
}

#[retry(max = 1, base = "1s", jitter = 0.2)]
async fn fraction(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn a_fraction_adds_up_to_that_share() {
    let pauses = first_pauses(fraction).await;
    assert_within(&pauses, 1000 * MS, 1200 * MS);
}

#[retry(max = 1, base = "1s", jitter = "500ms")]
async fn absolute(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn a_duration_adds_up_to_that_duration() {
    let pauses = first_pauses(absolute).await;
    assert_within(&pauses, 1000 * MS, 1500 * MS);
}

#[retry(max = 1, base = "1s", jitter = full)]
async fn full(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn full_is_anywhere_up_to_the_pause() {
    let pauses = first_pauses(full).await;
    assert_within(&pauses, Duration::ZERO, 1000 * MS);
}

#[retry(max = 1, base = "1s", jitter = equal)]
async fn equal(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn equal_is_at_least_half_the_pause() {
    let pauses = first_pauses(equal).await;
    assert_within(&pauses, 500 * MS, 1000 * MS);
}

#[retry(max = 1, base = "1s", jitter = decorrelated)]
async fn decorrelated_once(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn decorrelated_first_pause_is_between_base_and_3_base() {
    let pauses = first_pauses(decorrelated_once).await;
    assert_within(&pauses, 1000 * MS, 3000 * MS);
}

#[retry(max = 4, base = "100ms", max_delay = "1s", jitter = decorrelated)]
async fn decorrelated(calls: &Cell<u32>, seen: &mut Vec<Instant>) -> Result<u32, Busy> {
    seen.push(Instant::now());
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn decorrelated_grows_from_the_previous_pause_up_to_max_delay() {
    let mut reached_cap = false;
    for _ in 0..200 {
        let (calls, mut seen) = (Cell::new(0), Vec::new());
        assert_eq!(decorrelated(&calls, &mut seen).await, Err(Busy(5)));
        assert_eq!(calls.get(), 5);
        let pauses: Vec<_> = seen.windows(2).map(|w| w[1] - w[0]).collect();
        let mut previous = 100 * MS;
        for pause in &pauses {
            // A measured pause is the drawn one rounded up to the millisecond, so 3·previous
            // (whole milliseconds) still bounds the next.
            assert!(
                *pause >= 100 * MS && *pause <= (3 * previous).min(1000 * MS),
                "{pauses:?}"
            );
            reached_cap |= *pause == 1000 * MS;
            previous = *pause;
        }
    }
    assert!(
        reached_cap,
        "the 1 s cap was never reached in {SAMPLES} runs"
    );
}

#[retry(max = 1, base = "1s", max_delay = "1200ms")]
async fn capped(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn max_delay_caps_the_pause_after_jitter() {
    let pauses = first_pauses(capped).await;
    assert_within(&pauses, 1000 * MS, 1200 * MS);
    // Jitter draws up to 1.5 s, so most samples hit the cap exactly.
    assert!(pauses.iter().filter(|p| **p == 1200 * MS).count() > SAMPLES / 4);
}

#[retry(max = 1, base = "1s", jitter = none)]
async fn none(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail_once(calls)
}

#[tokio::test(start_paused = true)]
async fn none_is_exactly_the_pause() {
    for pause in first_pauses(none).await {
        assert_eq!(pause, 1000 * MS);
    }
}

#[retry(max = 3, base = "5ms", jitter = full)]
fn sync_full(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[test]
fn sync_jitter_keeps_the_call_count() {
    let calls = Cell::new(0);
    assert_eq!(sync_full(&calls), Err(Busy(4)));
    assert_eq!(calls.get(), 4);
}

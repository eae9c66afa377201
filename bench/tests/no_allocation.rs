//! The loop allocates nothing when the first call succeeds, nor when it retries without jitter,
//! with or without an idempotency key.
//!
//! `allocation-counter` installs a counting global allocator (its `unsafe` stays in that crate)
//! and counts only the current thread's allocations, so tests running in parallel threads do not
//! disturb each other's counts.
//!
//! With the `metrics` feature (on in the workspace), the first call of each function registers
//! its handles with the recorder in place, once: its entry in the runtime's table and the keys of
//! its series. Each test makes that first call on another thread (`warm_up`), so that what it
//! measures on its own thread is a call like every later one, and a first draw of the jitter is
//! still this thread's first. `no_allocation_metrics.rs` does the same with a recorder installed.

use allocation_counter::measure;
use retry_runtime::{IdempotencyKey, Transient, attempt, non_idempotent, retry};
use std::cell::Cell;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

#[derive(Debug, PartialEq)]
struct Busy;

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

#[retry(max = 3, base = "1s")]
fn sync_first_call_succeeds(x: u64) -> Result<u64, Busy> {
    Ok(x + 1)
}

#[retry(max = 3, base = "1s")]
async fn async_first_call_succeeds(x: u64) -> Result<u64, Busy> {
    Ok(x + 1)
}

#[retry(max = 3, base = "0ns", jitter = none)]
fn sync_fails_twice_then_succeeds(calls: &Cell<u32>) -> Result<u32, Busy> {
    calls.set(calls.get() + 1);
    if calls.get() <= 2 {
        Err(Busy)
    } else {
        Ok(calls.get())
    }
}

#[retry(max = 3, base = "0ns")]
fn sync_fails_twice_with_default_jitter(calls: &Cell<u32>) -> Result<u32, Busy> {
    calls.set(calls.get() + 1);
    if calls.get() <= 2 {
        Err(Busy)
    } else {
        Ok(calls.get())
    }
}

// Keyed functions: the attempts borrow the key parameter; only `attempt().key()` renders it.

#[non_idempotent]
#[retry(max = 3, base = "1s")]
fn sync_with_key(x: u64, key: &IdempotencyKey) -> Result<u64, Busy> {
    Ok(x + key.as_str().len() as u64)
}

#[non_idempotent]
#[retry(max = 3, base = "1s")]
fn sync_with_str_key(x: u64, #[idempotency_key] key: &str) -> Result<u64, Busy> {
    Ok(x + key.len() as u64)
}

#[non_idempotent]
#[retry(max = 3, base = "1s")]
fn sync_with_order_number(x: u64, #[idempotency_key] order: u64) -> Result<u64, Busy> {
    Ok(x + order)
}

#[non_idempotent]
#[retry(max = 3, base = "1s")]
async fn async_with_key(x: u64, key: &IdempotencyKey) -> Result<u64, Busy> {
    Ok(x + key.as_str().len() as u64)
}

#[non_idempotent]
#[retry(max = 3, base = "1s")]
async fn async_with_str_key(x: u64, #[idempotency_key] key: &str) -> Result<u64, Busy> {
    Ok(x + key.len() as u64)
}

#[non_idempotent]
#[retry(max = 3, base = "1s")]
async fn async_with_order_number(x: u64, #[idempotency_key] order: u64) -> Result<u64, Busy> {
    Ok(x + order)
}

#[non_idempotent]
#[retry(max = 3, base = "0ns", jitter = none)]
fn sync_with_str_key_fails_twice(
    calls: &Cell<u32>,
    #[idempotency_key] key: &str,
) -> Result<u32, Busy> {
    calls.set(calls.get() + 1);
    if calls.get() <= 2 {
        Err(Busy)
    } else {
        Ok(calls.get() + key.len() as u32)
    }
}

#[non_idempotent]
#[retry(max = 3, base = "1s")]
fn sync_asks_for_its_key(#[idempotency_key] order: u64) -> Result<String, Busy> {
    let _ = order;
    Ok(attempt().key().map(ToString::to_string).unwrap_or_default())
}

/// Makes the first call of the functions that `calls` calls on another thread: their metrics are
/// registered (see the top of this file), and nothing of this thread's is touched.
fn warm_up(calls: impl FnOnce() + Send) {
    std::thread::scope(|scope| {
        scope.spawn(calls);
    });
}

/// Polls an async call once, by hand, with a waker that does nothing: no runtime, so nothing
/// else allocates.
fn poll_once<F: Future>(call: F) -> Poll<F::Output> {
    let mut call = pin!(call);
    call.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn the_counter_sees_allocations() {
    // Without this, a counter that was not installed would pass every test below.
    let counted = measure(|| drop(black_box(Box::new(1u64))));
    assert_eq!(counted.count_total, 1, "{counted:?}");
}

#[test]
fn a_sync_first_call_that_succeeds_allocates_nothing() {
    warm_up(|| drop(sync_first_call_succeeds(1)));
    let mut answer = None;
    let counted = measure(|| answer = Some(sync_first_call_succeeds(black_box(41))));
    assert_eq!(answer, Some(Ok(42)));
    assert_eq!(counted.count_total, 0, "{counted:?}");
}

#[test]
fn an_async_first_call_that_succeeds_allocates_nothing() {
    // Polled by hand with a waker that does nothing: no runtime, so nothing else allocates.
    warm_up(|| drop(poll_once(async_first_call_succeeds(1))));
    let mut answer = None;
    let counted = measure(|| {
        let mut call = pin!(async_first_call_succeeds(black_box(41)));
        let mut cx = Context::from_waker(Waker::noop());
        answer = Some(call.as_mut().poll(&mut cx));
    });
    assert_eq!(answer, Some(Poll::Ready(Ok(42))));
    assert_eq!(counted.count_total, 0, "{counted:?}");
}

#[test]
fn a_retried_sync_call_without_jitter_allocates_nothing() {
    warm_up(|| drop(sync_fails_twice_then_succeeds(&Cell::new(0))));
    let calls = Cell::new(0);
    let mut answer = None;
    let counted = measure(|| answer = Some(sync_fails_twice_then_succeeds(black_box(&calls))));
    assert_eq!(answer, Some(Ok(3)));
    assert_eq!(counted.count_total, 0, "{counted:?}");
}

#[test]
fn jitter_allocates_only_the_threads_generator_once() {
    // The first draw on a thread creates the per-thread generator (one allocation, 336 bytes
    // with rand 0.10); every later retry on that thread allocates nothing.
    warm_up(|| drop(sync_fails_twice_with_default_jitter(&Cell::new(0))));
    let calls = Cell::new(0);
    let first = measure(|| drop(sync_fails_twice_with_default_jitter(&calls)));
    assert!(first.count_total <= 1, "{first:?}");
    calls.set(0);
    let mut answer = None;
    let later = measure(|| answer = Some(sync_fails_twice_with_default_jitter(black_box(&calls))));
    assert_eq!(answer, Some(Ok(3)));
    assert_eq!(later.count_total, 0, "{later:?}");
}

#[test]
fn a_keyed_first_call_that_succeeds_allocates_nothing() {
    let key = IdempotencyKey::from("claim-4711-payout-1");
    warm_up(|| {
        drop(sync_with_key(1, &key));
        drop(sync_with_str_key(1, "claim-4711"));
        drop(sync_with_order_number(1, 4711));
        drop(poll_once(async_with_key(1, &key)));
        drop(poll_once(async_with_str_key(1, "claim-4711")));
        drop(poll_once(async_with_order_number(1, 4711)));
    });
    let mut answers = Vec::with_capacity(6);
    let counted = measure(|| {
        answers.push(Poll::Ready(sync_with_key(black_box(1), &key)));
        answers.push(Poll::Ready(sync_with_str_key(black_box(1), "claim-4711")));
        answers.push(Poll::Ready(sync_with_order_number(black_box(1), 4711)));
        answers.push(poll_once(async_with_key(black_box(1), &key)));
        answers.push(poll_once(async_with_str_key(black_box(1), "claim-4711")));
        answers.push(poll_once(async_with_order_number(black_box(1), 4711)));
    });
    assert_eq!(
        answers,
        [20, 11, 4712, 20, 11, 4712].map(|n| Poll::Ready(Ok(n)))
    );
    assert_eq!(counted.count_total, 0, "{counted:?}");
}

#[test]
fn a_retried_keyed_call_without_jitter_allocates_nothing() {
    warm_up(|| drop(sync_with_str_key_fails_twice(&Cell::new(0), "claim-4711")));
    let calls = Cell::new(0);
    let mut answer = None;
    let counted = measure(|| {
        answer = Some(sync_with_str_key_fails_twice(
            black_box(&calls),
            "claim-4711",
        ))
    });
    assert_eq!(answer, Some(Ok(13)));
    assert_eq!(counted.count_total, 0, "{counted:?}");
}

#[test]
fn the_key_is_built_when_the_body_asks_for_it() {
    // The counter proves that it counts here too: asking for the key is what builds it.
    let mut answer = None;
    let counted = measure(|| answer = Some(sync_asks_for_its_key(black_box(4711))));
    assert_eq!(answer, Some(Ok("4711".to_owned())));
    assert!(counted.count_total > 0, "{counted:?}");
}

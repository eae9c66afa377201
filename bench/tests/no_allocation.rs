//! The loop allocates nothing when the first call succeeds, nor when it retries without jitter.
//!
//! `allocation-counter` installs a counting global allocator (its `unsafe` stays in that crate)
//! and counts only the current thread's allocations, so tests running in parallel threads do not
//! disturb each other's counts.

use allocation_counter::measure;
use retry_runtime::{Transient, retry};
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

#[test]
fn the_counter_sees_allocations() {
    // Without this, a counter that was not installed would pass every test below.
    let counted = measure(|| drop(black_box(Box::new(1u64))));
    assert_eq!(counted.count_total, 1, "{counted:?}");
}

#[test]
fn a_sync_first_call_that_succeeds_allocates_nothing() {
    let mut answer = None;
    let counted = measure(|| answer = Some(sync_first_call_succeeds(black_box(41))));
    assert_eq!(answer, Some(Ok(42)));
    assert_eq!(counted.count_total, 0, "{counted:?}");
}

#[test]
fn an_async_first_call_that_succeeds_allocates_nothing() {
    // Polled by hand with a waker that does nothing: no runtime, so nothing else allocates.
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
    let calls = Cell::new(0);
    let first = measure(|| drop(sync_fails_twice_with_default_jitter(&calls)));
    assert!(first.count_total <= 1, "{first:?}");
    calls.set(0);
    let mut answer = None;
    let later = measure(|| answer = Some(sync_fails_twice_with_default_jitter(black_box(&calls))));
    assert_eq!(answer, Some(Ok(3)));
    assert_eq!(later.count_total, 0, "{later:?}");
}

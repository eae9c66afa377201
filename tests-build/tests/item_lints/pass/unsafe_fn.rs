//! `unsafe fn` keeps its qualifier (the calls need `unsafe`) and is retried, sync and async.
#![deny(warnings)]

use retry_runtime::{Transient, retry};
use std::cell::Cell;
use std::time::Duration;

#[derive(Debug, PartialEq)]
struct Busy;

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

/// # Safety
///
/// `value` must point to a live `u32`.
#[retry(max = 3, base = "1ms", jitter = none)]
unsafe fn read(value: *const u32, calls: &Cell<u32>) -> Result<u32, Busy> {
    calls.set(calls.get() + 1);
    if calls.get() < 3 {
        return Err(Busy);
    }
    Ok(unsafe { *value })
}

/// # Safety
///
/// `value` must point to a live `u32`.
#[retry(max = 3, base = "1s", jitter = none)]
async unsafe fn read_async(value: *const u32, calls: &Cell<u32>) -> Result<u32, Busy> {
    calls.set(calls.get() + 1);
    if calls.get() < 3 {
        return Err(Busy);
    }
    Ok(unsafe { *value })
}

fn main() {
    let value = 4711;
    let calls = Cell::new(0);
    assert_eq!(unsafe { read(&value, &calls) }, Ok(4711));
    assert_eq!(calls.get(), 3);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let calls = Cell::new(0);
    let (answer, elapsed) = runtime.block_on(async {
        let t0 = tokio::time::Instant::now();
        (unsafe { read_async(&value, &calls) }.await, t0.elapsed())
    });
    assert_eq!(answer, Ok(4711));
    assert_eq!(calls.get(), 3);
    assert_eq!(elapsed, Duration::from_secs(3));
}

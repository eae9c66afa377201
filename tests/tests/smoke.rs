use retry_runtime::retry;
use std::cell::Cell;
use std::time::Duration;

#[derive(Debug, PartialEq)]
enum E {
    Busy,
    No,
}
fn busy(e: &E) -> bool {
    *e == E::Busy
}

#[retry(max = 3, base = "1ms", jitter = none, on = busy)]
fn sync_fail(calls: &Cell<u32>) -> Result<u32, E> {
    calls.set(calls.get() + 1);
    Err(E::Busy)
}

#[retry(max = 3, base = "1s", jitter = none, on = busy)]
async fn async_fail(calls: &Cell<u32>) -> Result<u32, E> {
    calls.set(calls.get() + 1);
    let x: Result<u32, E> = Err(E::Busy);
    let v = x?;
    Ok(v)
}

#[test]
fn sync_smoke() {
    let calls = Cell::new(0);
    assert_eq!(sync_fail(&calls), Err(E::Busy));
    assert_eq!(calls.get(), 4);
    let _ = E::No;
}

#[tokio::test(start_paused = true)]
async fn async_smoke() {
    let calls = Cell::new(0);
    let t = tokio::time::Instant::now();
    assert_eq!(async_fail(&calls).await, Err(E::Busy));
    assert_eq!(calls.get(), 4);
    assert_eq!(t.elapsed(), Duration::from_secs(7));
}

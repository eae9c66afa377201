//! `timeout`: each attempt of an async function is cut off after that long and counts as a
//! transient failure, carried by the error type's `From<Elapsed>`. With `deadline`, each
//! attempt's limit is clipped to the time left, so the call never overruns its deadline.
//!
//! All on tokio's paused clock: the times asserted are exact.

use crate::common::{MS, S};
use retry_runtime::{Elapsed, Transient, retry};
use std::cell::{Cell, RefCell};
use std::io;
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, PartialEq)]
enum CallError {
    TimedOut(Elapsed),
    Refused,
}

impl From<Elapsed> for CallError {
    fn from(elapsed: Elapsed) -> Self {
        CallError::TimedOut(elapsed)
    }
}

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        matches!(self, CallError::TimedOut(_))
    }
}

/// A service that answers after `work[n]` on call `n` (the last entry for later calls).
async fn answer_after(calls: &Cell<u32>, work: &[Duration]) -> Result<u32, CallError> {
    calls.set(calls.get() + 1);
    let index = (calls.get() as usize - 1).min(work.len() - 1);
    tokio::time::sleep(work[index]).await;
    Ok(calls.get())
}

/// A service that never answers.
async fn never_answers(calls: &Cell<u32>, starts: &RefCell<Vec<Duration>>, t0: Instant) {
    calls.set(calls.get() + 1);
    starts.borrow_mut().push(t0.elapsed());
    std::future::pending::<()>().await;
}

#[retry(timeout = "100ms", max = 2, base = "1s", jitter = none)]
async fn with_100_ms(calls: &Cell<u32>, work: &[Duration]) -> Result<u32, CallError> {
    answer_after(calls, work).await
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_cut_off_and_retried() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(with_100_ms(&calls, &[S, 10 * MS]).await, Ok(2));
    // 100 ms until the cut-off, a 1 s pause, 10 ms of work.
    assert_eq!(t0.elapsed(), 1110 * MS);
}

#[tokio::test(start_paused = true)]
async fn a_fast_attempt_is_not_touched() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(with_100_ms(&calls, &[99 * MS]).await, Ok(1));
    assert_eq!(t0.elapsed(), 99 * MS);
}

#[tokio::test(start_paused = true)]
async fn the_last_timeout_is_returned_with_its_limit() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    let error = with_100_ms(&calls, &[S]).await.unwrap_err();
    let CallError::TimedOut(elapsed) = error else {
        panic!("expected a timeout, got {error:?}");
    };
    assert_eq!(elapsed.limit(), 100 * MS);
    assert_eq!(elapsed.to_string(), "attempt timed out after 100ms");
    assert_eq!(calls.get(), 3);
    // Three cut-offs of 100 ms, pauses of 1 s and 2 s.
    assert_eq!(t0.elapsed(), 3300 * MS);
}

/// A classifier that retries nothing: only a cut-off attempt is retried.
#[retry(timeout = "100ms", max = 2, base = "1s", jitter = none, on = |_: &CallError| false)]
async fn retries_nothing_but_timeouts(calls: &Cell<u32>) -> Result<u32, CallError> {
    calls.set(calls.get() + 1);
    match calls.get() {
        1 => std::future::pending().await,
        _ => Err(CallError::Refused),
    }
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_transient_whatever_the_classifier_says() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(
        retries_nothing_but_timeouts(&calls).await,
        Err(CallError::Refused)
    );
    // The cut-off was retried; the refusal that followed was not.
    assert_eq!(calls.get(), 2);
    assert_eq!(t0.elapsed(), 1100 * MS);
}

#[retry(timeout = "2s", max = 1, base = "10ms", jitter = none)]
async fn io_call(calls: &Cell<u32>) -> io::Result<u32> {
    calls.set(calls.get() + 1);
    std::future::pending().await
}

#[tokio::test(start_paused = true)]
async fn io_error_carries_a_timeout_as_timed_out() {
    let calls = Cell::new(0);
    let error = io_call(&calls).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert_eq!(calls.get(), 2);
}

// ---- with a deadline: the limit is clipped to the time left ---------------------------------

#[retry(timeout = "2s", deadline = "5s", base = "1s", jitter = none)]
async fn within_5_s(
    calls: &Cell<u32>,
    starts: &RefCell<Vec<Duration>>,
    t0: Instant,
) -> Result<u32, CallError> {
    never_answers(calls, starts, t0).await;
    unreachable!()
}

#[tokio::test(start_paused = true)]
async fn a_body_that_never_answers_returns_at_the_deadline() {
    let (t0, calls, starts) = (Instant::now(), Cell::new(0), RefCell::new(Vec::new()));
    let error = within_5_s(&calls, &starts, t0).await.unwrap_err();
    // Call 1 runs 0–2 s and is cut off; 2 s + the 1 s pause ≤ 5 s, so call 2 starts at 3 s with
    // min(2 s, 5 s − 3 s) = 2 s and is cut off at 5 s; the 2 s pause would end past the
    // deadline, so its error is returned at once: 2 calls, exactly 5 s.
    assert_eq!(calls.get(), 2);
    assert_eq!(*starts.borrow(), [Duration::ZERO, 3 * S]);
    assert_eq!(t0.elapsed(), 5 * S);
    assert!(
        matches!(error, CallError::TimedOut(e) if e.limit() == 2 * S),
        "{error:?}"
    );
}

#[retry(timeout = "2s", deadline = "4500ms", base = "1s", jitter = none)]
async fn within_4500_ms(
    calls: &Cell<u32>,
    starts: &RefCell<Vec<Duration>>,
    t0: Instant,
) -> Result<u32, CallError> {
    never_answers(calls, starts, t0).await;
    unreachable!()
}

#[tokio::test(start_paused = true)]
async fn the_last_attempt_gets_only_the_time_left() {
    let (t0, calls, starts) = (Instant::now(), Cell::new(0), RefCell::new(Vec::new()));
    let error = within_4500_ms(&calls, &starts, t0).await.unwrap_err();
    // Call 2 starts at 3 s with 1.5 s left: it is cut off at 4.5 s, not at 5 s.
    assert_eq!(*starts.borrow(), [Duration::ZERO, 3 * S]);
    assert_eq!(t0.elapsed(), 4500 * MS);
    let CallError::TimedOut(elapsed) = error else {
        panic!("expected a timeout, got {error:?}");
    };
    assert_eq!(elapsed.limit(), 1500 * MS);
}

#[retry(timeout = "1s", deadline = "2500ms", base = "100ms", backoff = constant, jitter = none, max = 100)]
async fn many_short_attempts(
    calls: &Cell<u32>,
    starts: &RefCell<Vec<Duration>>,
    t0: Instant,
) -> Result<u32, CallError> {
    never_answers(calls, starts, t0).await;
    unreachable!()
}

#[tokio::test(start_paused = true)]
async fn the_deadline_holds_whatever_the_retry_limit() {
    let (t0, calls, starts) = (Instant::now(), Cell::new(0), RefCell::new(Vec::new()));
    many_short_attempts(&calls, &starts, t0).await.unwrap_err();
    // 0–1 s, pause, 1.1–2.1 s, pause, 2.2–2.5 s (clipped to 300 ms); then 2.6 s > 2.5 s.
    assert_eq!(*starts.borrow(), [Duration::ZERO, 1100 * MS, 2200 * MS]);
    assert_eq!(t0.elapsed(), 2500 * MS);
}

// ---- the cut-off attempt -------------------------------------------------------------------

struct CountsDrops<'a>(&'a Cell<u32>);

impl Drop for CountsDrops<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[retry(timeout = "100ms", max = 2, base = "1s", jitter = none)]
async fn holds_a_connection(calls: &Cell<u32>, dropped: &Cell<u32>) -> Result<u32, CallError> {
    calls.set(calls.get() + 1);
    // Every earlier attempt's connection is closed before the next attempt starts.
    assert_eq!(dropped.get(), calls.get() - 1);
    let _connection = CountsDrops(dropped);
    std::future::pending().await
}

#[tokio::test(start_paused = true)]
async fn a_cut_off_attempt_is_dropped_before_the_next_starts() {
    let (calls, dropped) = (Cell::new(0), Cell::new(0));
    holds_a_connection(&calls, &dropped).await.unwrap_err();
    assert_eq!((calls.get(), dropped.get()), (3, 3));
}

#[retry(timeout = "100ms", max = 1, base = "1s", jitter = none)]
async fn sendable(work: Duration) -> Result<u32, CallError> {
    tokio::time::sleep(work).await;
    Ok(7)
}

#[tokio::test(start_paused = true)]
async fn a_function_with_a_timeout_is_send() {
    let t0 = Instant::now();
    let handle = tokio::spawn(sendable(S));
    assert!(matches!(handle.await, Ok(Err(CallError::TimedOut(_)))));
    assert_eq!(t0.elapsed(), 1200 * MS);
}

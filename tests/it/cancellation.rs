//! Dropping the future of an annotated async fn stops it: no call is made afterwards, whether it
//! was dropped during a pause or during an attempt.

use crate::common::{Busy, HOUR, S};
use retry_runtime::retry;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use tokio::time::{Instant, sleep, timeout};

#[retry(max = 10, base = "10s", jitter = none)]
async fn always_busy(calls: &AtomicU32) -> Result<(), Busy> {
    Err(Busy(calls.fetch_add(1, SeqCst) + 1))
}

#[tokio::test(start_paused = true)]
async fn dropped_during_a_pause_makes_no_further_call() {
    let (t0, calls) = (Instant::now(), AtomicU32::new(0));
    // The first call fails at once; the future is dropped 5 s into the 10 s pause.
    assert!(timeout(5 * S, always_busy(&calls)).await.is_err());
    assert_eq!(t0.elapsed(), 5 * S);
    assert_eq!(calls.load(SeqCst), 1);
    sleep(HOUR).await;
    assert_eq!(calls.load(SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn dropped_during_a_later_pause() {
    let calls = AtomicU32::new(0);
    // Calls at 0 s and 10 s; dropped at 15 s, inside the 20 s pause.
    assert!(timeout(15 * S, always_busy(&calls)).await.is_err());
    assert_eq!(calls.load(SeqCst), 2);
    sleep(HOUR).await;
    assert_eq!(calls.load(SeqCst), 2);
}

#[retry(max = 10, base = "1s", jitter = none)]
async fn slow_and_busy(started: &AtomicU32, finished: &AtomicU32) -> Result<(), Busy> {
    started.fetch_add(1, SeqCst);
    sleep(10 * S).await;
    finished.fetch_add(1, SeqCst);
    Err(Busy(started.load(SeqCst)))
}

#[tokio::test(start_paused = true)]
async fn dropped_during_an_attempt_makes_no_further_call() {
    let (started, finished) = (AtomicU32::new(0), AtomicU32::new(0));
    // The first attempt runs 0–10 s, pauses 1 s; the second starts at 11 s and is dropped at 15 s.
    assert!(
        timeout(15 * S, slow_and_busy(&started, &finished))
            .await
            .is_err()
    );
    sleep(HOUR).await;
    assert_eq!(started.load(SeqCst), 2);
    assert_eq!(finished.load(SeqCst), 1);
}

#[retry(max = 10, base = "10s", jitter = none)]
async fn spawned_busy(calls: Arc<AtomicU32>) -> Result<(), Busy> {
    Err(Busy(calls.fetch_add(1, SeqCst) + 1))
}

#[tokio::test(start_paused = true)]
async fn an_aborted_task_makes_no_further_call() {
    let calls = Arc::new(AtomicU32::new(0));
    let task = tokio::spawn(spawned_busy(Arc::clone(&calls)));
    sleep(15 * S).await;
    assert_eq!(calls.load(SeqCst), 2);
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    sleep(HOUR).await;
    assert_eq!(calls.load(SeqCst), 2);
    // The task's clone of `calls` was dropped with it.
    assert_eq!(Arc::strong_count(&calls), 1);
}

//! The future of an annotated async fn is `Send` whenever the body's is: the loop holds no RNG or
//! other `!Send` state across an `.await`, whatever the jitter form, classifier or deadline.

use crate::common::Busy;
use retry_runtime::retry;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};

fn is_busy(_: &Busy) -> bool {
    true
}

fn assert_send<T: Send>(_: &T) {}

/// Counts the call and fails until call `ok_on`, after an await point.
async fn step(calls: &AtomicU32, ok_on: u32) -> Result<u32, Busy> {
    tokio::task::yield_now().await;
    let call = calls.fetch_add(1, SeqCst) + 1;
    if call >= ok_on {
        Ok(call)
    } else {
        Err(Busy(call))
    }
}

#[retry(max = 3, base = "1ms")]
async fn default_jitter(calls: &AtomicU32) -> Result<u32, Busy> {
    step(calls, 2).await
}

#[retry(max = 3, base = "1ms", jitter = full, on = |e| matches!(e, Busy(_)))]
async fn full_closure(calls: &AtomicU32) -> Result<u32, Busy> {
    step(calls, 2).await
}

#[retry(max = 3, base = "1ms", jitter = equal, on = is_busy)]
async fn equal_path(calls: &AtomicU32) -> Result<u32, Busy> {
    step(calls, 2).await
}

#[retry(max = 3, base = "1ms", jitter = decorrelated, deadline = "1s")]
async fn decorrelated_deadline(calls: &AtomicU32) -> Result<u32, Busy> {
    step(calls, 2).await
}

#[retry(max = 3, base = "1ms", jitter = "5ms", on = |e: &Busy| e.0 < 10)]
async fn absolute_typed_closure(calls: &AtomicU32) -> Result<u32, Busy> {
    step(calls, 2).await
}

#[retry(max = 3, base = "1ms", jitter = 0.3)]
async fn fraction(calls: &AtomicU32) -> Result<u32, Busy> {
    step(calls, 2).await
}

#[retry(max = 3, base = "1ms", jitter = none)]
async fn no_jitter(calls: &AtomicU32) -> Result<u32, Busy> {
    step(calls, 2).await
}

struct Counter {
    calls: AtomicU32,
}

impl Counter {
    #[retry(max = 3, base = "1ms", jitter, on = |e| e.0 < 10)]
    async fn method(&self) -> Result<u32, Busy> {
        step(&self.calls, 2).await
    }

    #[retry(max = 3, base = "1ms")]
    async fn method_mut(&mut self, extra: &str) -> Result<usize, Busy> {
        step(&self.calls, 2).await.map(|_| extra.len())
    }
}

#[test]
fn every_form_gives_a_send_future() {
    let calls = AtomicU32::new(0);
    assert_send(&default_jitter(&calls));
    assert_send(&full_closure(&calls));
    assert_send(&equal_path(&calls));
    assert_send(&decorrelated_deadline(&calls));
    assert_send(&absolute_typed_closure(&calls));
    assert_send(&fraction(&calls));
    assert_send(&no_jitter(&calls));
    let mut counter = Counter {
        calls: AtomicU32::new(0),
    };
    assert_send(&counter.method());
    assert_send(&counter.method_mut("x"));
    // None of the futures above was polled.
    assert_eq!(calls.load(SeqCst), 0);
}

#[retry(max = 3, base = "1ms", jitter = full, on = |e| matches!(e, Busy(_)))]
async fn owned(calls: Arc<AtomicU32>) -> Result<u32, Busy> {
    step(&calls, 3).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_on_a_multi_thread_runtime() {
    let counts: Vec<_> = (0..4).map(|_| Arc::new(AtomicU32::new(0))).collect();
    let tasks: Vec<_> = counts
        .iter()
        .map(|calls| tokio::spawn(owned(Arc::clone(calls))))
        .collect();
    for task in tasks {
        assert_eq!(task.await.ok(), Some(Ok(3)));
    }
    assert!(counts.iter().all(|calls| calls.load(SeqCst) == 3));

    let counter = Arc::new(Counter {
        calls: AtomicU32::new(0),
    });
    let spawned = Arc::clone(&counter);
    let answer = tokio::spawn(async move { spawned.method().await }).await;
    assert_eq!(answer.ok(), Some(Ok(2)));
    assert_eq!(counter.calls.load(SeqCst), 2);

    let calls = Arc::new(AtomicU32::new(0));
    let spawned = Arc::clone(&calls);
    let answer = tokio::spawn(async move { decorrelated_deadline(&spawned).await }).await;
    assert_eq!(answer.ok(), Some(Ok(2)));
    assert_eq!(calls.load(SeqCst), 2);
}

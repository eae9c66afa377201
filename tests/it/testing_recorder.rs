//! `retry_runtime::testing`, as a user's own tests would use it: run a closure (sync) or a future
//! (async) with pauses recorded instead of slept and jitter drawn from a seeded generator, and
//! get back the result and the pauses. Nothing waits, the same seed draws the same jitter, and
//! `deadline` is measured on the recording's virtual clock.

use crate::common::{Busy, HOUR, NEVER, S, step};
use retry_runtime::retry;
use retry_runtime::testing::{self, DEFAULT_SEED};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

// Hour-long pauses: a test that slept even one of them would not finish.
#[retry(max = 3, base = "1h", max_delay = "10h", jitter = none)]
fn read_tariffs(calls: &Cell<u32>, ok_on: u32) -> Result<u32, Busy> {
    step(calls, ok_on)
}

#[retry(max = 3, base = "1h", max_delay = "10h", jitter = none)]
async fn read_tariffs_async(calls: &Cell<u32>, ok_on: u32) -> Result<u32, Busy> {
    step(calls, ok_on)
}

#[test]
fn sync_pauses_are_listed_not_slept() {
    let (started, calls) = (Instant::now(), Cell::new(0));
    let (result, pauses) = testing::record(|| read_tariffs(&calls, NEVER));
    assert_eq!(result, Err(Busy(4)));
    assert_eq!(pauses, [HOUR, 2 * HOUR, 4 * HOUR]);
    assert!(started.elapsed() < 60 * S);
}

#[test]
fn sync_a_success_after_retries_lists_only_the_pauses_taken() {
    let calls = Cell::new(0);
    assert_eq!(
        testing::record(|| read_tariffs(&calls, 2)),
        (Ok(2), vec![HOUR])
    );
    let calls = Cell::new(0);
    assert_eq!(testing::record(|| read_tariffs(&calls, 1)), (Ok(1), vec![]));
}

#[test]
fn sync_several_calls_in_one_recording_are_listed_in_order() {
    let (first, second) = (Cell::new(0), Cell::new(0));
    let (_, pauses) = testing::record(|| {
        let _ = read_tariffs(&first, 3);
        read_tariffs(&second, 2)
    });
    assert_eq!(pauses, [HOUR, 2 * HOUR, HOUR]);
}

#[tokio::test]
async fn async_pauses_are_listed_not_slept() {
    // A real (not paused) clock: hour-long pauses would hang the test.
    let (started, calls) = (Instant::now(), Cell::new(0));
    let (result, pauses) = testing::record_async(read_tariffs_async(&calls, NEVER)).await;
    assert_eq!(result, Err(Busy(4)));
    assert_eq!(pauses, [HOUR, 2 * HOUR, 4 * HOUR]);
    assert!(started.elapsed() < 60 * S);
}

#[retry(max = 3, base = "1h", max_delay = "10h", jitter = none)]
async fn sendable(ok_on: u32) -> Result<u32, Busy> {
    tokio::task::yield_now().await;
    let n = retry_runtime::attempt().number();
    if n >= ok_on { Ok(n) } else { Err(Busy(n)) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_a_recording_can_be_spawned_on_a_multi_thread_runtime() {
    let recording = tokio::spawn(testing::record_async(sendable(3)));
    assert_eq!(recording.await.unwrap(), (Ok(3), vec![HOUR, 2 * HOUR]));
}

#[test]
fn async_a_recording_runs_on_any_executor_without_a_timer() {
    let calls = Cell::new(0);
    let (result, pauses) = block_on(testing::record_async(read_tariffs_async(&calls, NEVER)));
    assert_eq!(result, Err(Busy(4)));
    assert_eq!(pauses, [HOUR, 2 * HOUR, 4 * HOUR]);
}

// ---- seeded jitter ------------------------------------------------------------------------------

#[retry(max = 6, base = "1s", max_delay = "1m", jitter = full)]
fn jittered(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[retry(max = 6, base = "1s", max_delay = "1m", jitter = full)]
async fn jittered_async(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

fn jittered_pauses(seed: u64) -> Vec<Duration> {
    let calls = Cell::new(0);
    testing::record_seeded(seed, || jittered(&calls)).1
}

#[test]
fn the_same_seed_draws_the_same_jitter() {
    let pauses = jittered_pauses(42);
    assert_eq!(pauses.len(), 6);
    assert_eq!(jittered_pauses(42), pauses);
    // Full jitter draws from [0, d]: within the nominal pauses, and not all of them exactly.
    for (n, pause) in pauses.iter().enumerate() {
        assert!(*pause <= S * 2u32.pow(n as u32), "{pauses:?}");
    }
    assert_ne!(pauses, [1, 2, 4, 8, 16, 32].map(Duration::from_secs));
}

#[test]
fn other_seeds_draw_other_jitter() {
    assert_ne!(jittered_pauses(1), jittered_pauses(2));
}

#[test]
fn record_uses_the_default_seed() {
    let calls = Cell::new(0);
    let (_, pauses) = testing::record(|| jittered(&calls));
    assert_eq!(pauses, jittered_pauses(DEFAULT_SEED));
}

#[test]
fn sync_and_async_draw_alike_under_one_seed() {
    let calls = Cell::new(0);
    let (_, pauses) = block_on(testing::record_async_seeded(7, jittered_async(&calls)));
    assert_eq!(pauses, jittered_pauses(7));
}

// ---- deadline, in virtual time --------------------------------------------------------------------

#[retry(max = 10, base = "1s", deadline = "5s", jitter = none)]
fn within_5_s(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[retry(max = 10, base = "1s", deadline = "5s", jitter = none)]
async fn within_5_s_async(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[test]
fn sync_the_deadline_counts_the_recorded_pauses() {
    // 1 s and 2 s fit (3 s); 4 s more would end at 7 s > 5 s.
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| within_5_s(&calls));
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(pauses, [S, 2 * S]);
}

#[test]
fn async_the_deadline_counts_the_recorded_pauses() {
    let calls = Cell::new(0);
    let (result, pauses) = block_on(testing::record_async(within_5_s_async(&calls)));
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(pauses, [S, 2 * S]);
}

#[tokio::test]
async fn async_on_tokio_the_deadline_counts_the_recorded_pauses() {
    let calls = Cell::new(0);
    let (result, pauses) = testing::record_async(within_5_s_async(&calls)).await;
    assert_eq!(result, Err(Busy(3)));
    assert_eq!(pauses, [S, 2 * S]);
}

#[retry(max = 50, base = "100ms", max_delay = "1s", deadline = "4s", jitter = full)]
fn jittered_within_4_s(calls: &Cell<u32>) -> Result<u32, Busy> {
    step(calls, NEVER)
}

#[test]
fn with_jitter_the_recorded_pauses_fit_the_deadline() {
    for seed in 0..20 {
        let calls = Cell::new(0);
        let (_, pauses) = testing::record_seeded(seed, || jittered_within_4_s(&calls));
        let slept: Duration = pauses.iter().sum();
        assert!(slept <= 4 * S, "seed {seed}: {pauses:?}");
        // Stopped by the deadline, not by the 50 retries: the next pause would not fit.
        assert!(pauses.len() < 50, "seed {seed}");
    }
}

#[test]
fn outside_a_recording_pauses_are_real_again() {
    #[retry(max = 1, base = "20ms", jitter = none)]
    fn short(calls: &Cell<u32>) -> Result<u32, Busy> {
        step(calls, NEVER)
    }
    let calls = Cell::new(0);
    let _ = testing::record(|| short(&calls));
    let started = Instant::now();
    let _ = short(&calls);
    assert!(started.elapsed() >= Duration::from_millis(20));
}

/// A minimal executor: polls on this thread and parks until woken. No timer.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}

//! `sleep = path`: an async function pauses (and cuts off attempts, with `timeout`) with any
//! `Fn(Duration) -> impl Future<Output = ()>`, or a type that implements `Sleeper`, so it runs on
//! executors other than tokio. The deadline is measured on the clock of the pauses: the std
//! clock, [`std::time::Instant`], for a function; the type's own `Sleeper::now` for a type.
//!
//! The executor and the timer here are written in this file: a `block_on` that parks the thread,
//! and a timer that sleeps on a helper thread. No tokio runtime is running (except where a test
//! says otherwise), so a stray use of tokio's timer would panic. Real time passes, so the pauses
//! are milliseconds and the times are checked as bounds.

use crate::common::MS;
use retry_runtime::{Elapsed, RetryEvent, Sleeper, Transient, retry, testing};
use std::cell::Cell;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

#[derive(Debug, PartialEq)]
enum CallError {
    Busy(u32),
    TimedOut(Elapsed),
}

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        true
    }
}

impl From<Elapsed> for CallError {
    fn from(elapsed: Elapsed) -> Self {
        CallError::TimedOut(elapsed)
    }
}

fn fail(calls: &Cell<u32>) -> Result<u32, CallError> {
    calls.set(calls.get() + 1);
    Err(CallError::Busy(calls.get()))
}

// ---- a timer of our own --------------------------------------------------------------------------

/// A pause that a helper thread ends: what a small runtime's timer does.
struct ThreadSleep {
    duration: Duration,
    shared: Option<Shared>,
}

/// Whether the pause is over, and whom to wake when it is.
type Shared = Arc<Mutex<(bool, Option<Waker>)>>;

impl Future for ThreadSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let duration = self.duration;
        let shared = self.shared.get_or_insert_with(|| {
            let shared = Arc::new(Mutex::new((false, None::<Waker>)));
            let timer = Arc::clone(&shared);
            std::thread::spawn(move || {
                std::thread::sleep(duration);
                let mut state = timer.lock().expect("not poisoned");
                state.0 = true;
                if let Some(waker) = state.1.take() {
                    waker.wake();
                }
            });
            shared
        });
        let mut state = shared.lock().expect("not poisoned");
        if state.0 {
            Poll::Ready(())
        } else {
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}

std::thread_local! {
    /// What the timer was asked for on this thread, in order.
    static ASKED: std::cell::RefCell<Vec<Duration>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The timer named in the attributes: notes each duration, then sleeps on a helper thread.
fn thread_sleep(duration: Duration) -> ThreadSleep {
    ASKED.with(|asked| asked.borrow_mut().push(duration));
    ThreadSleep {
        duration,
        shared: None,
    }
}

/// Takes what the timer was asked for so far on this thread.
fn asked() -> Vec<Duration> {
    ASKED.with(|asked| std::mem::take(&mut *asked.borrow_mut()))
}

/// A minimal executor: polls on this thread and parks until woken.
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

// ---- pauses ----------------------------------------------------------------------------------------

#[retry(max = 3, base = "5ms", jitter = none, sleep = thread_sleep)]
async fn check(calls: &Cell<u32>) -> Result<u32, CallError> {
    fail(calls)
}

#[test]
fn pauses_with_the_named_timer_on_another_executor() {
    asked();
    let (started, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(block_on(check(&calls)), Err(CallError::Busy(4)));
    assert_eq!(asked(), [5 * MS, 10 * MS, 20 * MS]);
    assert!(started.elapsed() >= 35 * MS);
}

#[retry(max = 3, base = "5ms", sleep = |d: Duration| thread_sleep(d.min(Duration::from_secs(1))), notify = |_: &CallError, e: &RetryEvent| heard.lock().expect("not poisoned").push(e.pause))]
async fn check_jittered(calls: &Cell<u32>, heard: &Mutex<Vec<Duration>>) -> Result<u32, CallError> {
    fail(calls)
}

#[test]
fn a_closure_timer_is_asked_for_the_jittered_pause_notify_hears() {
    asked();
    let (calls, heard) = (Cell::new(0), Mutex::new(Vec::new()));
    let _ = block_on(check_jittered(&calls, &heard));
    let heard = heard.into_inner().unwrap();
    assert_eq!(heard.len(), 3);
    assert_eq!(asked(), heard);
}

#[test]
fn under_the_recorder_the_named_timer_is_not_called() {
    asked();
    let calls = Cell::new(0);
    let (result, pauses) = block_on(testing::record_async(check(&calls)));
    assert_eq!(result, Err(CallError::Busy(4)));
    assert_eq!(pauses, [5 * MS, 10 * MS, 20 * MS]);
    assert_eq!(asked(), []);
}

// ---- the deadline, on the std clock ------------------------------------------------------------

#[retry(max = 20, base = "10ms", backoff = constant, deadline = "35ms", jitter = none, sleep = thread_sleep)]
async fn within_35_ms(calls: &Cell<u32>) -> Result<u32, CallError> {
    fail(calls)
}

#[test]
fn the_deadline_is_measured_on_the_std_clock() {
    asked();
    let (started, calls) = (Instant::now(), Cell::new(0));
    let _ = block_on(within_35_ms(&calls));
    // Each pause takes at least 10 ms, so a fourth would end past 35 ms: at most 4 calls. The
    // first pause always fits.
    assert!((2..=4).contains(&calls.get()), "{} calls", calls.get());
    assert_eq!(asked().len() as u32, calls.get() - 1);
    assert!(started.elapsed() >= 10 * MS * (calls.get() - 1));
}

/// A paused tokio clock that has been moved an hour ahead and then stands still: with `sleep`,
/// neither the start nor the progress of the deadline may be read from it.
#[test]
fn the_deadline_ignores_a_paused_tokio_clock() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    asked();
    let calls = Cell::new(0);
    runtime.block_on(async {
        tokio::time::advance(Duration::from_secs(3600)).await;
        let _ = within_35_ms(&calls).await;
    });
    // On tokio's clock no time passes, so all 21 calls would run.
    assert!((2..=4).contains(&calls.get()), "{} calls", calls.get());
}

// ---- timeouts with the named timer --------------------------------------------------------------

#[retry(max = 2, base = "5ms", jitter = none, timeout = "20ms", sleep = thread_sleep)]
async fn never_answers(calls: &Cell<u32>) -> Result<u32, CallError> {
    calls.set(calls.get() + 1);
    std::future::pending().await
}

#[test]
fn a_timeout_is_cut_off_by_the_named_timer() {
    asked();
    let calls = Cell::new(0);
    let error = block_on(never_answers(&calls)).unwrap_err();
    assert!(
        matches!(error, CallError::TimedOut(e) if e.limit() == 20 * MS),
        "{error:?}"
    );
    assert_eq!(calls.get(), 3);
    // Limit, pause, limit, pause, limit.
    assert_eq!(asked(), [20 * MS, 5 * MS, 20 * MS, 10 * MS, 20 * MS]);
}

#[retry(max = 5, base = "20ms", jitter = none, timeout = "100ms", deadline = "160ms", sleep = thread_sleep)]
async fn never_answers_within_160_ms(calls: &Cell<u32>) -> Result<u32, CallError> {
    calls.set(calls.get() + 1);
    std::future::pending().await
}

#[test]
fn the_timeout_is_clipped_to_the_time_left_on_the_std_clock() {
    asked();
    let (started, calls) = (Instant::now(), Cell::new(0));
    let _ = block_on(never_answers_within_160_ms(&calls));
    // Cut off after 100 ms, a 20 ms pause, then at most the 40 ms left (less, as real time
    // passes between the readings); the next pause, 40 ms, would pass the deadline.
    let asked = asked();
    assert_eq!(calls.get(), 2, "{asked:?}");
    assert_eq!(&asked[..2], [100 * MS, 20 * MS]);
    assert!(asked[2] <= 40 * MS, "{asked:?}");
    assert!(started.elapsed() >= 120 * MS);
}

// ---- a `Sleeper` type: the deadline on its own clock ------------------------------------------

/// tokio's timer, named as a type: its pauses and its clock are tokio's, so a paused test
/// clock governs the deadline as it governs the pauses. (`sleep = tokio::time::sleep`, a
/// function, would pause on tokio's clock but measure the deadline on the std clock.)
struct OnTokio;

impl Sleeper for OnTokio {
    type Sleep = tokio::time::Sleep;
    fn sleep(&self, duration: Duration) -> tokio::time::Sleep {
        tokio::time::sleep(duration)
    }
    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

#[retry(max = 20, base = "10s", backoff = constant, deadline = "35s", jitter = none, sleep = OnTokio)]
async fn within_35_s(calls: &Cell<u32>) -> Result<u32, CallError> {
    fail(calls)
}

#[test]
fn a_sleeper_type_measures_the_deadline_on_its_own_clock() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let calls = Cell::new(0);
    let (took, real) = runtime.block_on(async {
        let (t0, real) = (tokio::time::Instant::now(), Instant::now());
        let _ = within_35_s(&calls).await;
        (t0.elapsed(), real.elapsed())
    });
    // On tokio's paused clock: pauses of 10 s at 0, 10 and 20 s; a fourth would end at 40 s.
    assert_eq!((calls.get(), took), (4, Duration::from_secs(30)));
    assert!(
        real < Duration::from_secs(5),
        "the paused clock slept for real: {real:?}"
    );
}

/// A clock an hour ahead of the std clock, and a sleep that returns at once: if the time the
/// call started were read on the std clock (as `start` reads it for a deadline) and the
/// progress on this one, the deadline would look an hour gone at the first failure.
struct AnHourAhead;

impl Sleeper for AnHourAhead {
    type Sleep = std::future::Ready<()>;
    fn sleep(&self, _: Duration) -> Self::Sleep {
        std::future::ready(())
    }
    fn now() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }
}

#[retry(max = 3, base = "1ms", deadline = "10s", jitter = none, sleep = AnHourAhead)]
async fn ahead(calls: &Cell<u32>) -> Result<u32, CallError> {
    fail(calls)
}

#[test]
fn the_start_of_a_deadline_is_read_on_the_sleepers_clock() {
    let calls = Cell::new(0);
    assert_eq!(block_on(ahead(&calls)), Err(CallError::Busy(4)));
    assert_eq!(calls.get(), 4);
}

//! `notify = f` is called before each pause with the error and a `RetryEvent`: the function's
//! name, the attempt that failed, the pause about to be taken (the real one, jitter and any
//! server-suggested pause included) and the time since the first call. `on_give_up = f` is called
//! once when the loop gives up on a failure it could have retried, and never for a success or a
//! permanent error. Each hook hears an error, or in its outcome form (`Result<&T, &E>`) also an
//! `Ok` that `on_result` rejected; `on_give_up` with a second argument also hears why.
//!
//! Async on tokio's paused clock, where "the real pause" can be measured exactly; sync with the
//! recorder, whose virtual clock is what `elapsed` reads.

use crate::common::{MS, S};
use retry_runtime::{GiveUp, GiveUpReason, RetryEvent, Transient, Verdict, retry, testing};
use std::cell::{Cell, RefCell};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, PartialEq)]
enum CallError {
    Busy(u32),
    SlowDown(u32, Duration),
    Invalid(u32),
}

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        !matches!(self, CallError::Invalid(_))
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            CallError::SlowDown(_, after) => Some(*after),
            _ => None,
        }
    }
}

/// What the hooks and the body saw, in the order they saw it.
#[derive(Default)]
struct Seen {
    /// When each attempt began, relative to `t0`.
    starts: RefCell<Vec<Duration>>,
    events: RefCell<Vec<(u32, RetryEvent)>>,
    gave_up: RefCell<Vec<CallError>>,
}

impl Seen {
    fn starts(&self) -> Vec<Duration> {
        self.starts.borrow().clone()
    }
    fn events(&self) -> Vec<RetryEvent> {
        self.events.borrow().iter().map(|(_, e)| *e).collect()
    }
    fn gave_up(&self) -> usize {
        self.gave_up.borrow().len()
    }
}

/// Answers `answers[n]` on call `n` (the last one for later calls) after 100 ms of work.
async fn work(
    seen: &Seen,
    t0: Instant,
    answers: &[Result<u32, CallError>],
) -> Result<u32, CallError> {
    let call = seen.starts.borrow().len();
    seen.starts.borrow_mut().push(t0.elapsed());
    tokio::time::sleep(100 * MS).await;
    match &answers[call.min(answers.len() - 1)] {
        Ok(n) => Ok(*n),
        Err(CallError::Busy(_)) => Err(CallError::Busy(call as u32 + 1)),
        Err(CallError::SlowDown(_, d)) => Err(CallError::SlowDown(call as u32 + 1, *d)),
        Err(CallError::Invalid(_)) => Err(CallError::Invalid(call as u32 + 1)),
    }
}

fn busy() -> Result<u32, CallError> {
    Err(CallError::Busy(0))
}

/// The default jitter: each pause is `d + U[0, d/2)`, so the real pause differs from `d`.
#[retry(
    max = 3,
    base = "1s",
    notify = |e: &CallError, event: &RetryEvent| seen.events.borrow_mut().push((error_call(e), *event)),
    on_give_up = |e: &CallError| seen.gave_up.borrow_mut().push(copy(e)),
)]
async fn check_coverage(
    seen: &Seen,
    t0: Instant,
    answers: &[Result<u32, CallError>],
) -> Result<u32, CallError> {
    work(seen, t0, answers).await
}

fn error_call(e: &CallError) -> u32 {
    match e {
        CallError::Busy(n) | CallError::SlowDown(n, _) | CallError::Invalid(n) => *n,
    }
}

fn copy(e: &CallError) -> CallError {
    match e {
        CallError::Busy(n) => CallError::Busy(*n),
        CallError::SlowDown(n, d) => CallError::SlowDown(*n, *d),
        CallError::Invalid(n) => CallError::Invalid(*n),
    }
}

/// How long tokio's timer takes for `pause`: it ticks in whole milliseconds and rounds up.
fn on_tokio_timer(pause: Duration) -> Duration {
    let ms = pause.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(ms).expect("a short pause"))
}

#[tokio::test(start_paused = true)]
async fn notify_hears_the_pause_the_clock_measures() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(
        check_coverage(&seen, t0, &[busy()]).await,
        Err(CallError::Busy(4))
    );
    let (starts, events) = (seen.starts(), seen.events());
    assert_eq!(starts.len(), 4);
    assert_eq!(events.len(), 3);
    for (n, event) in events.iter().enumerate() {
        // Attempt n + 1 failed after its 100 ms of work; the next began one pause later.
        assert_eq!(event.function, "check_coverage");
        assert_eq!(event.attempt, n as u32 + 1);
        assert_eq!(event.elapsed, starts[n] + 100 * MS);
        assert_eq!(
            starts[n + 1],
            event.elapsed + on_tokio_timer(event.pause),
            "event {event:?}"
        );
        // The jittered pause, not the nominal one: in [d, 1.5 d).
        let nominal = S * 2u32.pow(n as u32);
        assert!(event.pause >= nominal && event.pause < nominal * 3 / 2);
    }
    assert!(
        events
            .iter()
            .enumerate()
            .any(|(n, e)| e.pause != S * 2u32.pow(n as u32)),
        "jitter drew exactly the nominal pause three times: {events:?}"
    );
    // Each event came with the error of the attempt it reports.
    let calls: Vec<u32> = seen.events.borrow().iter().map(|(c, _)| *c).collect();
    assert_eq!(calls, [1, 2, 3]);
}

#[tokio::test(start_paused = true)]
async fn notify_hears_a_server_suggested_pause() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let answers = [Err(CallError::SlowDown(0, 7 * S)), Ok(5)];
    assert_eq!(check_coverage(&seen, t0, &answers).await, Ok(5));
    let event = seen.events()[0];
    // At least the 7 s asked, spread above it by the default jitter: 7 s + U[0, 3.5 s).
    assert!(
        event.pause >= 7 * S && event.pause < 10500 * MS,
        "{event:?}"
    );
    assert_eq!(
        seen.starts(),
        [Duration::ZERO, 100 * MS + on_tokio_timer(event.pause)]
    );
}

#[tokio::test(start_paused = true)]
async fn elapsed_counts_from_the_first_call_not_from_making_the_future() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let answers = [busy(), Ok(5)];
    let future = check_coverage(&seen, t0, &answers);
    tokio::time::sleep(10 * S).await;
    assert_eq!(future.await, Ok(5));
    assert_eq!(seen.events()[0].elapsed, 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn on_give_up_is_called_once_with_the_last_error() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(
        check_coverage(&seen, t0, &[busy()]).await,
        Err(CallError::Busy(4))
    );
    assert_eq!(*seen.gave_up.borrow(), [CallError::Busy(4)]);
}

#[tokio::test(start_paused = true)]
async fn on_give_up_is_called_when_a_suggested_pause_is_too_long() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let answers = [busy(), Err(CallError::SlowDown(0, 31 * S))];
    assert_eq!(
        check_coverage(&seen, t0, &answers).await,
        Err(CallError::SlowDown(2, 31 * S))
    );
    assert_eq!(seen.events().len(), 1);
    assert_eq!(*seen.gave_up.borrow(), [CallError::SlowDown(2, 31 * S)]);
}

#[tokio::test(start_paused = true)]
async fn no_hook_runs_on_a_first_success() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(check_coverage(&seen, t0, &[Ok(5)]).await, Ok(5));
    assert_eq!((seen.events().len(), seen.gave_up()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn on_give_up_is_not_called_after_retries_that_succeed() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(
        check_coverage(&seen, t0, &[busy(), busy(), Ok(5)]).await,
        Ok(5)
    );
    assert_eq!((seen.events().len(), seen.gave_up()), (2, 0));
}

#[tokio::test(start_paused = true)]
async fn no_give_up_for_a_permanent_error() {
    let (t0, seen) = (Instant::now(), Seen::default());
    let answers = [busy(), Err(CallError::Invalid(0))];
    assert_eq!(
        check_coverage(&seen, t0, &answers).await,
        Err(CallError::Invalid(2))
    );
    // Notified of the retried failure, and nothing for the permanent one.
    assert_eq!((seen.events().len(), seen.gave_up()), (1, 0));
}

static DEADLINE_GIVE_UPS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn count_give_up(_: &CallError) {
    DEADLINE_GIVE_UPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

#[retry(max = 10, base = "1s", deadline = "2s", jitter = none, on_give_up = count_give_up)]
async fn within_2_s(seen: &Seen, t0: Instant) -> Result<u32, CallError> {
    work(seen, t0, &[busy()]).await
}

#[tokio::test(start_paused = true)]
async fn on_give_up_is_called_once_at_the_deadline() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(within_2_s(&seen, t0).await, Err(CallError::Busy(2)));
    // 0–0.1 s, pause 1 s, 1.1–1.2 s; a 2 s pause would end past 2 s.
    assert_eq!(t0.elapsed(), 1200 * MS);
    assert_eq!(
        DEADLINE_GIVE_UPS.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

// ---- nested: the layer above decides ----------------------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none, on_give_up = |_: &CallError| inner_gave_up.set(inner_gave_up.get() + 1))]
async fn inner(calls: &Cell<u32>, inner_gave_up: &Cell<u32>) -> Result<u32, CallError> {
    calls.set(calls.get() + 1);
    Err(CallError::Busy(calls.get()))
}

#[retry(max = 2, base = "1ms", jitter = none, on_give_up = |_: &CallError| outer_gave_up.set(outer_gave_up.get() + 1))]
async fn outer(
    calls: &Cell<u32>,
    inner_gave_up: &Cell<u32>,
    outer_gave_up: &Cell<u32>,
) -> Result<u32, CallError> {
    inner(calls, inner_gave_up).await
}

#[tokio::test(start_paused = true)]
async fn on_give_up_is_not_called_when_a_layer_above_retries() {
    let (calls, inner_gave_up, outer_gave_up) = (Cell::new(0), Cell::new(0), Cell::new(0));
    assert_eq!(
        outer(&calls, &inner_gave_up, &outer_gave_up).await,
        Err(CallError::Busy(3))
    );
    // The inner function makes one attempt per outer attempt and leaves the decision to the
    // outer loop, which gives up once.
    assert_eq!(calls.get(), 3);
    assert_eq!((inner_gave_up.get(), outer_gave_up.get()), (0, 1));
}

// ---- sync, with the recorder --------------------------------------------------------------------

#[retry(
    max = 4,
    base = "1s",
    jitter = full,
    notify = |_: &CallError, event: &RetryEvent| events.borrow_mut().push(*event),
    on_give_up = |_: &CallError| gave_up.set(gave_up.get() + 1),
)]
fn check_blocking(
    calls: &Cell<u32>,
    events: &RefCell<Vec<RetryEvent>>,
    gave_up: &Cell<u32>,
) -> Result<u32, CallError> {
    calls.set(calls.get() + 1);
    Err(CallError::Busy(calls.get()))
}

#[test]
fn sync_notify_hears_the_recorded_pauses_and_the_virtual_elapsed_time() {
    let (calls, events, gave_up) = (Cell::new(0), RefCell::new(Vec::new()), Cell::new(0));
    let (result, pauses) = testing::record(|| check_blocking(&calls, &events, &gave_up));
    assert_eq!(result, Err(CallError::Busy(5)));
    let events = events.into_inner();
    let heard: Vec<Duration> = events.iter().map(|e| e.pause).collect();
    assert_eq!(heard, pauses);
    // On the recording's clock only pauses take time: elapsed is the sum of the earlier ones.
    let mut slept = Duration::ZERO;
    for (n, event) in events.iter().enumerate() {
        assert_eq!(
            (event.function, event.attempt),
            ("check_blocking", n as u32 + 1)
        );
        assert_eq!(event.elapsed, slept);
        slept += event.pause;
    }
    assert_eq!(gave_up.get(), 1);
}

// ---- a rejected `Ok`: every pause announced, every give-up heard ------------------------------

/// What the outcome forms heard: for each pause and for the give-up, the status of a rejected
/// `Ok` or the error.
#[derive(Default)]
struct Heard {
    pauses: RefCell<Vec<(String, Duration)>>,
    gave_up: RefCell<Vec<(String, GiveUp)>>,
    /// What the plain forms heard, beside them.
    plain_pauses: Cell<u32>,
    plain_gave_up: Cell<u32>,
}

fn describe(outcome: Result<&u16, &CallError>) -> String {
    match outcome {
        Ok(status) => format!("Ok({status})"),
        Err(error) => format!("{error:?}"),
    }
}

#[retry(
    max = 3,
    base = "1s",
    jitter = none,
    on_result = |status: &u16| if *status == 503 { Verdict::RetryAfter(2 * S) } else { Verdict::Fail },
    notify = |outcome: Result<&u16, &CallError>, event: &RetryEvent| heard.pauses.borrow_mut().push((describe(outcome), event.pause)),
    on_give_up = |outcome: Result<&u16, &CallError>, why: &GiveUp| heard.gave_up.borrow_mut().push((describe(outcome), *why)),
)]
async fn get_status(
    answers: &RefCell<Vec<Result<u16, CallError>>>,
    heard: &Heard,
) -> Result<u16, CallError> {
    answers.borrow_mut().remove(0)
}

#[retry(
    max = 3,
    base = "1s",
    jitter = none,
    on_result = |status: &u16| *status == 503,
    notify = |_: &CallError, _: &RetryEvent| heard.plain_pauses.set(heard.plain_pauses.get() + 1),
    on_give_up = |_: &CallError| heard.plain_gave_up.set(heard.plain_gave_up.get() + 1),
)]
async fn get_status_plain(
    answers: &RefCell<Vec<Result<u16, CallError>>>,
    heard: &Heard,
) -> Result<u16, CallError> {
    answers.borrow_mut().remove(0)
}

#[tokio::test(start_paused = true)]
async fn the_outcome_forms_hear_every_pause_and_the_give_up_of_a_rejected_ok() {
    let heard = Heard::default();
    let answers = RefCell::new(vec![Ok(503), Err(CallError::Busy(2)), Ok(503), Ok(503)]);
    let t0 = Instant::now();
    assert_eq!(get_status(&answers, &heard).await, Ok(503));
    // A 503 asks for 2 s (`RetryAfter` from `on_result`), the error gets the policy's 2 s.
    assert_eq!(
        *heard.pauses.borrow(),
        [
            ("Ok(503)".to_owned(), 2 * S),
            ("Busy(2)".to_owned(), 2 * S),
            ("Ok(503)".to_owned(), 4 * S),
        ]
    );
    let gave_up = heard.gave_up.borrow();
    assert_eq!(gave_up.len(), 1);
    assert_eq!(gave_up[0].0, "Ok(503)");
    assert_eq!(gave_up[0].1.reason, GiveUpReason::Exhausted);
    assert_eq!((gave_up[0].1.attempts, gave_up[0].1.elapsed), (4, 8 * S));
    assert_eq!(t0.elapsed(), 8 * S);
}

#[tokio::test(start_paused = true)]
async fn the_plain_forms_hear_the_errors_only() {
    let heard = Heard::default();
    let answers = RefCell::new(vec![Ok(503), Err(CallError::Busy(2)), Ok(503), Ok(503)]);
    assert_eq!(get_status_plain(&answers, &heard).await, Ok(503));
    assert_eq!(
        (heard.plain_pauses.get(), heard.plain_gave_up.get()),
        (1, 0)
    );
}

// ---- `on_give_up` hears why ----------------------------------------------------------------------

static WHYS: std::sync::Mutex<Vec<GiveUpReason>> = std::sync::Mutex::new(Vec::new());

fn why_given_up(_: &CallError, why: &GiveUp) {
    WHYS.lock().expect("not poisoned").push(why.reason);
}

static OPENS_AFTER_TWO: retry_runtime::CircuitBreaker = retry_runtime::CircuitBreaker::new()
    .consecutive_failures(2)
    .open_for(Duration::from_secs(60));

impl From<retry_runtime::CircuitOpen> for CallError {
    fn from(_: retry_runtime::CircuitOpen) -> Self {
        CallError::Invalid(0)
    }
}

#[retry(max = 3, base = "2s", jitter = none, breaker = OPENS_AFTER_TWO, notify = |e: &CallError, event: &RetryEvent| seen.events.borrow_mut().push((error_call(e), *event)), on_give_up = why_given_up)]
async fn behind_breaker(seen: &Seen, t0: Instant) -> Result<u32, CallError> {
    work(seen, t0, &[busy()]).await
}

/// The design notes' case: `max = 3`, a breaker that opens after two failures in a row. The
/// second failure opens it; the loop gives up at once with that failure, announces no pause and
/// sleeps none, and `on_give_up` hears that the breaker is open.
#[tokio::test(start_paused = true)]
async fn a_breaker_that_opens_ends_the_loop_at_once_and_on_give_up_hears_why() {
    let (t0, seen) = (Instant::now(), Seen::default());
    assert_eq!(behind_breaker(&seen, t0).await, Err(CallError::Busy(2)));
    // One pause (2 s) between the two attempts of 100 ms each; none after the second.
    assert_eq!(seen.events().len(), 1);
    assert_eq!(t0.elapsed(), 2200 * MS);
    assert_eq!(
        *WHYS.lock().expect("not poisoned"),
        [GiveUpReason::BreakerOpen]
    );
    // Refused before its first attempt: `E::from(CircuitOpen)`, heard too, no attempt made.
    assert_eq!(behind_breaker(&seen, t0).await, Err(CallError::Invalid(0)));
    assert_eq!(seen.starts().len(), 2);
    assert_eq!(
        *WHYS.lock().expect("not poisoned"),
        [GiveUpReason::BreakerOpen, GiveUpReason::BreakerOpen]
    );
}

// ---- the outcome forms written with one lifetime -------------------------------------------------

thread_local! {
    /// What the one-lifetime hooks heard, on this test's thread.
    static ONE_LIFETIME: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The outcome as `Result::as_ref` gives it: one lifetime for both sides, as the README writes it.
fn log_pause<'a>(outcome: Result<&'a u16, &'a CallError>, event: &RetryEvent) {
    let line = format!("pause {} {:?}", describe(outcome), event.pause);
    ONE_LIFETIME.with(|heard| heard.borrow_mut().push(line));
}

fn log_give_up<'a>(outcome: Result<&'a u16, &'a CallError>, why: &GiveUp) {
    let line = format!("give up {} {}", describe(outcome), why.attempts);
    ONE_LIFETIME.with(|heard| heard.borrow_mut().push(line));
}

#[retry(
    max = 2,
    base = "1s",
    jitter = none,
    on_result = |status: &u16| *status == 503,
    notify = log_pause,
    on_give_up = log_give_up,
)]
async fn get_status_one_lifetime(
    answers: &RefCell<Vec<Result<u16, CallError>>>,
) -> Result<u16, CallError> {
    answers.borrow_mut().remove(0)
}

#[tokio::test(start_paused = true)]
async fn outcome_hooks_written_with_one_lifetime_hear_every_pause_and_the_give_up() {
    let answers = RefCell::new(vec![Ok(503), Err(CallError::Busy(2)), Ok(503)]);
    assert_eq!(get_status_one_lifetime(&answers).await, Ok(503));
    assert_eq!(
        ONE_LIFETIME.with(|heard| heard.take()),
        ["pause Ok(503) 1s", "pause Busy(2) 2s", "give up Ok(503) 3"]
    );
}

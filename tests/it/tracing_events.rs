//! The `tracing` feature (on by default): each failed attempt that will be retried is one `INFO`
//! event with the function's name, the attempt, the pause and the error; a call that fails after
//! retrying, or that the loop gives up on, ends with exactly one event at `log_level` (`ERROR` by
//! default), whatever ended it; a permanent error on the first call and the happy path log
//! nothing at all. An error type without `Debug` is shown by its type name.
//!
//! A hand-written `tracing::Subscriber` captures every event of this thread with its level and
//! fields, formatted as `Debug` (strings and numbers as written).

use retry_runtime::{
    CircuitBreaker, CircuitOpen, RetryBudget, RetryEvent, Transient, Verdict, retry,
};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Level, Metadata, span};

/// One event as captured: its level, target and fields.
#[derive(Clone, Debug)]
pub(crate) struct Captured {
    pub(crate) level: Level,
    pub(crate) target: String,
    fields: BTreeMap<String, String>,
}

impl Captured {
    pub(crate) fn field(&self, name: &str) -> &str {
        self.fields
            .get(name)
            .map_or_else(|| panic!("no field `{name}` in {self:?}"), String::as_str)
    }

    /// The field `name`, if the event has it.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl tracing::Subscriber for Capture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let metadata = event.metadata();
        self.0.lock().expect("not poisoned").push(Captured {
            level: *metadata.level(),
            target: metadata.target().to_owned(),
            fields,
        });
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

use crate::common::callsites;

/// Runs `f` with every event on this thread captured; returns them in order.
pub(crate) fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<Captured>) {
    callsites::keep_open();
    let capture = Capture::default();
    let result = tracing::subscriber::with_default(capture.clone(), f);
    let events = capture.0.lock().expect("not poisoned").clone();
    (result, events)
}

/// Runs an async test on a current-thread runtime with the paused clock, capturing its events.
pub(crate) fn capture_async<F: Future>(f: impl FnOnce() -> F) -> (F::Output, Vec<Captured>) {
    capture(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime")
            .block_on(f())
    })
}

pub(crate) fn levels(events: &[Captured]) -> Vec<Level> {
    events.iter().map(|e| e.level).collect()
}

#[derive(Debug, PartialEq)]
enum ClaimError {
    Overloaded(u32),
    SlowDown(Duration),
    Invalid,
    Refused(CircuitOpen),
}

impl Transient for ClaimError {
    fn is_transient(&self) -> bool {
        !matches!(self, ClaimError::Invalid | ClaimError::Refused(_))
    }
    fn retry_after(&self) -> Option<Duration> {
        match self {
            ClaimError::SlowDown(d) => Some(*d),
            _ => None,
        }
    }
}

/// Fails with `Overloaded(n)` until call `ok_on`.
fn step(calls: &Cell<u32>, ok_on: u32) -> Result<u32, ClaimError> {
    calls.set(calls.get() + 1);
    if calls.get() >= ok_on {
        Ok(calls.get())
    } else {
        Err(ClaimError::Overloaded(calls.get()))
    }
}

const NEVER: u32 = u32::MAX;

#[retry(max = 2, base = "1ms", jitter = none)]
fn submit_claim(calls: &Cell<u32>, ok_on: u32) -> Result<u32, ClaimError> {
    step(calls, ok_on)
}

#[test]
fn the_happy_path_logs_nothing() {
    let calls = Cell::new(0);
    let (result, events) = capture(|| submit_claim(&calls, 1));
    assert_eq!(result, Ok(1));
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn each_retried_failure_is_one_info_event_with_its_fields() {
    let calls = Cell::new(0);
    let (result, events) = capture(|| submit_claim(&calls, 3));
    assert_eq!(result, Ok(3));
    assert_eq!(levels(&events), [Level::INFO, Level::INFO]);
    for (n, event) in events.iter().enumerate() {
        assert!(event.target.starts_with("retry_runtime"), "{event:?}");
        assert_eq!(event.field("function"), "submit_claim");
        assert_eq!(event.field("attempt"), (n + 1).to_string());
        assert_eq!(event.field("pause"), format!("{}ms", 1 << n));
        assert_eq!(event.field("error"), format!("Overloaded({})", n + 1));
        assert_eq!(event.field("message"), "attempt failed; retrying");
    }
}

#[test]
fn the_final_failure_is_one_error_event() {
    let calls = Cell::new(0);
    let (result, events) = capture(|| submit_claim(&calls, NEVER));
    assert_eq!(result, Err(ClaimError::Overloaded(3)));
    assert_eq!(levels(&events), [Level::INFO, Level::INFO, Level::ERROR]);
    let last = &events[2];
    assert_eq!(last.field("function"), "submit_claim");
    assert_eq!(last.field("attempts"), "3");
    assert_eq!(last.field("reason"), "retries used up");
    assert_eq!(last.field("error"), "Overloaded(3)");
    assert_eq!(last.field("message"), "giving up");
}

#[retry(max = 2, base = "1ms", jitter = none)]
fn check_claim(answers: &RefCell<Vec<ClaimError>>) -> Result<u32, ClaimError> {
    Err(answers.borrow_mut().remove(0))
}

#[test]
fn a_permanent_error_is_the_callers_to_log() {
    let answers = RefCell::new(vec![ClaimError::Invalid]);
    let (result, events) = capture(|| check_claim(&answers));
    assert_eq!(result, Err(ClaimError::Invalid));
    assert!(events.is_empty(), "{events:?}");
}

/// Two transient failures, then a permanent error: the log says how the call ended.
#[test]
fn a_permanent_error_after_retries_is_the_one_final_event() {
    let answers = RefCell::new(vec![
        ClaimError::Overloaded(1),
        ClaimError::Overloaded(2),
        ClaimError::Invalid,
    ]);
    let (result, events) = capture(|| check_claim(&answers));
    assert_eq!(result, Err(ClaimError::Invalid));
    assert_eq!(levels(&events), [Level::INFO, Level::INFO, Level::ERROR]);
    let last = &events[2];
    assert_eq!(last.field("function"), "check_claim");
    assert_eq!(last.field("attempts"), "3");
    assert_eq!(last.field("reason"), "the error is not worth retrying");
    assert_eq!(last.field("error"), "Invalid");
    assert_eq!(last.field("message"), "failed after retries");
}

#[retry(max = 2, base = "1ms", max_delay = "10s", jitter = none)]
fn check_claim_capped(answers: &RefCell<Vec<ClaimError>>) -> Result<u32, ClaimError> {
    Err(answers.borrow_mut().remove(0))
}

#[test]
fn a_server_suggested_pause_is_logged_and_one_too_long_is_the_reason_to_give_up() {
    let answers = RefCell::new(vec![
        ClaimError::SlowDown(Duration::from_millis(5)),
        ClaimError::SlowDown(Duration::from_secs(60)),
    ]);
    let (_, events) = capture(|| check_claim_capped(&answers));
    assert_eq!(levels(&events), [Level::INFO, Level::ERROR]);
    // The default jitter spreads above the 5 ms asked, up to 7.5 ms.
    let pause = &events[0].field("pause");
    assert!(
        pause.starts_with('5') || pause.starts_with('6') || pause.starts_with('7'),
        "{pause}"
    );
    assert_eq!(
        events[1].field("reason"),
        "the server asked for a 60s pause, longer than `max_delay`"
    );
    assert_eq!(events[1].field("attempts"), "2");
}

// ---- async ----------------------------------------------------------------------------------------

#[retry(max = 3, base = "1s", deadline = "4s", jitter = none, timeout = "500ms")]
async fn submit_claim_async(calls: &Cell<u32>) -> Result<u32, ClaimError> {
    calls.set(calls.get() + 1);
    std::future::pending().await
}

impl From<retry_runtime::Elapsed> for ClaimError {
    fn from(_: retry_runtime::Elapsed) -> Self {
        ClaimError::Overloaded(0)
    }
}

#[test]
fn async_timeouts_and_the_deadline() {
    let calls = Cell::new(0);
    let ((result, took), events) = capture_async(|| async {
        let t0 = tokio::time::Instant::now();
        (submit_claim_async(&calls).await, t0.elapsed())
    });
    assert_eq!(result, Err(ClaimError::Overloaded(0)));
    // Cut off at 0.5 s, pause 1 s; cut off at 2 s, pause 2 s ends at 4 s, exactly the deadline;
    // call 3 has no time left and is cut off at once; a 4 s pause would pass the deadline.
    assert_eq!((calls.get(), took), (3, Duration::from_secs(4)));
    assert_eq!(levels(&events), [Level::INFO, Level::INFO, Level::ERROR]);
    assert_eq!(events[0].field("function"), "submit_claim_async");
    assert_eq!(
        [events[0].field("pause"), events[1].field("pause")],
        ["1s", "2s"]
    );
    assert_eq!(
        events[2].field("reason"),
        "the next pause would end past the deadline"
    );
}

#[test]
fn async_the_happy_path_logs_nothing() {
    #[retry(max = 3, base = "1s", timeout = "1s", notify = |_: &ClaimError, _: &RetryEvent| ())]
    async fn fine() -> Result<u32, ClaimError> {
        tokio::time::sleep(Duration::from_millis(10)).await;
        Ok(1)
    }
    let (result, events) = capture_async(fine);
    assert_eq!(result, Ok(1));
    assert!(events.is_empty(), "{events:?}");
}

/// With the default jitter, the logged pause is the one notify hears: the real one.
#[retry(max = 3, base = "1s", notify = |_: &ClaimError, e: &RetryEvent| heard.borrow_mut().push(e.pause))]
async fn jittered(calls: &Cell<u32>, heard: &RefCell<Vec<Duration>>) -> Result<u32, ClaimError> {
    step(calls, NEVER)
}

#[test]
fn async_the_logged_pause_is_the_jittered_one() {
    let (calls, heard) = (Cell::new(0), RefCell::new(Vec::new()));
    let (_, events) = capture_async(|| jittered(&calls, &heard));
    let logged: Vec<&str> = events
        .iter()
        .filter(|e| e.level == Level::INFO)
        .map(|e| e.field("pause"))
        .collect();
    let heard: Vec<String> = heard.borrow().iter().map(|d| format!("{d:?}")).collect();
    assert_eq!(logged, heard);
}

// ---- `on_result` -----------------------------------------------------------------------------------

#[retry(max = 2, base = "1ms", jitter = none, on_result = |status: &u16| *status == 503)]
fn get_status(statuses: &RefCell<Vec<u16>>) -> Result<u16, ClaimError> {
    Ok(statuses.borrow_mut().remove(0))
}

#[test]
fn a_rejected_value_that_is_retried_is_one_info_event() {
    let statuses = RefCell::new(vec![503, 200]);
    let (result, events) = capture(|| get_status(&statuses));
    assert_eq!(result, Ok(200));
    assert_eq!(levels(&events), [Level::INFO]);
    assert_eq!(events[0].field("function"), "get_status");
    assert_eq!(events[0].field("attempt"), "1");
    assert_eq!(events[0].field("pause"), "1ms");
}

#[test]
fn a_rejected_value_when_retries_run_out_is_one_error() {
    let statuses = RefCell::new(vec![503, 503, 503]);
    let (result, events) = capture(|| get_status(&statuses));
    assert_eq!(result, Ok(503));
    assert_eq!(levels(&events), [Level::INFO, Level::INFO, Level::ERROR]);
    assert_eq!(events[2].field("function"), "get_status");
    assert_eq!(events[2].field("attempts"), "3");
    assert_eq!(events[2].field("reason"), "retries used up");
}

// ---- on `Verdict` directly ---------------------------------------------------------------------------

#[retry(max = 1, base = "1ms", jitter = none, on = |_: &ClaimError| Verdict::RetryAfter(Duration::from_millis(3)))]
fn by_verdict(calls: &Cell<u32>) -> Result<u32, ClaimError> {
    step(calls, NEVER)
}

#[test]
fn a_verdicts_pause_is_logged() {
    let calls = Cell::new(0);
    let (_, events) = capture(|| by_verdict(&calls));
    assert_eq!(levels(&events), [Level::INFO, Level::ERROR]);
    assert_eq!(events[0].field("pause"), "3ms");
}

// ---- one final event, whatever ended the call -----------------------------------------------

/// The final events of `events`: every one that is not a retried failure.
fn finals(events: &[Captured]) -> Vec<&Captured> {
    events.iter().filter(|e| e.level != Level::INFO).collect()
}

#[test]
fn every_ending_after_a_retry_logs_exactly_one_final_event() {
    // The limit.
    let calls = Cell::new(0);
    let (_, events) = capture(|| submit_claim(&calls, NEVER));
    assert_eq!(finals(&events).len(), 1);
    assert_eq!(finals(&events)[0].field("reason"), "retries used up");

    // A permanent error.
    let answers = RefCell::new(vec![ClaimError::Overloaded(1), ClaimError::Invalid]);
    let (_, events) = capture(|| check_claim(&answers));
    assert_eq!(finals(&events).len(), 1);
    assert_eq!(
        finals(&events)[0].field("reason"),
        "the error is not worth retrying"
    );

    // A server-suggested pause too long.
    let answers = RefCell::new(vec![
        ClaimError::Overloaded(1),
        ClaimError::SlowDown(Duration::from_secs(60)),
    ]);
    let (_, events) = capture(|| check_claim_capped(&answers));
    assert_eq!(finals(&events).len(), 1);

    // The deadline: 1 ms, then a 2 ms pause would pass 2.5 ms.
    #[retry(max = 5, base = "1ms", deadline = "2500us", jitter = none)]
    fn within_deadline(calls: &Cell<u32>) -> Result<u32, ClaimError> {
        step(calls, NEVER)
    }
    let calls = Cell::new(0);
    let (_, events) = capture(|| retry_runtime::testing::record(|| within_deadline(&calls)));
    assert_eq!(levels(&events), [Level::INFO, Level::ERROR]);
    assert_eq!(
        events[1].field("reason"),
        "the next pause would end past the deadline"
    );

    // The budget: empty after its reserve of one retry per second.
    static BUDGET: RetryBudget = RetryBudget::new().ratio(0.0).min_per_second(1);
    #[retry(max = 5, base = "1ms", jitter = none, budget = BUDGET)]
    fn within_budget(calls: &Cell<u32>) -> Result<u32, ClaimError> {
        step(calls, NEVER)
    }
    let calls = Cell::new(0);
    let (_, events) = capture(|| within_budget(&calls));
    assert_eq!(levels(&events), [Level::INFO, Level::ERROR]);
    assert_eq!(events[1].field("reason"), "the retry budget is empty");
    assert_eq!(events[1].field("attempts"), "2");

    // The breaker, opening after two failures in a row.
    static BREAKER: CircuitBreaker = CircuitBreaker::new()
        .consecutive_failures(2)
        .open_for(Duration::from_secs(3600));
    #[retry(max = 5, base = "1ms", jitter = none, breaker = BREAKER)]
    fn behind_breaker(calls: &Cell<u32>) -> Result<u32, ClaimError> {
        step(calls, NEVER)
    }
    let calls = Cell::new(0);
    let (result, events) = capture(|| behind_breaker(&calls));
    assert_eq!(result, Err(ClaimError::Overloaded(2)));
    assert_eq!(levels(&events), [Level::INFO, Level::ERROR]);
    assert_eq!(events[1].field("reason"), "the circuit breaker is open");
    assert_eq!(events[1].field("error"), "Overloaded(2)");

    // The open breaker refuses the next call before its first attempt: one event, no retry.
    let (result, events) = capture(|| behind_breaker(&calls));
    assert!(matches!(result, Err(ClaimError::Refused(_))));
    assert_eq!(levels(&events), [Level::ERROR]);
    assert_eq!(events[0].field("reason"), "the circuit breaker is open");
    assert_eq!(events[0].field("attempts"), "0");
    assert_eq!(calls.get(), 2);
}

impl From<CircuitOpen> for ClaimError {
    fn from(open: CircuitOpen) -> Self {
        ClaimError::Refused(open)
    }
}

#[retry(max = 1, base = "1ms", jitter = none, log_level = "warn")]
fn warned(calls: &Cell<u32>) -> Result<u32, ClaimError> {
    step(calls, NEVER)
}

#[retry(max = 1, base = "1ms", jitter = none, log_level = debug)]
fn quiet(calls: &Cell<u32>) -> Result<u32, ClaimError> {
    step(calls, NEVER)
}

#[test]
fn log_level_chooses_the_level_of_the_final_event_only() {
    let calls = Cell::new(0);
    let (_, events) = capture(|| warned(&calls));
    assert_eq!(levels(&events), [Level::INFO, Level::WARN]);
    assert_eq!(events[1].field("message"), "giving up");
    let calls = Cell::new(0);
    let (_, events) = capture(|| quiet(&calls));
    assert_eq!(levels(&events), [Level::INFO, Level::DEBUG]);
}

// ---- an error type without `Debug` ------------------------------------------------------------

/// No `Debug`: logged by its type name.
struct Opaque;

impl Transient for Opaque {
    fn is_transient(&self) -> bool {
        true
    }
}

#[retry(max = 1, base = "1ms", jitter = none)]
fn opaque() -> Result<u32, Opaque> {
    Err(Opaque)
}

/// A generic error type with no `Debug` bound: the function adds none.
#[retry(max = 1, base = "1ms", jitter = none)]
fn generic<E: Transient>(make: &dyn Fn() -> E) -> Result<u32, E> {
    Err(make())
}

#[test]
fn an_error_without_debug_is_logged_by_its_type_name() {
    let (result, events) = capture(opaque);
    assert!(result.is_err());
    assert_eq!(levels(&events), [Level::INFO, Level::ERROR]);
    // The type's full path: this module's (`it::tracing_events`) and its name.
    let shown = concat!("a `", module_path!(), "::Opaque` (no `Debug`)");
    assert_eq!(
        [events[0].field("error"), events[1].field("error")],
        [shown, shown]
    );
}

#[test]
fn a_generic_error_without_a_debug_bound_is_logged_by_its_type_name() {
    // Even where the type has `Debug`: inside `generic`, `E` has no such bound.
    let (_, events) = capture(|| generic(&|| ClaimError::Overloaded(7)));
    assert_eq!(
        events[0].field("error"),
        concat!("a `", module_path!(), "::ClaimError` (no `Debug`)")
    );
    let (_, events) = capture(|| generic(&|| Opaque));
    assert_eq!(
        events[1].field("error"),
        concat!("a `", module_path!(), "::Opaque` (no `Debug`)")
    );
}

//! The `tracing` feature (on by default): each failed attempt that will be retried is one `INFO`
//! event with the function's name, the attempt, the pause and the error; the final failure is one
//! `WARN` event; the happy path logs nothing at all.
//!
//! A hand-written `tracing::Subscriber` captures every event of this thread with its level and
//! fields, formatted as `Debug` (strings and numbers as written).

use retry_runtime::{RetryEvent, Transient, Verdict, retry};
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
struct Captured {
    level: Level,
    target: String,
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn field(&self, name: &str) -> &str {
        self.fields
            .get(name)
            .map_or_else(|| panic!("no field `{name}` in {self:?}"), String::as_str)
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
fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<Captured>) {
    callsites::keep_open();
    let capture = Capture::default();
    let result = tracing::subscriber::with_default(capture.clone(), f);
    let events = capture.0.lock().expect("not poisoned").clone();
    (result, events)
}

/// Runs an async test on a current-thread runtime with the paused clock, capturing its events.
fn capture_async<F: Future>(f: impl FnOnce() -> F) -> (F::Output, Vec<Captured>) {
    capture(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime")
            .block_on(f())
    })
}

fn levels(events: &[Captured]) -> Vec<Level> {
    events.iter().map(|e| e.level).collect()
}

#[derive(Debug, PartialEq)]
enum ClaimError {
    Overloaded(u32),
    SlowDown(Duration),
    Invalid,
}

impl Transient for ClaimError {
    fn is_transient(&self) -> bool {
        !matches!(self, ClaimError::Invalid)
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
fn the_final_failure_is_one_warn_event() {
    let calls = Cell::new(0);
    let (result, events) = capture(|| submit_claim(&calls, NEVER));
    assert_eq!(result, Err(ClaimError::Overloaded(3)));
    assert_eq!(levels(&events), [Level::INFO, Level::INFO, Level::WARN]);
    let warn = &events[2];
    assert_eq!(warn.field("function"), "submit_claim");
    assert_eq!(warn.field("attempts"), "3");
    assert_eq!(warn.field("reason"), "retries used up");
    assert_eq!(warn.field("error"), "Overloaded(3)");
    assert_eq!(warn.field("message"), "giving up");
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

#[test]
fn a_permanent_error_after_retries_ends_without_a_warning() {
    let answers = RefCell::new(vec![ClaimError::Overloaded(1), ClaimError::Invalid]);
    let (result, events) = capture(|| check_claim(&answers));
    assert_eq!(result, Err(ClaimError::Invalid));
    assert_eq!(levels(&events), [Level::INFO]);
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
    assert_eq!(levels(&events), [Level::INFO, Level::WARN]);
    assert_eq!(events[0].field("pause"), "5ms");
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
    assert_eq!(levels(&events), [Level::INFO, Level::INFO, Level::WARN]);
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
fn a_rejected_value_when_retries_run_out_is_one_warn() {
    let statuses = RefCell::new(vec![503, 503, 503]);
    let (result, events) = capture(|| get_status(&statuses));
    assert_eq!(result, Ok(503));
    assert_eq!(levels(&events), [Level::INFO, Level::INFO, Level::WARN]);
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
    assert_eq!(levels(&events), [Level::INFO, Level::WARN]);
    assert_eq!(events[0].field("pause"), "3ms");
}

//! The `metrics` feature: every instrument of `retry_runtime::metrics` as a real recorder sees
//! it, exactly, for each way a call ends; the pauses on tokio's paused clock; a breaker's state
//! and transitions; a budget's tokens and refusals.
//!
//! The recorder is metrics-util's `Registry` with atomic storage (what the exporters store in),
//! installed once as the global recorder, read without resetting anything. Every test uses
//! functions, breakers and budgets of its own names, so tests running in parallel (and the
//! other modules' functions, which record into it too once it is installed) never touch each
//! other's series.

use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};
use metrics_util::registry::{AtomicStorage, Registry};
use retry_runtime::metrics::{INSTRUMENTS, Kind, names};
use retry_runtime::{
    AdmissionGate, Aimd, CircuitBreaker, CircuitOpen, GiveUp, Rejected, RetryBudget, Verdict, retry,
};
use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Once};
use tokio::time::Duration;

static REGISTRY: LazyLock<Registry<Key, AtomicStorage>> = LazyLock::new(Registry::atomic);

/// The global recorder: every handle is the registry's own storage.
struct Global;

impl Recorder for Global {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        REGISTRY.get_or_create_counter(key, |c| Counter::from_arc(c.clone()))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        REGISTRY.get_or_create_gauge(key, |g| Gauge::from_arc(g.clone()))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        REGISTRY.get_or_create_histogram(key, |h| Histogram::from_arc(h.clone()))
    }
}

fn install() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        metrics::set_global_recorder(Global).expect("no other global recorder in this binary");
    });
}

fn key(name: &'static str, labels: &[(&'static str, &'static str)]) -> Key {
    let labels: Vec<Label> = labels
        .iter()
        .map(|&(k, v)| Label::from_static_parts(k, v))
        .collect();
    Key::from_parts(name, labels)
}

/// A counter's value; 0 if it was never registered.
fn counter(name: &'static str, labels: &[(&'static str, &'static str)]) -> u64 {
    REGISTRY
        .get_counter(&key(name, labels))
        .map_or(0, |c| c.load(Ordering::Relaxed))
}

/// A gauge's value, if it was registered.
fn gauge(name: &'static str, labels: &[(&'static str, &'static str)]) -> Option<f64> {
    REGISTRY
        .get_gauge(&key(name, labels))
        .map(|g| f64::from_bits(g.load(Ordering::Relaxed)))
}

/// A histogram's values, in the order recorded.
fn histogram(name: &'static str, function: &'static str) -> Vec<f64> {
    REGISTRY
        .get_histogram(&key(name, &[("function", function)]))
        .map_or_else(Vec::new, |h| h.data())
}

/// Every series of `retry_calls_total` of `function` that is not zero, as (outcome, reason).
fn ended(function: &'static str) -> Vec<(String, Option<String>, u64)> {
    let mut seen = Vec::new();
    REGISTRY.visit_counters(|key, counter| {
        let value = counter.load(Ordering::Relaxed);
        let label = |k: &str| {
            key.labels()
                .find(|l| l.key() == k)
                .map(|l| l.value().to_owned())
        };
        if key.name() == names::CALLS && label("function").as_deref() == Some(function) && value > 0
        {
            seen.push((label("outcome").unwrap_or_default(), label("reason"), value));
        }
    });
    seen.sort();
    seen
}

fn one(outcome: &str, reason: Option<&str>) -> Vec<(String, Option<String>, u64)> {
    vec![(outcome.to_owned(), reason.map(str::to_owned), 1)]
}

#[derive(Debug, PartialEq)]
enum Error {
    Busy,
    Invalid,
    Open(CircuitOpen),
    After(Duration),
    Shed(Rejected),
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Error::Shed(rejected)
    }
}

impl From<CircuitOpen> for Error {
    fn from(open: CircuitOpen) -> Self {
        Error::Open(open)
    }
}

fn busy(e: &Error) -> Verdict {
    match e {
        Error::Busy => Verdict::Retry,
        Error::After(d) => Verdict::RetryAfter(*d),
        _ => Verdict::Fail,
    }
}

/// Fails with `Busy` the first `failures` calls of `calls`, then answers.
fn flaky(calls: &std::cell::Cell<u32>, failures: u32) -> Result<u32, Error> {
    calls.set(calls.get() + 1);
    if calls.get() <= failures {
        Err(Error::Busy)
    } else {
        Ok(calls.get())
    }
}

#[retry(max = 3, base = "0ns", jitter = none, on = busy)]
fn metrics_first_try(calls: &std::cell::Cell<u32>) -> Result<u32, Error> {
    flaky(calls, 0)
}

#[test]
fn a_call_that_succeeds_first_try_counts_once_with_one_attempt() {
    install();
    let calls = std::cell::Cell::new(0);
    assert_eq!(metrics_first_try(&calls), Ok(1));
    assert_eq!(metrics_first_try(&calls), Ok(2));
    assert_eq!(
        ended("metrics_first_try"),
        [("first_try".to_owned(), None, 2)]
    );
    // Counted by `first_try`, one attempt each: no sample (the happy path's cost).
    assert!(histogram(names::ATTEMPTS, "metrics_first_try").is_empty());
    assert_eq!(
        counter(names::RETRIES, &[("function", "metrics_first_try")]),
        0
    );
    assert!(histogram(names::PAUSE, "metrics_first_try").is_empty());
}

#[retry(max = 3, base = "100ms", jitter = none, on = busy)]
async fn metrics_after_retries(calls: &std::cell::Cell<u32>) -> Result<u32, Error> {
    flaky(calls, 2)
}

#[tokio::test(start_paused = true)]
async fn a_call_that_retries_twice_counts_two_retries_and_their_pauses() {
    install();
    let calls = std::cell::Cell::new(0);
    let start = tokio::time::Instant::now();
    assert_eq!(metrics_after_retries(&calls).await, Ok(3));
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(ended("metrics_after_retries"), one("after_retries", None));
    assert_eq!(
        counter(names::RETRIES, &[("function", "metrics_after_retries")]),
        2
    );
    assert_eq!(histogram(names::ATTEMPTS, "metrics_after_retries"), [3.0]);
    assert_eq!(histogram(names::PAUSE, "metrics_after_retries"), [0.1, 0.2]);
}

/// Answers after 100 ms, whichever copy it is.
#[retry(max = 0, hedge = "30ms", max_hedges = 2, on = busy)]
async fn metrics_hedged(calls: &std::sync::atomic::AtomicU32) -> Result<u32, Error> {
    let n = calls.fetch_add(1, Ordering::Relaxed) + 1;
    tokio::time::sleep(Duration::from_millis(100)).await;
    Ok(n)
}

#[tokio::test(start_paused = true)]
async fn each_hedge_started_counts_once() {
    install();
    let calls = std::sync::atomic::AtomicU32::new(0);
    // The attempt at 0 ms answers at 100 ms; its two hedges start at 30 and 60 ms.
    assert_eq!(metrics_hedged(&calls).await, Ok(1));
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert_eq!(counter(names::HEDGES, &[("function", "metrics_hedged")]), 2);
    assert_eq!(ended("metrics_hedged"), one("first_try", None));
    // A function that answers before its delay starts none, and has no series.
    assert_eq!(
        counter(names::HEDGES, &[("function", "metrics_first_try")]),
        0
    );
}

#[retry(max = 2, base = "1s", jitter = none, on = busy)]
async fn metrics_exhausted() -> Result<u32, Error> {
    Err(Error::Busy)
}

#[tokio::test(start_paused = true)]
async fn a_call_that_uses_up_its_retries_gives_up_exhausted() {
    install();
    assert_eq!(metrics_exhausted().await, Err(Error::Busy));
    assert_eq!(
        ended("metrics_exhausted"),
        one("gave_up", Some("exhausted"))
    );
    assert_eq!(
        counter(names::RETRIES, &[("function", "metrics_exhausted")]),
        2
    );
    assert_eq!(histogram(names::ATTEMPTS, "metrics_exhausted"), [3.0]);
    assert_eq!(histogram(names::PAUSE, "metrics_exhausted"), [1.0, 2.0]);
}

#[retry(max = 5, base = "1s", jitter = none, deadline = "2500ms", on = busy)]
async fn metrics_deadline() -> Result<u32, Error> {
    Err(Error::Busy)
}

#[tokio::test(start_paused = true)]
async fn a_call_past_its_deadline_gives_up_deadline() {
    install();
    assert_eq!(metrics_deadline().await, Err(Error::Busy));
    // 1 s fits; after it, 2 s more would end at 3 s, past 2.5 s.
    assert_eq!(ended("metrics_deadline"), one("gave_up", Some("deadline")));
    assert_eq!(histogram(names::ATTEMPTS, "metrics_deadline"), [2.0]);
    assert_eq!(histogram(names::PAUSE, "metrics_deadline"), [1.0]);
}

#[retry(max = 3, base = "1s", max_delay = "10s", on = busy)]
async fn metrics_suggested_too_long() -> Result<u32, Error> {
    Err(Error::After(Duration::from_secs(60)))
}

#[tokio::test(start_paused = true)]
async fn a_server_pause_longer_than_max_delay_gives_up_suggested_too_long() {
    install();
    assert!(metrics_suggested_too_long().await.is_err());
    assert_eq!(
        ended("metrics_suggested_too_long"),
        one("gave_up", Some("suggested_too_long"))
    );
    assert_eq!(
        histogram(names::ATTEMPTS, "metrics_suggested_too_long"),
        [1.0]
    );
}

static METRICS_BUDGET: RetryBudget = RetryBudget::new()
    .ratio(0.5)
    .min_per_second(0)
    .name("metrics_budget");

#[retry(max = 3, base = "1s", jitter = none, on = busy, budget = METRICS_BUDGET)]
async fn metrics_budgeted(calls: &std::cell::Cell<u32>, failures: u32) -> Result<u32, Error> {
    flaky(calls, failures)
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_gives_up_budget_and_the_gauge_follows_the_tokens() {
    install();
    let budget = [("budget", "metrics_budget")];
    // Two first attempts that succeed: 0.5 token each.
    for _ in 0..2 {
        assert!(metrics_budgeted(&std::cell::Cell::new(0), 0).await.is_ok());
    }
    assert_eq!(gauge(names::BUDGET_TOKENS, &budget), Some(1.0));
    // A third call deposits 0.5 (1.5), its first retry takes the token (0.5), its second is
    // refused.
    let calls = std::cell::Cell::new(0);
    assert_eq!(metrics_budgeted(&calls, 5).await, Err(Error::Busy));
    assert_eq!(calls.get(), 2);
    assert_eq!(gauge(names::BUDGET_TOKENS, &budget), Some(0.5));
    assert_eq!(counter(names::BUDGET_REFUSALS, &budget), 1);
    assert_eq!(
        ended("metrics_budgeted"),
        [
            ("first_try".to_owned(), None, 2),
            ("gave_up".to_owned(), Some("budget".to_owned()), 1)
        ]
    );
    assert_eq!(histogram(names::ATTEMPTS, "metrics_budgeted"), [2.0]);
    assert_eq!(
        counter(names::RETRIES, &[("function", "metrics_budgeted")]),
        1
    );
}

static METRICS_BREAKER: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(2)
    .open_for(Duration::from_secs(10))
    .name("metrics_breaker");

#[retry(max = 3, base = "1s", jitter = none, on = busy, breaker = METRICS_BREAKER)]
async fn metrics_guarded(fail: bool) -> Result<u32, Error> {
    if fail { Err(Error::Busy) } else { Ok(1) }
}

#[tokio::test(start_paused = true)]
async fn the_breaker_gauge_and_transitions_follow_its_states() {
    install();
    let breaker = [("breaker", "metrics_breaker")];
    let to = |to| {
        counter(
            names::BREAKER_TRANSITIONS,
            &[("breaker", "metrics_breaker"), ("to", to)],
        )
    };
    assert_eq!(gauge(names::BREAKER_STATE, &breaker), None, "not used yet");
    assert_eq!(metrics_guarded(false).await, Ok(1));
    assert_eq!(
        gauge(names::BREAKER_STATE, &breaker),
        Some(0.0),
        "closed at its first use"
    );
    // Two failures in a row open it: the call gives up at once, breaker open.
    assert_eq!(metrics_guarded(true).await, Err(Error::Busy));
    assert_eq!(gauge(names::BREAKER_STATE, &breaker), Some(1.0));
    assert_eq!((to("open"), to("half_open"), to("closed")), (1, 0, 0));
    // Refused while open: the body does not run, 0 attempts.
    assert!(matches!(metrics_guarded(false).await, Err(Error::Open(_))));
    // After 10 s the trial goes through (half-open) and closes it.
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(metrics_guarded(false).await, Ok(1));
    assert_eq!(gauge(names::BREAKER_STATE, &breaker), Some(0.0));
    assert_eq!((to("open"), to("half_open"), to("closed")), (1, 1, 1));
    assert_eq!(
        ended("metrics_guarded"),
        [
            ("first_try".to_owned(), None, 2),
            ("gave_up".to_owned(), Some("breaker_open".to_owned()), 2)
        ]
    );
    assert_eq!(histogram(names::ATTEMPTS, "metrics_guarded"), [2.0, 0.0]);
}

static METRICS_GATE: AdmissionGate =
    AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1)).name("metrics_gate");

#[retry(max = 3, base = "1s", jitter = none, on = busy, gate = METRICS_GATE)]
async fn metrics_gated(latency: Duration) -> Result<u32, Error> {
    tokio::time::sleep(latency).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn a_shed_call_is_counted_with_its_reason() {
    install();
    // The first call holds the gate's one slot; the second is shed before any attempt.
    let (held, shed) = tokio::join!(
        metrics_gated(Duration::from_millis(50)),
        metrics_gated(Duration::ZERO)
    );
    assert_eq!(held, Ok(1));
    assert!(matches!(shed, Err(Error::Shed(_))), "{shed:?}");
    assert_eq!(
        ended("metrics_gated"),
        [
            ("first_try".to_owned(), None, 1),
            ("gave_up".to_owned(), Some("gate_rejected".to_owned()), 1)
        ]
    );
    // The attempts of calls that did not end on a first try: the shed one made none.
    assert_eq!(histogram(names::ATTEMPTS, "metrics_gated"), [0.0]);
}

#[retry(max = 3, base = "1s", on = busy)]
fn metrics_permanent() -> Result<u32, Error> {
    Err(Error::Invalid)
}

#[test]
fn a_permanent_error_counts_as_permanent() {
    install();
    assert_eq!(metrics_permanent(), Err(Error::Invalid));
    assert_eq!(ended("metrics_permanent"), one("permanent", None));
    assert_eq!(histogram(names::ATTEMPTS, "metrics_permanent"), [1.0]);
}

fn saved(_: Error, why: GiveUp) -> Result<u32, Error> {
    assert_eq!(why.attempts, 2);
    Ok(0)
}

#[retry(max = 1, base = "0ns", on = busy, fallback = saved)]
fn metrics_fallback() -> Result<u32, Error> {
    Err(Error::Busy)
}

#[test]
fn a_fallback_counts_as_fallback_with_the_reason() {
    install();
    assert_eq!(metrics_fallback(), Ok(0));
    assert_eq!(
        ended("metrics_fallback"),
        one("fallback", Some("exhausted"))
    );
    assert_eq!(histogram(names::ATTEMPTS, "metrics_fallback"), [2.0]);
}

#[retry(max = 3, base = "0ns", on = busy)]
fn metrics_inner() -> Result<u32, Error> {
    Err(Error::Busy)
}

#[retry(max = 1, base = "0ns", on = busy)]
fn metrics_outer() -> Result<u32, Error> {
    metrics_inner()
}

#[test]
fn a_nested_function_hands_its_failure_up_once_per_attempt_of_the_outer() {
    install();
    assert_eq!(metrics_outer(), Err(Error::Busy));
    assert_eq!(ended("metrics_inner"), [("nested".to_owned(), None, 2)]);
    assert_eq!(histogram(names::ATTEMPTS, "metrics_inner"), [1.0, 1.0]);
    assert_eq!(ended("metrics_outer"), one("gave_up", Some("exhausted")));
}

#[test]
fn every_instrument_is_documented_in_the_guide_with_its_kind_unit_and_labels() {
    let guide = include_str!("../../retry-runtime/docs/metrics.md");
    let rows: Vec<Vec<String>> = guide
        .lines()
        .filter(|l| l.starts_with("| `retry_"))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect();
    assert_eq!(
        rows.len(),
        INSTRUMENTS.len(),
        "one row per instrument: {rows:?}"
    );
    for (row, instrument) in rows.iter().zip(INSTRUMENTS) {
        let labels = instrument
            .labels
            .iter()
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(", ");
        assert_eq!(
            row[..],
            [
                format!("`{}`", instrument.name),
                instrument.kind.to_string(),
                instrument.unit.to_owned(),
                labels,
                instrument.when.to_owned(),
            ],
            "the guide's row for {} differs from `retry_runtime::metrics::INSTRUMENTS`",
            instrument.name
        );
    }
    assert!(INSTRUMENTS.iter().any(|i| i.kind == Kind::Histogram));
}

// A block's name (issue 29, item 3): `name = "..."` is its `function` label, which an edit above
// the block leaves as it is; without it, the label is the block's module and line.

#[test]
fn a_named_block_is_labelled_by_its_name_and_an_unnamed_one_by_its_line() {
    install();
    let calls = std::cell::Cell::new(0);
    let named = retry_runtime::retry_block!(
        name = "coverage_lookup", max = 3, base = "0ns", jitter = none, on = busy => {
            flaky(&calls, 1)
        }
    );
    assert_eq!(named, Ok(2));
    assert_eq!(ended("coverage_lookup"), one("after_retries", None));
    assert_eq!(
        counter(names::RETRIES, &[("function", "coverage_lookup")]),
        1
    );

    calls.set(0);
    let line = line!() + 1;
    let unnamed = retry_runtime::retry_block!(max = 3, base = "0ns", jitter = none, on = busy => {
        flaky(&calls, 1)
    });
    assert_eq!(unnamed, Ok(2));
    let label: &'static str = format!("{}:{line}", module_path!()).leak();
    assert_eq!(ended(label), one("after_retries", None));
}

// The doors' own events (issue 40, item 2): the HTTP tower layer's go to the same
// `retry_door_events_total`, by `event`, as the gRPC door's (retry-grpc's interop tests,
// `door_events`), and the loop's retries for it to `retry_retries_total`.

#[tokio::test(start_paused = true)]
async fn the_http_doors_own_events_are_measured_by_event() {
    use crate::tower_layer::{full, request, stack};
    use http::Method;
    use retry_http::HttpRetry;
    use retry_http::tower::RetryLayer;
    use tower::ServiceExt;

    const DOOR: &str = "metrics_http_door";
    install();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        listener.local_addr().expect("an address").port()
    };
    let policy = retry_runtime::Policy::new()
        .max(2)
        .base(Duration::from_secs(1))
        .jitter(retry_runtime::Jitter::None);
    let layer = RetryLayer::new(HttpRetry::new(policy).name(DOOR));
    let counters = layer.counters();
    let (service, _) = stack(layer);
    // A POST without a key to a port nothing listens on: never sent, so resent twice anyway.
    let error = service
        .oneshot(request(
            Method::POST,
            &format!("http://127.0.0.1:{port}/pay"),
            full("amount=100"),
        ))
        .await
        .expect_err("nothing listens");
    assert!(
        error
            .downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(|e| e.is_connect()),
        "{error:?}"
    );
    let event =
        |event: &'static str| counter(names::DOOR_EVENTS, &[("function", DOOR), ("event", event)]);
    assert_eq!((event("without_key"), event("never_sent")), (1, 2));
    assert_eq!(event("sent_once"), 0);
    assert_eq!(counter(names::RETRIES, &[("function", DOOR)]), 2);
    // The same events, counted in the door's `Counters`.
    assert_eq!(
        (
            counters.requests(),
            counters.without_key(),
            counters.never_sent_retries(),
            counters.retries()
        ),
        (1, 1, 2, 2)
    );
}

//! The door's events through the runtime's one sink (issue 40, item 2): each is counted in the
//! runtime's one `Counters` (the type every door hands out), logged (feature `tracing`) and
//! measured (feature `metrics`), as the HTTP door's are. And hedged copies driven by the engine
//! (issue 40, item 1): under the layer's retry budget and circuit breaker, with the number of
//! copies the server saw, and in the engine's logs and metrics. A real tonic `Channel` to the scripted
//! server, on tokio's paused clock; a hand-written subscriber captures this thread's events and
//! metrics-util's registry is the global recorder of this binary (each test has its own door
//! name, so that the series of the tests running beside it are apart).

use crate::common::{SERVICE, hedging_config, ms, retry, retry_config};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString};
use metrics_util::registry::{AtomicStorage, Registry};
use retry_grpc::channel::{GrpcRetry, GrpcRetryLayer};
use retry_grpc::{
    HedgingPolicy, MethodConfig, MethodName, RetryThrottling, ServiceConfig, ThrottleRegistry,
};
use retry_grpc_interop::proto::Request as Message;
use retry_grpc_interop::proto::scripted_client::ScriptedClient;
use retry_grpc_interop::server::{ScriptedService, bind, serve};
use retry_runtime::engine::Counters;
use retry_runtime::metrics::names;
use retry_runtime::{CircuitBreaker, RetryBudget};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock, Mutex, Once};
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Level, span};

/// Keeps `tracing`'s callsites open for this thread's capture (the workspace tests' anchor: a
/// sibling test without a subscriber would otherwise cache "never" for a callsite).
#[path = "../../../../tests/it/common/callsites.rs"]
mod callsites;

static REGISTRY: LazyLock<Registry<Key, AtomicStorage>> = LazyLock::new(Registry::atomic);

struct Global;

impl Recorder for Global {
    fn describe_counter(&self, _: KeyName, _: Option<metrics::Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<metrics::Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<metrics::Unit>, _: SharedString) {}
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

/// A counter's value; 0 if it was never registered.
fn counter(name: &'static str, labels: &[(&'static str, &'static str)]) -> u64 {
    let labels: Vec<Label> = labels
        .iter()
        .map(|&(k, v)| Label::from_static_parts(k, v))
        .collect();
    REGISTRY
        .get_counter(&Key::from_parts(name, labels))
        .map_or(0, |c| c.load(Ordering::Relaxed))
}

/// `retry_door_events_total` of `function` for `event`.
fn door_events(function: &'static str, event: &'static str) -> u64 {
    counter(
        names::DOOR_EVENTS,
        &[("function", function), ("event", event)],
    )
}

/// One event as captured: its level and its fields, as `Debug` (strings as written).
#[derive(Clone, Debug)]
struct Captured {
    level: Level,
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Captures every event of the thread it is the default of.
#[derive(Clone)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

impl Default for Capture {
    fn default() -> Self {
        callsites::keep_open();
        Capture(Arc::default())
    }
}

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
    fn register_callsite(&self, _: &'static tracing::Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
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
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Captured {
                level: *event.metadata().level(),
                fields,
            });
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

impl Capture {
    /// The events of door `function` whose message is `message`.
    fn of(&self, function: &str, message: &str) -> Vec<Captured> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| {
                e.field("function") == Some(function) && e.field("message") == Some(message)
            })
            .cloned()
            .collect()
    }
}

/// The door on a channel to `target`, named `name` in the events.
fn client(layer: GrpcRetryLayer, target: String) -> ScriptedClient<GrpcRetry<Channel>> {
    let channel = Channel::from_shared(target)
        .expect("a valid URI")
        .connect_lazy();
    ScriptedClient::new(tower_layer::Layer::layer(&layer, channel))
}

/// The scripted tonic server on loopback: its address as a URI.
async fn server() -> String {
    recording_server().await.0
}

/// [`server`], and the attempts it saw: each one's scenario, its `grpc-previous-rpc-attempts`
/// and its virtual time since the server started.
async fn recording_server() -> (String, Arc<Mutex<Vec<(String, Option<String>, Duration)>>>) {
    let (listener, addr) = bind().await.expect("binds");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let records = Arc::clone(&seen);
    let start = tokio::time::Instant::now();
    let service = ScriptedService::new(move |record| {
        records.lock().unwrap_or_else(|e| e.into_inner()).push((
            record.scenario.clone(),
            record.previous_rpc_attempts.clone(),
            start.elapsed(),
        ));
    });
    tokio::spawn(serve(service, listener));
    (format!("http://{addr}"), seen)
}

fn message(scenario: &str, call: u32) -> Message {
    Message {
        scenario: scenario.to_owned(),
        call,
        payload: Vec::new(),
    }
}

const HEDGE: &str = "door_events_hedge";

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_copy_is_counted_logged_and_measured() {
    install();
    let logs = Capture::default();
    let _default = tracing::subscriber::set_default(logs.clone());
    let config = ServiceConfig::from_value(&hedging_config(3, ms(100), &[Code::Unavailable]))
        .expect("valid");
    let layer = GrpcRetryLayer::new(config).name(HEDGE);
    // The door hands out the runtime's one `Counters`.
    let counters: Arc<Counters> = layer.counters();
    let mut client = client(layer, server().await);
    // The first attempt answers after 500 ms; the copy sent at 100 ms answers at once.
    let reply = client
        .unary(message("slow_first:500", 0))
        .await
        .expect("OK");
    assert_eq!(reply.get_ref().attempt, 2, "the copy's answer");
    assert_eq!(
        (
            counters.calls(),
            counters.attempts(),
            counters.hedged_copies()
        ),
        (1, 2, 1)
    );
    let hedges = logs.of(HEDGE, "no answer yet; starting a hedge");
    assert_eq!(hedges.len(), 1, "{hedges:?}");
    assert_eq!(hedges[0].level, Level::DEBUG);
    assert_eq!(hedges[0].field("hedge"), Some("1"));
    assert_eq!(counter(names::HEDGES, &[("function", HEDGE)]), 1);
}

const TRANSPARENT: &str = "door_events_transparent";

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_transparent_retry_is_counted_logged_and_measured_beside_the_engines_retries() {
    install();
    let logs = Capture::default();
    let _default = tracing::subscriber::set_default(logs.clone());
    let port = retry_grpc_interop::harness::closed_port().expect("a free port");
    let policy = retry(3, ms(100), ms(1000), &[Code::Unavailable]);
    let config = ServiceConfig::from_value(&retry_config(policy, None)).expect("valid");
    let layer = GrpcRetryLayer::new(config).name(TRANSPARENT);
    let counters = layer.counters();
    let mut client = client(layer, format!("http://127.0.0.1:{port}"));
    let status = client
        .unary(message("ok", 0))
        .await
        .expect_err("nothing listens");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    // 3 attempts of the policy, the first sent twice (the transparent retry).
    assert_eq!(
        (
            counters.attempts(),
            counters.retries(),
            counters.transparent_retries()
        ),
        (4, 2, 1)
    );
    let transparent = logs.of(
        TRANSPARENT,
        "the attempt never reached the server's application: sending it again at once (a transparent retry)",
    );
    assert_eq!(transparent.len(), 1, "{transparent:?}");
    assert_eq!(transparent[0].level, Level::INFO);
    assert_eq!(transparent[0].field("attempt"), Some("1"));
    assert_eq!(door_events(TRANSPARENT, "transparent_retry"), 1);
    // The engine's own events, for the same door: its two retries, logged and measured.
    assert_eq!(logs.of(TRANSPARENT, "attempt failed; retrying").len(), 2);
    assert_eq!(counter(names::RETRIES, &[("function", TRANSPARENT)]), 2);
    // One call in the engine's call metrics, given up after its 3 attempts: the transparent
    // retry is the engine's resend of the first attempt, not a call of its own.
    let calls = |labels: &[(&'static str, &'static str)]| {
        let mut all = vec![("function", TRANSPARENT)];
        all.extend_from_slice(labels);
        counter(names::CALLS, &all)
    };
    assert_eq!(calls(&[("outcome", "gave_up"), ("reason", "exhausted")]), 1);
    assert_eq!(calls(&[("outcome", "permanent")]), 0);
    assert_eq!(calls(&[("outcome", "first_try")]), 0);
}

const NO_POLICY: &str = "door_events_no_policy";

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_without_a_policy_is_resent_by_the_engine_and_counted_once() {
    install();
    let (addr, headers) = crate::door::refusing_the_first_stream().await;
    let config = ServiceConfig::from_value(&serde_json::json!({})).expect("valid");
    let layer = GrpcRetryLayer::new(config).name(NO_POLICY);
    let counters = layer.counters();
    let mut client = client(layer, format!("http://{addr}"));
    let reply = client.unary(message("ok", 0)).await.expect("OK");
    assert_eq!(reply.get_ref().attempt, 2, "the second stream answered");
    assert_eq!(*headers.lock().expect("not poisoned"), [None, None]);
    assert_eq!(
        (
            counters.attempts(),
            counters.retries(),
            counters.transparent_retries()
        ),
        (2, 0, 1)
    );
    assert_eq!(door_events(NO_POLICY, "transparent_retry"), 1);
    // The engine ran the call: one call, answered on its first attempt (the resend is not a
    // retry), and nothing else.
    let calls = |outcome| {
        counter(
            names::CALLS,
            &[("function", NO_POLICY), ("outcome", outcome)],
        )
    };
    assert_eq!(calls("first_try"), 1);
    assert_eq!(calls("permanent"), 0);
    assert_eq!(counter(names::RETRIES, &[("function", NO_POLICY)]), 0);
}

const HEDGED_RESEND: &str = "door_events_hedged_resend";

/// Every `retry_calls_total` of `function`, whatever its outcome and reason.
fn all_calls(function: &str) -> u64 {
    let mut calls = 0;
    REGISTRY.visit_counters(|key, counter| {
        if key.name() == names::CALLS
            && key
                .labels()
                .any(|label| label.key() == "function" && label.value() == function)
        {
            calls += counter.load(Ordering::Relaxed);
        }
    });
    calls
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_copy_refused_before_the_server_is_resent_in_the_calls_one_loop() {
    install();
    let logs = Capture::default();
    let _default = tracing::subscriber::set_default(logs.clone());
    let (addr, headers) = crate::door::refusing_the_hedged_copy().await;
    let config = ServiceConfig::from_value(&hedging_config(2, ms(100), &[Code::Unavailable]))
        .expect("valid");
    let layer = GrpcRetryLayer::new(config).name(HEDGED_RESEND);
    let counters = layer.counters();
    let mut client = client(layer, format!("http://{addr}"));
    let started = tokio::time::Instant::now();
    let reply = client.unary(message("ok", 0)).await.expect("OK");
    // The copy sent at 100 ms was refused and sent again at once, as the same copy (the same
    // `grpc-previous-rpc-attempts`); it answered, long before the first copy would have.
    assert_eq!(reply.get_ref().attempt, 3, "the third stream answered");
    assert_eq!(started.elapsed(), ms(100));
    assert_eq!(
        *headers.lock().expect("not poisoned"),
        [None, Some("1".to_owned()), Some("1".to_owned())]
    );
    assert_eq!(
        (
            counters.calls(),
            counters.attempts(),
            counters.hedged_copies(),
            counters.transparent_retries(),
            counters.retries()
        ),
        (1, 3, 1, 1, 0)
    );
    // The engine ran one loop for the call: one call in its call metrics, answered on its
    // first attempt (the resend is neither a retry nor a call of its own).
    assert_eq!(all_calls(HEDGED_RESEND), 1);
    assert_eq!(
        counter(
            names::CALLS,
            &[("function", HEDGED_RESEND), ("outcome", "first_try")]
        ),
        1
    );
    assert_eq!(counter(names::HEDGES, &[("function", HEDGED_RESEND)]), 1);
    assert_eq!(door_events(HEDGED_RESEND, "transparent_retry"), 1);
    let transparent = logs.of(
        HEDGED_RESEND,
        "the attempt never reached the server's application: sending it again at once (a transparent retry)",
    );
    assert_eq!(transparent.len(), 1, "{transparent:?}");
    // The hedged attempt is the call's first (the door never retries a hedged attempt as a
    // whole); the copy's own number is its header above.
    assert_eq!(transparent[0].field("attempt"), Some("1"));
}

const DEADLINE: &str = "door_events_deadline";

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_past_its_deadline_is_counted_logged_and_measured() {
    install();
    let logs = Capture::default();
    let _default = tracing::subscriber::set_default(logs.clone());
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .retry_policy(retry(5, ms(1000), ms(1000), &[Code::Unavailable]))
        .timeout(ms(300))
        .build()
        .expect("valid");
    let config = ServiceConfig::builder()
        .method_config(method)
        .build()
        .expect("valid");
    let layer = GrpcRetryLayer::new(config).name(DEADLINE);
    let counters = layer.counters();
    let mut client = client(layer, server().await);
    let status = client
        .unary(message("always_unavailable", 0))
        .await
        .expect_err("the deadline");
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(counters.deadline_exceeded(), 1);
    let passed = logs.of(DEADLINE, "the call's deadline passed: DEADLINE_EXCEEDED");
    assert_eq!(passed.len(), 1, "{passed:?}");
    assert_eq!(passed[0].field("timeout"), Some("300ms"));
    assert_eq!(door_events(DEADLINE, "deadline_exceeded"), 1);
}

const THROTTLED: &str = "door_events_throttled";

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_throttled_call_is_counted_logged_and_measured() {
    install();
    let logs = Capture::default();
    let _default = tracing::subscriber::set_default(logs.clone());
    // maxTokens 10, tokenRatio 0.1: the first failing call takes 4 tokens (4 attempts), the
    // second one more, down to 5, and is throttled (a retry needs more than 5 left).
    let policy = retry(4, ms(10), ms(10), &[Code::Unavailable]);
    let throttling = RetryThrottling::new(10, 0.1).expect("valid");
    let config = ServiceConfig::from_value(&retry_config(policy, Some(throttling))).expect("valid");
    let layer = GrpcRetryLayer::new(config).name(THROTTLED);
    let counters = layer.counters();
    let mut client = client(layer, server().await);
    for call in 0..2 {
        let status = client
            .unary(message("always_unavailable", call))
            .await
            .expect_err("UNAVAILABLE");
        assert_eq!(status.code(), Code::Unavailable);
    }
    assert_eq!((counters.calls(), counters.throttled()), (2, 1));
    let throttled = logs.of(
        THROTTLED,
        "the retry throttle is below its threshold: not retrying",
    );
    assert_eq!(throttled.len(), 1, "{throttled:?}");
    assert_eq!(door_events(THROTTLED, "throttled"), 1);
}

const BUDGET: &str = "door_events_hedge_budget";

/// The layer's retry budget pays for each hedged copy as for a retry: with a reserve of one
/// retry per second and no tokens, the copy due at 100 ms goes and the one due at 200 ms does
/// not; the first attempt's answer (at 500 ms) is the call's.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_call_is_stopped_by_the_layers_retry_budget() {
    install();
    let logs = Capture::default();
    let _default = tracing::subscriber::set_default(logs.clone());
    let config = ServiceConfig::from_value(&hedging_config(4, ms(100), &[Code::Unavailable]))
        .expect("valid");
    let budget = Arc::new(RetryBudget::new().ratio(0.0).min_per_second(1));
    let layer = GrpcRetryLayer::new(config)
        .name(BUDGET)
        .budget(Arc::clone(&budget));
    let counters = layer.counters();
    let (target, seen) = recording_server().await;
    let mut client = client(layer, target);
    let reply = client.unary(message("slow:500", 0)).await.expect("OK");
    assert_eq!(reply.get_ref().attempt, 1, "the first attempt's answer");
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let previous: Vec<Option<&str>> = seen.iter().map(|s| s.1.as_deref()).collect();
    assert_eq!(
        previous,
        [None, Some("1")],
        "two copies, not four: {seen:?}"
    );
    assert_eq!(seen[1].2 - seen[0].2, ms(100));
    assert_eq!(
        (
            counters.calls(),
            counters.attempts(),
            counters.hedged_copies()
        ),
        (1, 2, 1)
    );
    assert_eq!(logs.of(BUDGET, "no answer yet; starting a hedge").len(), 1);
    let refused = logs.of(
        BUDGET,
        "no answer yet, but the retry budget is empty; not hedging",
    );
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].field("hedge"), Some("2"));
    assert_eq!(counter(names::HEDGES, &[("function", BUDGET)]), 1);
}

const BREAKER: &str = "door_events_hedge_breaker";

/// The layer's circuit breaker admits each hedged copy as an attempt and hears each copy's
/// failure: with two consecutive failures to open, a call whose copies all fail with a
/// non-fatal status (each sends the next at once) makes two copies of its four, and the next
/// call none.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_call_is_stopped_by_the_layers_open_breaker() {
    install();
    let logs = Capture::default();
    let _default = tracing::subscriber::set_default(logs.clone());
    let config = ServiceConfig::from_value(&hedging_config(4, ms(1000), &[Code::Unavailable]))
        .expect("valid");
    let breaker = Arc::new(
        CircuitBreaker::new()
            .consecutive_failures(2)
            .open_for(Duration::from_secs(30)),
    );
    let layer = GrpcRetryLayer::new(config)
        .name(BREAKER)
        .breaker(Arc::clone(&breaker));
    let counters = layer.counters();
    let (target, seen) = recording_server().await;
    let mut client = client(layer, target);
    let status = client
        .unary(message("always_unavailable", 0))
        .await
        .expect_err("UNAVAILABLE");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    let copies = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let previous: Vec<Option<&str>> = copies.iter().map(|s| s.1.as_deref()).collect();
    assert_eq!(
        previous,
        [None, Some("1")],
        "two copies, then the breaker opened: {copies:?}"
    );
    assert!(copies.iter().all(|s| s.2 == Duration::ZERO), "{copies:?}");
    assert_eq!((counters.attempts(), counters.hedged_copies()), (2, 1));
    // The next call is refused before its first attempt: the server sees nothing more.
    let status = client
        .unary(message("always_unavailable", 1))
        .await
        .expect_err("the breaker is open");
    assert!(status.message().contains("circuit open"), "{status:?}");
    assert_eq!(seen.lock().unwrap_or_else(|e| e.into_inner()).len(), 2);
    assert_eq!((counters.calls(), counters.attempts()), (2, 2));
    assert_eq!(logs.of(BREAKER, "no answer yet; starting a hedge").len(), 1);
    assert_eq!(counter(names::HEDGES, &[("function", BREAKER)]), 1);
}

const HEDGE_THROTTLED: &str = "door_events_hedge_throttled";

/// A6's throttle is asked before each hedged copy, the ones due on the schedule included: with
/// `maxTokens 4` (threshold 2) and the server's count at 3, a slow call sends every copy; with
/// the count at 1.1, only the first.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_call_stops_its_copies_at_a6s_throttle() {
    install();
    let logs = Capture::default();
    let _default = tracing::subscriber::set_default(logs.clone());
    let hedging = HedgingPolicy::builder()
        .max_attempts(5)
        .hedging_delay(ms(100))
        .non_fatal_status_codes([Code::Unavailable])
        .build()
        .expect("valid");
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .hedging_policy(hedging)
        .build()
        .expect("valid");
    let config = ServiceConfig::builder()
        .method_config(method)
        .retry_throttling(RetryThrottling::new(4, 0.1).expect("valid"))
        .build()
        .expect("valid");
    let registry = ThrottleRegistry::new();
    let layer = GrpcRetryLayer::new(config)
        .name(HEDGE_THROTTLED)
        .throttle_registry(&registry, "dns:///scripted");
    let throttle = Arc::clone(layer.throttle().expect("retryThrottling"));
    assert!(throttle.record_failure(), "4 → 3: still above 2");
    let counters = layer.counters();
    let (target, seen) = recording_server().await;
    let mut client = client(layer, target);
    // Every copy waits 500 ms, then answers: the first copy's answer wins, and the copies due at
    // 100, 200, 300 and 400 ms go while the count is above 2.
    let reply = client.unary(message("slow:500", 0)).await.expect("OK");
    assert_eq!(reply.get_ref().attempt, 1);
    assert_eq!(seen.lock().unwrap_or_else(|e| e.into_inner()).len(), 5);
    // The answer's `OK` gave `tokenRatio`: 3.1. Two failures elsewhere take it to 1.1, not above
    // the threshold: the first copy still goes; no other does.
    assert_eq!(throttle.milli_tokens(), 3_100);
    throttle.record_failure();
    throttle.record_failure();
    assert!(!throttle.allows_retry());
    let reply = client.unary(message("slow:500", 1)).await.expect("OK");
    assert_eq!(reply.get_ref().attempt, 1);
    let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let second: Vec<_> = seen.iter().filter(|s| s.0 == "slow:500").skip(5).collect();
    assert_eq!(second.len(), 1, "the first copy only: {seen:?}");
    assert_eq!((counters.calls(), counters.hedged_copies()), (2, 4));
    assert_eq!(
        logs.of(HEDGE_THROTTLED, "no answer yet; starting a hedge")
            .len(),
        4
    );
}

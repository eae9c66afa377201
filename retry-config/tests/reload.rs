//! A named policy (and its breaker's settings) reloaded while 1,000 calls run through three
//! doors: the `Retrier` (`retry_config::retrier_with_breaker`), the tower layer (over an
//! in-process service) and the reqwest middleware (against a loopback server), both HTTP doors
//! choosing the policy per request (`HttpRetry::route`). Each call's pauses are recorded, not
//! slept (`testing::record_async`), so they are exact.
//!
//! What must hold: no call mixes the old policy and the new (every call's pauses are one
//! policy's whole schedule, and its attempts as many as that policy makes); every call that
//! started after the swap runs the new one; a call that started before it runs the old one to
//! its end; a file that fails validation changes nothing (the same `Named`, the same pauses)
//! and is reported; each change is counted in the registry's counters and in the metrics.

// Helpers outside `#[test]` functions unwrap too: a test that fails should panic.
#![allow(clippy::unwrap_used)]

use axum::Router;
use axum::extract::{Path, State as Axum};
use axum::http::StatusCode;
use bytes::Bytes;
use http_body_util::Empty;
use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};
use metrics_util::registry::{AtomicStorage, Registry as Storage};
use retry_config::{Config, Registry, retrier_with_breaker};
use retry_http::reqwest::RetryMiddleware;
use retry_http::tower::RetryLayer;
use retry_http::{HttpRetry, Route};
use retry_runtime::named::Named;
use retry_runtime::{CircuitOpen, Policy, testing};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Once};
use std::time::Duration;
use tokio::sync::watch;
use tower::{Service, ServiceExt};

const MS: Duration = Duration::from_millis(1);

// ---- the metrics: a real recorder, installed once for this binary ----

static METRICS: LazyLock<Storage<Key, AtomicStorage>> = LazyLock::new(Storage::atomic);

struct Global;

impl Recorder for Global {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        METRICS.get_or_create_counter(key, |c| Counter::from_arc(c.clone()))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        METRICS.get_or_create_gauge(key, |g| Gauge::from_arc(g.clone()))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        METRICS.get_or_create_histogram(key, |h| Histogram::from_arc(h.clone()))
    }
}

fn install_metrics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        metrics::set_global_recorder(Global).expect("no other recorder in this binary");
    });
}

/// `retry_door_events_total{function, event}`.
fn door_events(function: &'static str, event: &'static str) -> u64 {
    let labels = vec![
        Label::from_static_parts("function", function),
        Label::from_static_parts("event", event),
    ];
    let key = Key::from_parts("retry_door_events_total", labels);
    METRICS
        .get_counter(&key)
        .map_or(0, |c| c.load(Ordering::Relaxed))
}

// ---- the configurations ----

const NAME: &str = "contract-service";

/// Generation 1: 3 attempts, pauses 10 ms and 20 ms; a breaker that these calls never open.
const OLD: &str = r#"
[retry.contract-service]
max = 2
base = "10ms"
jitter = "none"
breaker = { consecutive_failures = 100000, open_for = "1h" }
"#;

/// Generation 2: 4 attempts, pauses 30, 60 and 120 ms; the breaker's settings changed.
const NEW: &str = r#"
[retry.contract-service]
max = 3
base = "30ms"
jitter = "none"
breaker = { consecutive_failures = 200000, open_for = "1h" }
"#;

/// Breaks a rule across keys: `max` and `attempts` say the same thing twice.
const BAD: &str = r#"
[retry.contract-service]
max = 3
attempts = 5
base = "30ms"
"#;

fn old_pauses() -> Vec<Duration> {
    vec![10 * MS, 20 * MS]
}

fn new_pauses() -> Vec<Duration> {
    vec![30 * MS, 60 * MS, 120 * MS]
}

// ---- the service every door calls: always busy; a call's first attempt may wait ----

/// What the service saw: the attempts of each call, and which calls wait at their first
/// attempt until `release` (the calls started before the swap).
struct Service0 {
    attempts: Mutex<HashMap<usize, u32>>,
    arrived: AtomicUsize,
    held: usize,
    release: watch::Receiver<bool>,
}

impl Service0 {
    /// One attempt of call `call`: counted; the first attempt of a held call waits for the
    /// release. Always busy.
    async fn attempt(&self, call: usize) {
        let n = {
            let mut attempts = self.attempts.lock().unwrap();
            let n = attempts.entry(call).or_default();
            *n += 1;
            *n
        };
        if n == 1 && call < self.held {
            self.arrived.fetch_add(1, Ordering::SeqCst);
            let mut release = self.release.clone();
            release.wait_for(|released| *released).await.unwrap();
        }
    }

    fn attempts(&self, call: usize) -> u32 {
        self.attempts
            .lock()
            .unwrap()
            .get(&call)
            .copied()
            .unwrap_or(0)
    }
}

/// The error of the `Retrier`'s calls: the service's, or the breaker's refusal (which these
/// calls never meet).
#[derive(Debug)]
enum Busy {
    Busy,
    Open,
}

impl From<CircuitOpen> for Busy {
    fn from(_: CircuitOpen) -> Self {
        Busy::Open
    }
}

/// The `Named` each call ran under, by call: what the doors' lookups returned.
type Seen = Arc<Mutex<HashMap<usize, Vec<Arc<Named>>>>>;

/// A route chooser over the registry that notes, per call (its path `/call/<n>`), the `Named`
/// it chose.
fn route(
    registry: &Arc<Registry>,
    seen: &Seen,
) -> impl Fn(&Route<'_>) -> Option<Arc<Named>> + Send + Sync + 'static {
    let (registry, seen) = (Arc::clone(registry), Arc::clone(seen));
    move |route: &Route<'_>| {
        let named = registry.get(NAME)?;
        let call: usize = route.path.strip_prefix("/call/")?.parse().ok()?;
        seen.lock()
            .unwrap()
            .entry(call)
            .or_default()
            .push(Arc::clone(&named));
        Some(named)
    }
}

#[tokio::test]
async fn a_reload_while_1000_calls_run_through_three_doors_never_mixes_old_and_new() {
    install_metrics();
    const CALLS: usize = 1000;
    // Calls 0..400 start before the swap and wait at their first attempt until after it;
    // 400..500 start and end after a refused reload, before the swap; 500.. start after it.
    const HELD: usize = 400;
    const SWAP: usize = 500;

    let registry = Arc::new(Registry::new(Config::from_toml(OLD).unwrap()).name("reload-test"));
    let first = registry.get(NAME).expect("configured");
    let (released, release) = watch::channel(false);
    let service = Arc::new(Service0 {
        attempts: Mutex::default(),
        arrived: AtomicUsize::new(0),
        held: HELD,
        release,
    });
    let seen: Seen = Arc::default();

    // The loopback server of the reqwest middleware.
    let app = Router::new()
        .route(
            "/call/{call}",
            axum::routing::get(
                |Axum(service): Axum<Arc<Service0>>, Path(call): Path<usize>| async move {
                    service.attempt(call).await;
                    StatusCode::SERVICE_UNAVAILABLE
                },
            ),
        )
        .with_state(Arc::clone(&service));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = HttpRetry::new(Policy::new().max(0)).route(route(&registry, &seen));
    let middleware = RetryMiddleware::new(http.clone().name("reqwest"));
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .build();

    // The tower layer over an in-process service.
    let inner = {
        let service = Arc::clone(&service);
        tower::service_fn(
            move |request: http::Request<retry_http::ReplayBody<Empty<Bytes>>>| {
                let service = Arc::clone(&service);
                async move {
                    let call: usize = request.uri().path()["/call/".len()..].parse().unwrap();
                    service.attempt(call).await;
                    let response = http::Response::builder()
                        .status(StatusCode::SERVICE_UNAVAILABLE)
                        .body(String::new())
                        .unwrap();
                    Ok::<_, std::convert::Infallible>(response)
                }
            },
        )
    };
    let layered = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(http.name("tower")))
        .service(inner);

    // One call through the door `call % 3`: its pauses, recorded.
    let start = |call: usize| {
        let (registry, service, seen) = (
            Arc::clone(&registry),
            Arc::clone(&service),
            Arc::clone(&seen),
        );
        let (client, mut layered) = (client.clone(), layered.clone());
        tokio::spawn(testing::record_async(async move {
            match call % 3 {
                0 => {
                    // The `Retrier`: the call looks the name up once and holds it.
                    let named = registry.get(NAME).expect("configured");
                    seen.lock()
                        .unwrap()
                        .entry(call)
                        .or_default()
                        .push(Arc::clone(&named));
                    let outcome = retrier_with_breaker::<(), Busy>(&named)
                        .on(|error: &Busy| matches!(error, Busy::Busy))
                        .run_async(|| async {
                            service.attempt(call).await;
                            Err(Busy::Busy)
                        })
                        .await;
                    assert!(matches!(outcome, Err(Busy::Busy)), "{outcome:?}");
                }
                1 => {
                    let request =
                        http::Request::get(format!("http://contract.internal/call/{call}"))
                            .body(Empty::<Bytes>::new())
                            .unwrap();
                    let ready = layered.ready().await.unwrap();
                    let response = ready.call(request).await.unwrap();
                    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
                }
                _ => {
                    let url = format!("http://{address}/call/{call}");
                    let response = client.get(url).send().await.unwrap();
                    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
                }
            }
        }))
    };

    // Before the swap: calls that start, look the policy up, and wait inside their first
    // attempt.
    let held: Vec<_> = (0..HELD).map(start).collect();
    while service.arrived.load(Ordering::SeqCst) < HELD {
        tokio::time::sleep(MS).await;
    }

    // A file that fails validation: refused, reported, and nothing changes.
    let refused = registry.reload_toml(BAD).unwrap_err();
    assert_eq!(refused.key(), Some("retry.contract-service"), "{refused}");
    assert!(refused.message().contains("attempts"), "{refused}");
    assert!(Arc::ptr_eq(&registry.get(NAME).unwrap(), &first));
    assert_eq!(registry.generation(), 1);
    let after_refusal: Vec<_> = (HELD..SWAP).map(start).collect();
    let mut pauses = Vec::new();
    for call in after_refusal {
        pauses.push(call.await.unwrap().1);
    }

    // The swap, while 400 calls are under way.
    let reloaded = registry.reload_toml(NEW).unwrap();
    assert_eq!(reloaded.changed(), [NAME]);
    assert_eq!(reloaded.generation(), 2);
    let second = registry.get(NAME).expect("configured");
    released.send(true).unwrap();
    let after_swap: Vec<_> = (SWAP..CALLS).map(start).collect();

    let mut held_pauses = Vec::new();
    for call in held {
        held_pauses.push(call.await.unwrap().1);
    }
    pauses.splice(0..0, held_pauses);
    for call in after_swap {
        pauses.push(call.await.unwrap().1);
    }
    assert_eq!(pauses.len(), CALLS);

    let seen = seen.lock().unwrap();
    for (call, pauses) in pauses.iter().enumerate() {
        // One lookup per call, whatever the door, and the pauses of that one policy, whole.
        let looked_up = &seen[&call];
        assert_eq!(
            looked_up.len(),
            1,
            "call {call} looked the name up {} times",
            looked_up.len()
        );
        let (expected, named) = if call < SWAP {
            (old_pauses(), &first)
        } else {
            (new_pauses(), &second)
        };
        assert!(
            Arc::ptr_eq(&looked_up[0], named),
            "call {call} ran under the wrong generation"
        );
        assert_eq!(*pauses, expected, "call {call} (door {})", call % 3);
        assert_eq!(
            service.attempts(call) as usize,
            expected.len() + 1,
            "call {call}"
        );
    }

    // The breaker's settings changed: a fresh breaker, with the new settings; the old one is
    // the old `Named`'s alone.
    let (old_breaker, new_breaker) = (first.get_breaker().unwrap(), second.get_breaker().unwrap());
    assert!(!std::ptr::eq(old_breaker, new_breaker));
    let settings = serde_json::to_value(new_breaker).unwrap();
    assert_eq!(settings["consecutive_failures"], 200000, "{settings}");

    // Counted: the registry's counters and the metrics.
    let counters = registry.counters();
    assert_eq!(
        (
            counters.policies_added(),
            counters.policies_changed(),
            counters.policies_removed()
        ),
        (1, 1, 0)
    );
    assert_eq!(counters.reloads_rejected(), 1);
    assert_eq!(door_events(NAME, "policy_changed"), 1);
    assert_eq!(door_events(NAME, "policy_added"), 1);
    assert_eq!(door_events("reload-test", "reload_rejected"), 1);
}

// ---- what a reload keeps, and what it replaces ----

/// An in-process service for the tower layer that counts its attempts and is always busy.
fn busy_service(
    attempts: &Arc<AtomicUsize>,
) -> impl Service<
    http::Request<retry_http::ReplayBody<Empty<Bytes>>>,
    Response = http::Response<String>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone
+ Send
+ 'static {
    let attempts = Arc::clone(attempts);
    tower::service_fn(
        move |_: http::Request<retry_http::ReplayBody<Empty<Bytes>>>| {
            attempts.fetch_add(1, Ordering::SeqCst);
            async move {
                let response = http::Response::builder()
                    .status(StatusCode::SERVICE_UNAVAILABLE)
                    .body(String::new())
                    .unwrap();
                Ok(response)
            }
        },
    )
}

fn ledger(timings: &str, breaker: &str) -> String {
    format!("[retry.ledger]\njitter = \"none\"\n{timings}\nbreaker = {{ {breaker} }}\n")
}

#[tokio::test]
async fn a_breaker_keeps_its_state_when_its_settings_are_kept_and_starts_closed_when_they_change() {
    let registry = Arc::new(Registry::new(
        Config::from_toml(&ledger(
            "max = 0",
            "consecutive_failures = 2, open_for = \"1h\"",
        ))
        .unwrap(),
    ));
    let opened = registry.get("ledger").unwrap();
    // Two failed calls through the `Retrier` open the name's breaker.
    for _ in 0..2 {
        let outcome = retrier_with_breaker::<(), Busy>(&opened)
            .on(|error: &Busy| matches!(error, Busy::Busy))
            .run(|| Err(Busy::Busy));
        assert!(matches!(outcome, Err(Busy::Busy)));
    }

    // The tower layer, choosing the name per request.
    let attempts = Arc::new(AtomicUsize::new(0));
    let chooser = Arc::clone(&registry);
    let layer = RetryLayer::new(
        HttpRetry::new(Policy::new().max(0)).route(move |_: &Route<'_>| chooser.get("ledger")),
    );
    let service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(busy_service(&attempts));
    let call = |service: &_| {
        let service: tower::util::BoxCloneService<_, _, _> =
            tower::util::BoxCloneService::new(Clone::clone(service));
        let request = http::Request::get("http://ledger.internal/entries")
            .body(Empty::<Bytes>::new())
            .unwrap();
        testing::record_async(service.oneshot(request))
    };

    // The timings change, the breaker's settings do not: the same breaker, still open, so the
    // HTTP door's request is refused without reaching the service.
    let reloaded = registry
        .reload_toml(&ledger(
            "max = 1",
            "consecutive_failures = 2, open_for = \"1h\"",
        ))
        .unwrap();
    assert_eq!(reloaded.changed(), ["ledger"]);
    let kept = registry.get("ledger").unwrap();
    assert!(std::ptr::eq(
        kept.get_breaker().unwrap(),
        opened.get_breaker().unwrap()
    ));
    let (refused, pauses) = call(&service).await;
    let refused = refused.unwrap_err();
    assert!(refused.downcast_ref::<CircuitOpen>().is_some(), "{refused}");
    assert_eq!((attempts.load(Ordering::SeqCst), pauses.len()), (0, 0));

    // The breaker's settings change: a fresh breaker, closed, with the new threshold; the
    // request is sent, and retried under the new timings (`max = 1`).
    let reloaded = registry
        .reload_toml(&ledger(
            "max = 1",
            "consecutive_failures = 3, open_for = \"1h\"",
        ))
        .unwrap();
    assert_eq!(reloaded.changed(), ["ledger"]);
    let fresh = registry.get("ledger").unwrap();
    assert!(!std::ptr::eq(
        fresh.get_breaker().unwrap(),
        opened.get_breaker().unwrap()
    ));
    let (answered, pauses) = call(&service).await;
    assert_eq!(answered.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        (attempts.load(Ordering::SeqCst), pauses),
        (2, vec![Duration::from_secs(1)])
    );
    // The old breaker is still open for the calls that hold it; no new call sees it.
    let outcome = retrier_with_breaker::<(), Busy>(&opened)
        .on(|error: &Busy| matches!(error, Busy::Busy))
        .run(|| Err(Busy::Busy));
    assert!(matches!(outcome, Err(Busy::Open)));

    // The same file again: nothing changes, the same `Named` runs on, and nothing is reported.
    let reloaded = registry
        .reload_toml(&ledger(
            "max = 1",
            "consecutive_failures = 3, open_for = \"1h\"",
        ))
        .unwrap();
    assert_eq!(reloaded, reloaded.clone());
    assert!(reloaded.changed().is_empty() && reloaded.added().is_empty());
    assert!(Arc::ptr_eq(&registry.get("ledger").unwrap(), &fresh));

    // Removed: the name is gone for the next lookup; the door runs its own options.
    let reloaded = registry.reload_toml("[retry.other]\nmax = 1").unwrap();
    assert_eq!(
        (reloaded.added(), reloaded.removed()),
        (&["other"][..], &["ledger"][..])
    );
    assert!(registry.get("ledger").is_none());
    let counters = registry.counters();
    assert_eq!(
        (
            counters.policies_added(),
            counters.policies_changed(),
            counters.policies_removed()
        ),
        (2, 2, 1)
    );
    assert_eq!(registry.generation(), 5);
}

#[test]
fn what_runs_is_shown_in_the_keys_it_is_read_from_and_reads_back_the_same() {
    let registry = Registry::new(
        Config::from_toml(
            r#"
[retry.shown-service]
attempts = 4
base = "250ms"
max_delay = "90s"
jitter = "full"
timeout = "2s"
budget = { ratio = 0.2, min_per_second = 5 }
breaker = { consecutive_failures = 5, open_for = "30s" }
hedge = { hedge = "p95", max_hedges = 2 }
"#,
        )
        .unwrap(),
    );
    // The hedge, for a door that hedges on the engine.
    let hedge = registry.hedge("shown-service").expect("a hedge");
    assert_eq!(serde_json::to_value(&*hedge).unwrap()["max_hedges"], 2);
    let shown = serde_json::to_value(registry.config()).unwrap();
    let entry = &shown["shown-service"];
    assert_eq!(
        (entry["base"].as_str(), entry["timeout"].as_str()),
        (Some("250ms"), Some("2s"))
    );
    // The breaker and the budget are named after the policy, for their metrics.
    assert_eq!(entry["breaker"]["name"], "shown-service", "{shown}");
    // Read back, it is the same configuration: a reload of it changes nothing.
    let again = Config::from_json(&serde_json::json!({ "retry": shown }).to_string()).unwrap();
    let before = registry.get("shown-service").unwrap();
    let reloaded = registry.reload(again);
    assert!(reloaded.changed().is_empty(), "{shown}");
    assert!(Arc::ptr_eq(
        &registry.get("shown-service").unwrap(),
        &before
    ));
}

/// Every malformed file is refused with the key, the rule and the value, and none panics.
#[test]
fn a_malformed_file_is_refused_with_the_key_the_rule_and_the_value() {
    let cases: &[(&str, Option<&str>, &[&str])] = &[
        (
            "[retry.\"contract service\"]\nmax = 3",
            Some("retry.contract service"),
            &["letters", "\"contract service\""],
        ),
        (
            "[retry.x]\nbase = \"fast\"",
            Some("retry.x"),
            &["`base = \"fast\"`", "expected a duration"],
        ),
        (
            "[retry.x]\nmax = 3\nattempts = 4",
            Some("retry.x"),
            &["not both", "`max = 3` is `attempts = 4`"],
        ),
        (
            "[retry.x]\nmax = -1",
            Some("retry.x"),
            &["`max = -1`", "cannot be negative"],
        ),
        (
            "[retry.x]\nmaxx = 3",
            Some("retry.x"),
            &["unknown key `maxx`", "did you mean `max`?"],
        ),
        (
            "[retry.x]\non = \"is_transient\"",
            Some("retry.x"),
            &["`on` is written in code"],
        ),
        (
            "[retry.x]\nbase = \"1000000000000d\"",
            Some("retry.x"),
            &["unknown unit `d`"],
        ),
        (
            "[retry.x]\ntimeout = \"0s\"",
            Some("retry.x.timeout"),
            &["`timeout = \"0s\"`", "longer than zero"],
        ),
        (
            "[retry.x]\ntimeout = 5",
            Some("retry.x.timeout"),
            &["needs a unit"],
        ),
        (
            "[retry.x]\nbreaker = { failure_rate = 1.5 }",
            Some("retry.x.breaker"),
            &["`failure_rate = 1.5` is too large"],
        ),
        (
            "[retry.x]\nbreaker = { opn_for = \"1s\" }",
            Some("retry.x.breaker"),
            &["did you mean `open_for`?"],
        ),
        (
            "[retry.x]\nbudget = { ratio = -1 }",
            Some("retry.x.budget"),
            &["`ratio` cannot be negative"],
        ),
        (
            "[retry.x]\nbudget = 5",
            Some("retry.x.budget"),
            &["integer `5`"],
        ),
        (
            "[retry.x]\nhedge = { delay = \"x\" }",
            Some("retry.x.hedge"),
            &["unknown key `delay`"],
        ),
        (
            "retry = 3",
            Some("retry"),
            &["expected a table of named policies", "found a number"],
        ),
        (
            "[retry]\nx = 3",
            Some("retry.x"),
            &["expected a table of the policy's keys", "found a number"],
        ),
        ("[retry.x\nmax = 3", None, &["line 1", "expected `]`"]),
    ];
    let registry =
        Registry::new(Config::from_toml("[retry.x]\nmax = 1").unwrap()).name("malformed");
    let running = registry.get("x").unwrap();
    for (text, key, fragments) in cases {
        let error = registry.reload_toml(text).unwrap_err();
        assert_eq!(error.key(), *key, "{text:?}: {error}");
        for fragment in *fragments {
            assert!(error.to_string().contains(fragment), "{text:?}: {error}");
        }
        assert!(
            Arc::ptr_eq(&registry.get("x").unwrap(), &running),
            "{text:?} changed the registry"
        );
    }
    assert_eq!(registry.counters().reloads_rejected(), cases.len() as u64);
    assert_eq!(registry.generation(), 1);
    // JSON, through the same path.
    let error = Config::from_json(r#"{"retry": {"x": {"max": "three"}}}"#).unwrap_err();
    assert_eq!(error.key(), Some("retry.x"), "{error}");
}

/// `HttpRetry::route` chooses a policy per host (and route) from the registry, per request; a
/// request it chooses none for runs under the options' own policy.
#[tokio::test]
async fn the_http_doors_choose_a_named_policy_per_host_and_route() {
    let registry = Arc::new(Registry::new(
        Config::from_toml(
            r#"
[retry.fast]
max = 1
base = "5ms"
jitter = "none"

[retry.slow]
max = 2
base = "1s"
jitter = "none"
"#,
        )
        .unwrap(),
    ));
    let chooser = Arc::clone(&registry);
    let route = move |route: &Route<'_>| match (route.host, route.path) {
        (Some("fast.internal"), _) => chooser.get("fast"),
        (Some("slow.internal"), path) if path.starts_with("/v1/") => chooser.get("slow"),
        _ => None,
    };
    let attempts = Arc::new(AtomicUsize::new(0));
    let service = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(
            HttpRetry::new(Policy::new().max(0)).route(route),
        ))
        .service(busy_service(&attempts));
    let cases = [
        ("http://fast.internal/any", vec![5 * MS]),
        (
            "http://slow.internal/v1/entries",
            vec![Duration::from_secs(1), Duration::from_secs(2)],
        ),
        // Another route of the same host, and another host: the options' own `max = 0`.
        ("http://slow.internal/v2/entries", vec![]),
        ("http://other.internal/v1/entries", vec![]),
    ];
    for (url, expected) in cases {
        attempts.store(0, Ordering::SeqCst);
        let request = http::Request::get(url).body(Empty::<Bytes>::new()).unwrap();
        let (response, pauses) = testing::record_async(service.clone().oneshot(request)).await;
        assert_eq!(response.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(pauses, expected, "{url}");
        assert_eq!(attempts.load(Ordering::SeqCst), expected.len() + 1, "{url}");
    }
    // A request without a host in its URI is routed by its `Host` header, port dropped.
    attempts.store(0, Ordering::SeqCst);
    let request = http::Request::get("/any")
        .header(http::header::HOST, "fast.internal:8080")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let (_, pauses) = testing::record_async(service.clone().oneshot(request)).await;
    assert_eq!(pauses, [5 * MS]);
}

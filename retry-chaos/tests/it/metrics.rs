//! Injected and real failures told apart in the metrics: a real recorder (metrics-util's
//! registry, installed as the global recorder once for this binary) reads
//! `retry_door_events_total{event="injected_error"}` beside `retry_retries_total`, which counts
//! both.

use crate::common::CallError;
use metrics::{
    Counter, Gauge, Histogram, Key, KeyName, Label, Metadata, Recorder, SharedString, Unit,
};
use metrics_util::registry::{AtomicStorage, Registry};
use retry_chaos::{Attempts, Rule, Site};
use retry_runtime::{attempt, retry};
use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Once};

static REGISTRY: LazyLock<Registry<Key, AtomicStorage>> = LazyLock::new(Registry::atomic);

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

fn counter(name: &'static str, labels: &[(&'static str, &'static str)]) -> u64 {
    let labels: Vec<Label> = labels
        .iter()
        .map(|&(k, v)| Label::from_static_parts(k, v))
        .collect();
    REGISTRY
        .get_counter(&Key::from_parts(name, labels))
        .map_or(0, |c| c.load(Ordering::Relaxed))
}

#[retry(max = 3, base = "1ms", jitter = none)]
fn mixed() -> Result<u32, CallError> {
    // A real failure on every first attempt.
    match attempt().number() {
        1 => Err(CallError::Unavailable),
        n => Ok(n),
    }
}

/// 50 calls, each with a real failure on attempt 1 and an injected one on attempt 2: 100
/// retries, of which the 50 injected are `retry_door_events_total{event="injected_error"}`.
#[test]
fn injected_and_real_failures_are_told_apart_in_the_metrics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        metrics::set_global_recorder(Global).expect("no other global recorder in this binary");
    });
    let site = Site::new("mixed")
        .seed(41)
        .rule(Rule::error().attempts(Attempts::Only(2)))
        .install();
    for _ in 0..50 {
        assert_eq!(mixed(), Ok(3));
    }
    site.remove();
    let function = ("function", "mixed");
    assert_eq!(counter("retry_retries_total", &[function]), 100);
    assert_eq!(
        counter(
            "retry_door_events_total",
            &[function, ("event", "injected_error")]
        ),
        50
    );
    assert_eq!(
        counter(
            "retry_door_events_total",
            &[function, ("event", "injected_latency")]
        ),
        0
    );
}

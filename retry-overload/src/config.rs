//! The gate's settings from and to a configuration (feature `serde`): `mode` and the mode's
//! settings, read by `retry-grammar` as retry-runtime's settings are.
//!
//! ```toml
//! mode = "aimd"
//! name = "inventory"
//! initial_limit = 10
//! backoff_ratio = 0.8
//! ```

use crate::gate::Mode;
use crate::{AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, Gradient2};
use retry_grammar::config::{self as grammar, Read, Written};
use serde_core::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// A fresh gate (nothing learnt yet) with the settings of its `mode`:
/// `adaptive_throttling` (`k`, `window`, `bins`, `requests_padding`), `rate_limit`
/// (`fail_fast`, `beta`, `scale_constant`, `smoothing`, `min_fill_rate`), `aimd`
/// (`initial_limit`, `min_limit`, `max_limit`, `backoff_ratio`, `timeout`) or `gradient2`
/// (`initial_limit`, `min_limit`, `max_limit`, `smoothing`, `queue_size`, `long_window`,
/// `rtt_tolerance`); and `name`.
impl<'de> Deserialize<'de> for AdmissionGate {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<AdmissionGate, D::Error> {
        let (mode, read) = grammar::deserialize_gate(deserializer)?;
        let gate = match mode {
            "rate_limit" => AdmissionGate::rate_limit(rate_limit(&read)),
            "aimd" => AdmissionGate::aimd(aimd(&read)),
            "gradient2" => AdmissionGate::gradient2(gradient2(&read)),
            _ => AdmissionGate::adaptive_throttling(throttling(&read)),
        };
        Ok(match read.text(&grammar::GATE_NAME) {
            Some(name) => gate.name(interned(name)),
            None => gate,
        })
    }
}

/// `builder(x, value)` if the value was written, else `x`.
fn set<T, V>(x: T, value: Option<V>, builder: impl FnOnce(T, V) -> T) -> T {
    match value {
        Some(value) => builder(x, value),
        None => x,
    }
}

fn nanos(read: &Read, key: &retry_grammar::Key) -> Option<Duration> {
    read.duration(key).map(Duration::from_nanos)
}

fn throttling(read: &Read) -> AdaptiveThrottling {
    let c = AdaptiveThrottling::new();
    let c = set(c, read.number(&grammar::K), AdaptiveThrottling::k);
    let c = set(
        c,
        nanos(read, &grammar::THROTTLING_WINDOW),
        AdaptiveThrottling::window,
    );
    let c = set(c, read.count(&grammar::BINS), AdaptiveThrottling::bins);
    let padding = read.number(&grammar::REQUESTS_PADDING);
    set(c, padding, AdaptiveThrottling::requests_padding)
}

fn rate_limit(read: &Read) -> ClientRateLimit {
    let c = ClientRateLimit::new();
    let c = set(
        c,
        read.boolean(&grammar::FAIL_FAST),
        ClientRateLimit::fail_fast,
    );
    let c = set(c, read.number(&grammar::BETA), ClientRateLimit::beta);
    let c = set(
        c,
        read.number(&grammar::SCALE_CONSTANT),
        ClientRateLimit::scale_constant,
    );
    let c = set(
        c,
        read.number(&grammar::RATE_SMOOTHING),
        ClientRateLimit::smoothing,
    );
    set(
        c,
        read.number(&grammar::MIN_FILL_RATE),
        ClientRateLimit::min_fill_rate,
    )
}

fn aimd(read: &Read) -> Aimd {
    let c = Aimd::new();
    let c = set(c, read.count(&grammar::INITIAL_LIMIT), Aimd::initial_limit);
    let c = set(c, read.count(&grammar::MIN_LIMIT), Aimd::min_limit);
    let c = set(c, read.count(&grammar::MAX_LIMIT), Aimd::max_limit);
    let c = set(c, read.number(&grammar::BACKOFF_RATIO), Aimd::backoff_ratio);
    set(c, nanos(read, &grammar::AIMD_TIMEOUT), Aimd::timeout)
}

fn gradient2(read: &Read) -> Gradient2 {
    let c = Gradient2::new();
    let c = set(
        c,
        read.count(&grammar::INITIAL_LIMIT),
        Gradient2::initial_limit,
    );
    let c = set(c, read.count(&grammar::MIN_LIMIT), Gradient2::min_limit);
    let c = set(c, read.count(&grammar::MAX_LIMIT), Gradient2::max_limit);
    let c = set(
        c,
        read.number(&grammar::GRADIENT_SMOOTHING),
        Gradient2::smoothing,
    );
    let c = set(c, read.count(&grammar::QUEUE_SIZE), Gradient2::queue_size);
    let c = set(c, read.count(&grammar::LONG_WINDOW), Gradient2::long_window);
    set(
        c,
        read.number(&grammar::RTT_TOLERANCE),
        Gradient2::rtt_tolerance,
    )
}

/// A gate's name, kept for the process's life as its metrics' label must be: each distinct
/// name once, however often a configuration is read again.
fn interned(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    let names = names.get_or_insert_with(HashSet::new);
    match names.get(name) {
        Some(name) => name,
        None => {
            let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
            names.insert(name);
            name
        }
    }
}

/// The settings it runs with, not what it has learnt: `mode`, `name`, and the mode's settings.
impl Serialize for AdmissionGate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let duration =
            |d: Duration| Written::duration(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let text = |word: &str| Written::Text(word.to_owned());
        let mut entries = vec![
            ("mode", text(self.mode().as_str())),
            ("name", text(self.get_name())),
        ];
        match &self.mode {
            Mode::Throttling(throttler) => {
                let c = &throttler.config;
                entries.extend([
                    ("k", Written::Number(c.get_k())),
                    ("window", duration(c.get_window())),
                    ("bins", Written::Count(c.get_bins())),
                    (
                        "requests_padding",
                        Written::Number(c.get_requests_padding()),
                    ),
                ]);
            }
            Mode::RateLimit(limiter) => {
                let c = &limiter.config;
                entries.extend([
                    ("fail_fast", Written::Bool(c.fail_fast)),
                    ("beta", Written::Number(c.beta)),
                    ("scale_constant", Written::Number(c.scale)),
                    ("smoothing", Written::Number(c.smoothing)),
                    ("min_fill_rate", Written::Number(c.min_fill_rate)),
                ]);
            }
            Mode::Aimd { config: c, .. } => entries.extend([
                ("initial_limit", Written::Count(c.limits.initial)),
                ("min_limit", Written::Count(c.limits.min)),
                ("max_limit", Written::Count(c.limits.max)),
                ("backoff_ratio", Written::Number(c.backoff_ratio)),
                ("timeout", duration(c.timeout)),
            ]),
            Mode::Gradient2(limiter) => {
                let c = &limiter.config;
                entries.extend([
                    ("initial_limit", Written::Count(c.limits.initial)),
                    ("min_limit", Written::Count(c.limits.min)),
                    ("max_limit", Written::Count(c.limits.max)),
                    ("smoothing", Written::Number(c.smoothing)),
                    ("queue_size", Written::Count(c.queue_size)),
                    ("long_window", Written::Count(c.long_window)),
                    ("rtt_tolerance", Written::Number(c.rtt_tolerance)),
                ]);
            }
        }
        grammar::serialize(serializer, &entries)
    }
}

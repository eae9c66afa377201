//! The settings from and to a configuration (feature `serde`): [`Policy`], [`RetryBudget`],
//! [`CircuitBreaker`], [`Hedge`], [`AdmissionGate`](crate::AdmissionGate) and a per-attempt
//! [`Timeout`] implement `Deserialize` and `Serialize`, with the keys, units and rules of
//! `#[retry]`; the guide is [`guide::configuration`](crate::guide::configuration).
//!
//! Each map is read by `retry-grammar`, the attribute's own grammar (never a second parser):
//! a value is handed over as it came, and the error is the grammar's message, naming the key,
//! the value and the rule. Serializing writes the same keys with durations in
//! one unit (`"90s"`, `"250ms"`), so that what is written reads back to the same settings.

use crate::policy::nanos;
use crate::{Backoff, CircuitBreaker, Hedge, Jitter, Policy, RetryBudget};
use retry_grammar::Setting;
use retry_grammar::config::{
    self as grammar, Written as Out, deserialize as read, serialize as write,
};
use serde_core::ser::{self, Serializer};
use serde_core::{Deserialize, Deserializer, Serialize, de};
use std::time::Duration;

/// A per-attempt timeout as a configuration writes it: `timeout = "2s"` (zero is refused, as
/// in the attribute). A newtype, so that an `Option<Timeout>` field of your own configuration
/// reads and writes it.
///
/// ```
/// use retry_runtime::config::Timeout;
/// use std::time::Duration;
///
/// let Timeout(limit) = serde_json::from_str(r#""2s""#)?;
/// assert_eq!(limit, Duration::from_secs(2));
/// assert_eq!(serde_json::to_string(&Timeout(limit))?, r#""2s""#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timeout(pub Duration);

fn text(duration: Duration) -> Out {
    Out::duration(nanos(duration))
}

/// `max = 3`, `base = "1s"`, ...: the timing keys of `#[retry]` and `Policy::from_str`, with
/// their rules.
///
/// ```
/// use retry_runtime::{Jitter, Policy};
/// use std::time::Duration;
///
/// let policy: Policy = toml::from_str(r#"
///     max = 5
///     base = "250ms"
///     jitter = "full"
/// "#)?;
/// assert_eq!(policy, Policy::new().max(5).base(Duration::from_millis(250)).jitter(Jitter::Full));
/// # Ok::<(), toml::de::Error>(())
/// ```
impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Policy, D::Error> {
        read(deserializer, &grammar::POLICY).map(|read| Policy::from_timings(read.timings()))
    }
}

/// Every timing: `max`, `base`, `factor` (with an exponential backoff: under another it has no
/// effect, and the attribute refuses it), `backoff`, `jitter`, and `max_delay`, `throttle_base`
/// and `deadline` when set. A policy that no configuration can write is an error:
/// [`Jitter::Spread`], or an exponential factor below 1 ([`Policy::factor_unclamped`]). A
/// policy built in code that breaks a rule of the attribute (a `deadline` shorter than `base`)
/// is written as it runs, and reading it back is refused as the attribute refuses it.
impl Serialize for Policy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut entries = vec![
            ("max", Out::Count(self.get_max())),
            ("base", text(self.get_base())),
        ];
        let backoff = match self.get_backoff() {
            Backoff::Exponential => "exponential",
            Backoff::Linear => "linear",
            Backoff::Constant => "constant",
        };
        if self.get_backoff() == Backoff::Exponential {
            let factor = self.get_factor();
            if factor < 1.0 {
                return Err(ser::Error::custom(format!(
                    "a factor below 1 (`factor_unclamped({factor})`) has no configuration form: `factor` is a number ≥ 1"
                )));
            }
            entries.push(("factor", Out::Number(factor)));
        }
        entries.push(("backoff", Out::Text(backoff.to_owned())));
        let word = |word: &str| Out::Text(word.to_owned());
        let jitter = match self.get_jitter() {
            Jitter::None => word("none"),
            Jitter::Proportional(f) => Out::Number(f),
            Jitter::Absolute(j) => text(j),
            Jitter::Full => word("full"),
            Jitter::Equal => word("equal"),
            Jitter::Decorrelated => word("decorrelated"),
            Jitter::Spread(f) => {
                return Err(ser::Error::custom(format!(
                    "`Jitter::Spread({f})` has no configuration form: `jitter` is none, a fraction, a duration, `full`, `equal` or `decorrelated`"
                )));
            }
        };
        entries.push(("jitter", jitter));
        let optional = [
            ("max_delay", self.max_delay),
            ("throttle_base", self.throttle_base),
            ("deadline", self.deadline),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                entries.push((key, text(value)));
            }
        }
        write(serializer, &entries)
    }
}

/// `ratio`, `min_per_second`, `max_tokens`: a fresh, empty budget with them.
impl<'de> Deserialize<'de> for RetryBudget {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<RetryBudget, D::Error> {
        let read = read(deserializer, &grammar::BUDGET)?;
        let b = RetryBudget::new();
        let b = set(b, read.number(&grammar::RATIO), RetryBudget::ratio);
        let b = set(
            b,
            read.count(&grammar::MIN_PER_SECOND),
            RetryBudget::min_per_second,
        );
        Ok(set(
            b,
            read.count(&grammar::MAX_TOKENS),
            RetryBudget::max_tokens,
        ))
    }
}

/// `builder(x, value)` if the value was written, else `x`.
fn set<T, V>(x: T, value: Option<V>, builder: impl FnOnce(T, V) -> T) -> T {
    match value {
        Some(value) => builder(x, value),
        None => x,
    }
}

/// The settings it runs with, not its tokens.
impl Serialize for RetryBudget {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        write(
            serializer,
            &[
                ("ratio", Out::Number(self.get_ratio())),
                ("min_per_second", Out::Count(self.get_min_per_second())),
                ("max_tokens", Out::Count(self.get_max_tokens())),
            ],
        )
    }
}

/// `consecutive_failures`, `failure_rate`, `window`, `min_calls`, `open_for`, `name`: a fresh,
/// closed breaker with them.
impl<'de> Deserialize<'de> for CircuitBreaker {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<CircuitBreaker, D::Error> {
        let read = read(deserializer, &grammar::BREAKER)?;
        let nanos = |key| read.duration(key).map(Duration::from_nanos);
        let b = CircuitBreaker::new();
        let b = set(
            b,
            read.count(&grammar::CONSECUTIVE_FAILURES),
            CircuitBreaker::consecutive_failures,
        );
        let b = set(
            b,
            read.number(&grammar::FAILURE_RATE),
            CircuitBreaker::failure_rate,
        );
        let b = set(b, read.count(&grammar::WINDOW), CircuitBreaker::window);
        let b = set(
            b,
            read.count(&grammar::MIN_CALLS),
            CircuitBreaker::min_calls,
        );
        let b = set(b, nanos(&grammar::OPEN_FOR), CircuitBreaker::open_for);
        let name = read
            .text(&grammar::BREAKER_NAME)
            .map(crate::engine::interned);
        Ok(set(b, name, CircuitBreaker::name))
    }
}

/// The settings it runs with, not its state; `failure_rate` and `min_calls` when set.
impl Serialize for CircuitBreaker {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = &self.config;
        let mut entries = vec![("consecutive_failures", Out::Count(c.consecutive_failures))];
        if let Some(rate) = c.failure_rate {
            entries.push(("failure_rate", Out::Number(rate)));
        }
        entries.push(("window", Out::Count(c.window)));
        if let Some(calls) = c.min_calls {
            entries.push(("min_calls", Out::Count(calls)));
        }
        entries.push(("open_for", text(c.open_for)));
        entries.push(("name", Out::Text(c.name.to_owned())));
        write(serializer, &entries)
    }
}

/// `hedge` (`"50ms"` or `"p95"`), `max_hedges`, `min_samples`, `period`: a fresh hedge that has
/// observed nothing yet.
impl<'de> Deserialize<'de> for Hedge {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Hedge, D::Error> {
        let read = read(deserializer, &grammar::HEDGING)?;
        let hedge = match read.setting(&retry_grammar::HEDGE) {
            Some(Setting::Percentile(p)) => Hedge::percentile(p),
            Some(Setting::Duration(d)) => Hedge::after(Duration::from_nanos(d)),
            // `read` refuses a hedge without its delay.
            _ => return Err(de::Error::custom("a hedge needs `hedge`")),
        };
        let hedge = set(
            hedge,
            read.count(&retry_grammar::MAX_HEDGES),
            Hedge::max_hedges,
        );
        let hedge = set(hedge, read.count(&grammar::MIN_SAMPLES), Hedge::min_samples);
        let period = read.duration(&grammar::PERIOD).map(Duration::from_nanos);
        Ok(set(hedge, period, Hedge::period))
    }
}

/// The settings it runs with, not the latency it observed.
impl Serialize for Hedge {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let delay = match self.delay {
            crate::hedge::Delay::Fixed(d) => text(d),
            // Rounded to a billionth, so that `p99.9` is not written `p99.90000000000001`.
            crate::hedge::Delay::Percentile(fraction) => {
                Out::Text(format!("p{}", (fraction * 1e11).round() / 1e9))
            }
        };
        write(
            serializer,
            &[
                ("hedge", delay),
                ("max_hedges", Out::Count(self.get_max_hedges())),
                ("min_samples", Out::Count(self.min_samples)),
                ("period", text(self.period)),
            ],
        )
    }
}

impl<'de> Deserialize<'de> for Timeout {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Timeout, D::Error> {
        match grammar::deserialize_one(deserializer, &retry_grammar::TIMEOUT)? {
            Setting::Duration(d) => Ok(Timeout(Duration::from_nanos(d))),
            _ => Err(de::Error::custom("`timeout` takes a duration string")),
        }
    }
}

impl Serialize for Timeout {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        text(self.0).serialize(serializer)
    }
}

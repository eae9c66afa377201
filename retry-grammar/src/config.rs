//! Settings read from a configuration (TOML, YAML, JSON, environment variables) rather than
//! written in code: the same keys, units and rules as the attribute, read by the same grammar.
//!
//! With the feature `serde` (the runtime's and `retry-overload`'s turn it on), `deserialize`
//! hands each `key = value` of a map to [`read`] as a [`Scalar`];
//! a [`Section`] says which keys the map may hold. A policy's section holds the timing keys of
//! [`KEYS`](crate::KEYS); the budget's, the breaker's and the hedge's hold settings of their own,
//! defined here. A key of the attribute that is code (`on`, `notify`, `fallback`, ...) is refused
//! with where to write it instead, an unknown key with the attribute's "did you mean".

use crate::Value;
use crate::keys::{
    ATTEMPTS, BACKOFF, BASE, DEADLINE, FACTOR, HEDGE, JITTER, Key, Kind, MAX, MAX_DELAY,
    MAX_HEDGES, Pass, THROTTLE_BASE, Word,
};
use crate::read::Setting;
use crate::settings::{Context, Problem, Scope, Settings, Timings};
use std::fmt;

#[cfg(feature = "serde")]
pub use crate::serde_glue::{Written, deserialize, deserialize_gate, deserialize_one, serialize};

/// The keys one map of a configuration may hold, and what it configures.
#[derive(Debug, PartialEq, Eq)]
pub struct Section {
    /// What the map configures, for messages: "retry policy".
    pub what: &'static str,
    /// Its keys.
    pub keys: &'static [Key],
    /// The keys it must hold.
    pub required: &'static [Key],
}

/// A retry policy: the attribute's timing keys.
pub static POLICY: Section = Section {
    what: "retry policy",
    keys: &[
        MAX,
        ATTEMPTS,
        BASE,
        FACTOR,
        BACKOFF,
        MAX_DELAY,
        THROTTLE_BASE,
        DEADLINE,
        JITTER,
    ],
    required: &[],
};

/// A retry budget's settings.
pub static BUDGET: Section = Section {
    what: "retry budget",
    keys: &[RATIO, MIN_PER_SECOND, MAX_TOKENS],
    required: &[],
};

/// A circuit breaker's settings.
pub static BREAKER: Section = Section {
    what: "circuit breaker",
    keys: &[
        CONSECUTIVE_FAILURES,
        FAILURE_RATE,
        WINDOW,
        MIN_CALLS,
        OPEN_FOR,
        BREAKER_NAME,
    ],
    required: &[],
};

/// A hedge's settings: the attribute's `hedge` and `max_hedges`, and the percentile's
/// observation.
pub static HEDGING: Section = Section {
    what: "hedge",
    keys: &[HEDGE, MAX_HEDGES, MIN_SAMPLES, PERIOD],
    required: &[HEDGE],
};

/// A key of a configuration only: passed by the runtime's own code, never by the macro.
const fn setting(
    name: &'static str,
    example: &'static str,
    kind: Kind,
    doc: &'static str,
    default: &'static str,
) -> Key {
    Key {
        name,
        aliases: &[],
        example,
        kind,
        doc,
        default,
        async_only: None,
        pass: Pass::Value,
    }
}

/// A count from 0 with no rule of its own.
const fn count(counts: &'static str) -> Kind {
    Kind::Count {
        min: 0,
        max: u32::MAX,
        counts,
        below_min: "",
    }
}

/// A number from `min` (or above it) to `max`.
const fn number(min: f64, above_min: bool, max: f64, is: &'static str) -> Kind {
    Kind::Fraction {
        min,
        above_min,
        max,
        is,
    }
}

/// `ratio = 0.1`.
pub const RATIO: Key = setting(
    "ratio",
    "0.1",
    number(
        0.0,
        false,
        1000.0,
        "is the fraction of a token each first attempt deposits",
    ),
    "the fraction of a token each first attempt deposits: `0.1` pays for one retry per ten calls",
    "0.1",
);
/// `min_per_second = 10`.
pub const MIN_PER_SECOND: Key = setting(
    "min_per_second",
    "10",
    count("counts the retries per second that need no token"),
    "retries per second that need no token",
    "10",
);
/// `max_tokens = 100`.
pub const MAX_TOKENS: Key = setting(
    "max_tokens",
    "100",
    count("counts the tokens the bucket holds"),
    "the most tokens the bucket holds",
    "100",
);
/// `consecutive_failures = 5`.
pub const CONSECUTIVE_FAILURES: Key = setting(
    "consecutive_failures",
    "5",
    count("counts the failures in a row that open the circuit (0 turns the rule off)"),
    "opens the circuit after this many failures in a row",
    "5",
);
/// `failure_rate = 0.5`.
pub const FAILURE_RATE: Key = setting(
    "failure_rate",
    "0.5",
    number(
        0.0,
        false,
        1.0,
        "is the share of failed calls in the window that opens the circuit",
    ),
    "also opens the circuit when this share of the window's calls failed",
    "none",
);
/// `window = 20`: the breaker keeps at most 128 outcomes.
pub const WINDOW: Key = setting(
    "window",
    "20",
    Kind::Count {
        min: 1,
        max: 128,
        counts: "counts the most recent calls the failure rate is measured over",
        below_min: "the failure rate needs at least one call",
    },
    "how many of the most recent calls the failure rate is measured over",
    "20",
);
/// `min_calls = 10`.
pub const MIN_CALLS: Key = setting(
    "min_calls",
    "10",
    count("counts the calls in the window before the failure rate can open the circuit"),
    "the fewest calls in the window before the failure rate counts",
    "the window",
);
/// `open_for = "30s"`.
pub const OPEN_FOR: Key = setting(
    "open_for",
    "\"30s\"",
    Kind::Duration { zero: None },
    "how long the circuit stays open before a trial call",
    "`\"30s\"`",
);
/// `name = "contract"`: the breaker's metrics label.
pub const BREAKER_NAME: Key = setting(
    "name",
    "\"contract\"",
    Kind::Text,
    "the `breaker` label of its metrics",
    "`unnamed`",
);
/// `min_samples = 20`.
pub const MIN_SAMPLES: Key = setting(
    "min_samples",
    "20",
    Kind::Count {
        min: 1,
        max: u32::MAX,
        counts: "counts the latencies observed before a percentile hedges",
        below_min: "a percentile is read from at least one latency",
    },
    "for a percentile: latencies observed before hedging starts",
    "20",
);
/// `period = "10s"`.
pub const PERIOD: Key = setting(
    "period",
    "\"10s\"",
    Kind::Duration {
        zero: Some("would keep no latency to read a percentile from"),
    },
    "for a percentile: how long each of the two windows of observed latency lasts",
    "`\"10s\"`",
);

/// An admission gate's settings: its `mode`, its `name`, and the mode's own settings.
pub static GATE_MODES: &[(&str, &Section)] = &[
    ("adaptive_throttling", &GATE_THROTTLING),
    ("rate_limit", &GATE_RATE_LIMIT),
    ("aimd", &GATE_AIMD),
    ("gradient2", &GATE_GRADIENT2),
];

/// An admission gate in `mode = "adaptive_throttling"`.
pub static GATE_THROTTLING: Section = Section {
    what: "admission gate",
    keys: &[
        GATE_MODE,
        GATE_NAME,
        K,
        THROTTLING_WINDOW,
        BINS,
        REQUESTS_PADDING,
    ],
    required: &[GATE_MODE],
};

/// An admission gate in `mode = "rate_limit"`.
pub static GATE_RATE_LIMIT: Section = Section {
    what: "admission gate",
    keys: &[
        GATE_MODE,
        GATE_NAME,
        FAIL_FAST,
        BETA,
        SCALE_CONSTANT,
        RATE_SMOOTHING,
        MIN_FILL_RATE,
    ],
    required: &[GATE_MODE],
};

/// An admission gate in `mode = "aimd"`.
pub static GATE_AIMD: Section = Section {
    what: "admission gate",
    keys: &[
        GATE_MODE,
        GATE_NAME,
        INITIAL_LIMIT,
        MIN_LIMIT,
        MAX_LIMIT,
        BACKOFF_RATIO,
        AIMD_TIMEOUT,
    ],
    required: &[GATE_MODE],
};

/// An admission gate in `mode = "gradient2"`.
pub static GATE_GRADIENT2: Section = Section {
    what: "admission gate",
    keys: &[
        GATE_MODE,
        GATE_NAME,
        INITIAL_LIMIT,
        MIN_LIMIT,
        MAX_LIMIT,
        GRADIENT_SMOOTHING,
        QUEUE_SIZE,
        LONG_WINDOW,
        RTT_TOLERANCE,
    ],
    required: &[GATE_MODE],
};

/// `mode = "aimd"`: how the gate sheds load.
pub const GATE_MODE: Key = setting(
    "mode",
    "\"adaptive_throttling\"",
    Kind::Words(&[
        Word {
            word: "adaptive_throttling",
            doc: "client-side adaptive throttling, the SRE book's",
            value: "",
        },
        Word {
            word: "rate_limit",
            doc: "the AWS SDKs' adaptive client rate limit, CUBIC",
            value: "",
        },
        Word {
            word: "aimd",
            doc: "an AIMD concurrency limit",
            value: "",
        },
        Word {
            word: "gradient2",
            doc: "a Gradient2 concurrency limit",
            value: "",
        },
    ]),
    "how the gate sheds load",
    "—",
);
/// `name = "inventory"`: the gate's metrics label and its `Rejected` errors' name.
pub const GATE_NAME: Key = setting(
    "name",
    "\"inventory\"",
    Kind::Text,
    "the gate's name in its metrics and its `Rejected` errors",
    "`unnamed`",
);
/// `k = 2`.
pub const K: Key = setting(
    "k",
    "2",
    number(
        1.0,
        false,
        1000.0,
        "is the multiplier of accepts before the client sheds",
    ),
    "the client sends about K times what the service accepts before it sheds",
    "2",
);
/// `window = "2m"`, of adaptive throttling.
pub const THROTTLING_WINDOW: Key = setting(
    "window",
    "\"2m\"",
    Kind::Duration {
        zero: Some("would remember no answer"),
    },
    "how much recent history counts",
    "`\"2m\"`",
);
/// `bins = 16`.
pub const BINS: Key = setting(
    "bins",
    "16",
    Kind::Count {
        min: 1,
        max: 32,
        counts: "counts the bins the window is cut into",
        below_min: "the window is at least one bin",
    },
    "how many bins the window is cut into",
    "16",
);
/// `requests_padding = 1`.
pub const REQUESTS_PADDING: Key = setting(
    "requests_padding",
    "1",
    number(
        0.0,
        false,
        f64::INFINITY,
        "is added to the requests in the denominator",
    ),
    "added to the requests in the denominator: 1 in the SRE book, 8 in gRPC-Go",
    "1",
);
/// `fail_fast = true`.
pub const FAIL_FAST: Key = setting(
    "fail_fast",
    "true",
    Kind::Bool,
    "an attempt without a token is rejected at once instead of waiting for it",
    "false",
);
/// `beta = 0.7`.
pub const BETA: Key = setting(
    "beta",
    "0.7",
    number(
        0.0,
        true,
        1.0,
        "is the share of the sending rate kept after a throttle",
    ),
    "the share of the sending rate kept after a throttle",
    "0.7",
);
/// `scale_constant = 0.4`.
pub const SCALE_CONSTANT: Key = setting(
    "scale_constant",
    "0.4",
    number(0.0, true, f64::INFINITY, "is how fast the rate grows back"),
    "how fast the rate grows back",
    "0.4",
);
/// `smoothing = 0.8`, of the rate limit.
pub const RATE_SMOOTHING: Key = setting(
    "smoothing",
    "0.8",
    number(
        0.0,
        false,
        1.0,
        "is the weight of the latest half second in the measured rate",
    ),
    "the weight of the latest half second in the measured rate",
    "0.8",
);
/// `min_fill_rate = 0.5`.
pub const MIN_FILL_RATE: Key = setting(
    "min_fill_rate",
    "0.5",
    number(
        0.0,
        true,
        f64::INFINITY,
        "is the lowest fill rate, in tokens per second",
    ),
    "the lowest fill rate, in tokens per second",
    "0.5",
);
/// `initial_limit = 20`.
pub const INITIAL_LIMIT: Key = setting(
    "initial_limit",
    "20",
    Kind::Count {
        min: 1,
        max: u32::MAX,
        counts: "counts the attempts in flight allowed at first",
        below_min: "a limit of 0 would admit nothing",
    },
    "attempts in flight allowed at first",
    "20",
);
/// `min_limit = 20`.
pub const MIN_LIMIT: Key = setting(
    "min_limit",
    "20",
    Kind::Count {
        min: 1,
        max: u32::MAX,
        counts: "counts the fewest attempts in flight the limit keeps",
        below_min: "a limit of 0 would admit nothing",
    },
    "the fewest attempts in flight the limit keeps",
    "20",
);
/// `max_limit = 200`.
pub const MAX_LIMIT: Key = setting(
    "max_limit",
    "200",
    count("counts the most attempts in flight the limit grows to"),
    "the most attempts in flight the limit grows to",
    "200",
);
/// `backoff_ratio = 0.9`.
pub const BACKOFF_RATIO: Key = setting(
    "backoff_ratio",
    "0.9",
    number(
        0.5,
        false,
        0.999_999,
        "is the share of the limit kept after a drop",
    ),
    "the share of the limit kept after a drop",
    "0.9",
);
/// `timeout = "5s"`, of AIMD: an attempt slower than this counts as a drop.
pub const AIMD_TIMEOUT: Key = setting(
    "timeout",
    "\"5s\"",
    Kind::Duration { zero: None },
    "an attempt slower than this counts as a drop",
    "`\"5s\"`",
);
/// `smoothing = 0.2`, of Gradient2.
pub const GRADIENT_SMOOTHING: Key = setting(
    "smoothing",
    "0.2",
    number(
        0.0,
        false,
        1.0,
        "is how fast the limit follows its estimate",
    ),
    "how fast the limit follows its estimate",
    "0.2",
);
/// `queue_size = 4`.
pub const QUEUE_SIZE: Key = setting(
    "queue_size",
    "4",
    count("counts the attempts allowed to queue above the estimate"),
    "attempts allowed to queue above the estimate",
    "4",
);
/// `long_window = 600`.
pub const LONG_WINDOW: Key = setting(
    "long_window",
    "600",
    Kind::Count {
        min: 1,
        max: u32::MAX,
        counts: "counts the samples of the long-term latency average",
        below_min: "the average needs at least one sample",
    },
    "samples of the long-term latency average",
    "600",
);
/// `rtt_tolerance = 1.5`.
pub const RTT_TOLERANCE: Key = setting(
    "rtt_tolerance",
    "1.5",
    number(
        1.0,
        false,
        f64::INFINITY,
        "is how much slower than the long-term latency is tolerated",
    ),
    "how much slower than the long-term latency is tolerated before the limit shrinks",
    "1.5",
);

/// Reads an admission gate's map: its `mode` chooses the section its other keys are read in.
pub fn read_gate(mut entries: Vec<(String, Scalar)>) -> Result<(&'static str, Read), ConfigError> {
    // `mode` first, so that a key of another mode is not mistaken for a typo before it.
    entries.sort_by_key(|(name, _)| name != GATE_MODE.name);
    let mode = match entries.first() {
        Some((name, Scalar::Str(word))) if name == GATE_MODE.name => {
            GATE_MODES.iter().find(|(w, _)| *w == word.trim())
        }
        Some((name, _)) if name == GATE_MODE.name => None,
        _ => {
            let modes: Vec<String> = GATE_MODES.iter().map(|(w, _)| format!("`{w}`")).collect();
            return Err(ConfigError {
                what: GATE_THROTTLING.what,
                at: GATE_MODE.name.to_owned(),
                message: format!(
                    "an admission gate needs `mode`: add `{}`; the modes are {}",
                    GATE_MODE.with_example(),
                    modes.join(", ")
                ),
            });
        }
    };
    // An unknown mode is read in the first section, whose `mode` refuses it with the list.
    let (word, section) = mode.copied().unwrap_or(GATE_MODES[0]);
    read(section, entries).map(|read| (word, read))
}

/// A value as a serde format gives it, before the grammar reads it.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// A non-negative integer.
    Unsigned(u64),
    /// A signed integer.
    Signed(i64),
    /// A floating-point number.
    Float(f64),
    /// A string. A number in a string (`"3"`, as every environment variable is) reads as the
    /// number.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// Anything else, described for the message: "a list", "a table".
    Other(&'static str),
}

impl Scalar {
    /// The grammar's [`Value`] of it.
    pub fn value(&self) -> Value {
        let int = |digits: String| Value::Int {
            digits,
            suffix: String::new(),
        };
        match self {
            Scalar::Unsigned(n) => int(n.to_string()),
            Scalar::Signed(n) if *n < 0 => Value::Negative,
            Scalar::Signed(n) => int(n.to_string()),
            Scalar::Float(f) if *f < 0.0 => Value::Negative,
            Scalar::Float(f) if f.is_finite() => Value::from_text(&f.to_string()),
            // NaN and infinity, as words that no number grammar takes.
            Scalar::Float(f) => Value::Word(f.to_string()),
            Scalar::Str(text) => match Value::from_text(text) {
                number @ (Value::Int { .. }
                | Value::Float { .. }
                | Value::Negative
                | Value::Bool(_)) => number,
                _ => Value::Str(text.clone()),
            },
            Scalar::Bool(b) => Value::Bool(*b),
            Scalar::Other(_) => Value::Other,
        }
    }

    /// The value as a message shows it: `3`, `"1s"`, `a list`.
    pub fn written(&self) -> String {
        match self {
            Scalar::Unsigned(n) => n.to_string(),
            Scalar::Signed(n) => n.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Str(text) => format!("\"{text}\""),
            Scalar::Bool(b) => b.to_string(),
            Scalar::Other(what) => (*what).to_owned(),
        }
    }
}

/// A configuration that the grammar refused: the key, its value, and the rule in the grammar's
/// words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    what: &'static str,
    at: String,
    message: String,
}

impl ConfigError {
    /// `key = value` as written, or the key alone when it is missing.
    pub fn at(&self) -> &str {
        &self.at
    }

    /// What is wrong and what to write instead.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid {} at `{}`: {}",
            self.what, self.at, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

/// The settings of one map, read and checked.
#[derive(Clone, Debug)]
pub struct Read {
    settings: Settings,
    texts: Vec<(&'static Key, String)>,
}

impl Read {
    /// The timings, for a [`POLICY`].
    pub fn timings(&self) -> Timings {
        self.settings.timings()
    }

    /// The setting of `key`, if it was written.
    pub fn setting(&self, key: &Key) -> Option<Setting> {
        self.settings.setting(key)
    }

    /// A [`Kind::Count`]'s value.
    pub fn count(&self, key: &Key) -> Option<u32> {
        match self.setting(key) {
            Some(Setting::Count(n)) => Some(n),
            _ => None,
        }
    }

    /// A [`Kind::Duration`]'s value, in nanoseconds.
    pub fn duration(&self, key: &Key) -> Option<u64> {
        match self.setting(key) {
            Some(Setting::Duration(nanos)) => Some(nanos),
            _ => None,
        }
    }

    /// A [`Kind::Fraction`]'s value.
    pub fn number(&self, key: &Key) -> Option<f64> {
        match self.setting(key) {
            Some(Setting::Number(n)) => Some(n),
            _ => None,
        }
    }

    /// A [`Kind::Bool`]'s value.
    pub fn boolean(&self, key: &Key) -> Option<bool> {
        match self.setting(key) {
            Some(Setting::Bool(b)) => Some(b),
            _ => None,
        }
    }

    /// A [`Kind::Text`]'s value.
    pub fn text(&self, key: &Key) -> Option<&str> {
        self.texts
            .iter()
            .find(|(k, _)| k.is(key))
            .map(|(_, text)| text.as_str())
    }
}

/// Reads the `key = value` pairs of one map of `section`, then the rules across keys; the first
/// problem is the error.
pub fn read(
    section: &'static Section,
    entries: impl IntoIterator<Item = (String, Scalar)>,
) -> Result<Read, ConfigError> {
    let mut settings = Settings::new(Scope::Config(section));
    let mut texts = Vec::new();
    let mut written = Vec::new();
    let error = |at: String, problem: Problem| ConfigError {
        what: section.what,
        at,
        message: problem.message,
    };
    for (name, scalar) in entries {
        let shown = scalar.written();
        let at = format!("{name} = {shown}");
        let key = settings
            .read(&name, Some(&scalar.value()), &shown)
            .map_err(|problem| error(at.clone(), problem))?;
        if let (Kind::Text, Scalar::Str(text)) = (key.kind, &scalar) {
            texts.push((key, text.clone()));
        }
        written.push((key, at));
    }
    let context = Context::default();
    if let Some(violation) = settings.check(&context).into_iter().next() {
        let at = written
            .iter()
            .find(|(key, _)| key.is(violation.key))
            .map_or(violation.key.name.to_owned(), |(_, at)| at.clone());
        return Err(error(at, violation.problem));
    }
    if let Some(key) = section.required.iter().find(|k| settings.get(k).is_none()) {
        return Err(ConfigError {
            what: section.what,
            at: key.name.to_owned(),
            message: format!(
                "a {} needs `{}`: add `{}`",
                section.what,
                key.name,
                key.with_example()
            ),
        });
    }
    Ok(Read { settings, texts })
}

/// Reads one value of `key` alone, such as a per-attempt `timeout = "2s"`.
pub fn read_one(key: &'static Key, scalar: &Scalar) -> Result<Setting, ConfigError> {
    let shown = scalar.written();
    crate::read::read(key, Some(&scalar.value()), &shown).map_err(|problem| ConfigError {
        what: key.name,
        at: format!("{} = {shown}", key.name),
        message: problem.message,
    })
}

/// Why `key`, a key of the attribute or a block, is not in `section`; `valid` lists the keys
/// that are.
pub(crate) fn refusal(key: &Key, section: &Section, valid: &str) -> String {
    let name = key.name;
    match key.kind {
        Kind::Expr { .. } | Kind::Policy | Kind::Path | Kind::Flag => {
            let written = match key.kind {
                Kind::Flag => name.to_owned(),
                _ => key.with_example(),
            };
            let place = if crate::BLOCK_KEYS.contains(key) {
                format!("in `retry_block!({written} => ...)`")
            } else {
                format!(
                    "in `#[retry({written})]`, `retry_block!({written} => ...)` or the `Retrier`"
                )
            };
            format!(
                "`{name}` is written in code, not in a configuration: give it where the call is made, {place}; a {} takes {valid}",
                section.what
            )
        }
        _ => format!(
            "`{name}` is not a setting of a {}, which takes {valid}",
            section.what
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(pairs: &[(&str, Scalar)]) -> Vec<(String, Scalar)> {
        pairs
            .iter()
            .map(|(name, scalar)| ((*name).to_owned(), scalar.clone()))
            .collect()
    }

    #[test]
    fn every_example_of_a_section_reads() {
        let gates = GATE_MODES.iter().map(|(_, section)| *section);
        for section in [&POLICY, &BUDGET, &BREAKER, &HEDGING]
            .into_iter()
            .chain(gates)
        {
            for key in section.keys {
                let example = Value::from_text(key.example);
                assert!(
                    crate::read::read(key, Some(&example), key.example).is_ok(),
                    "the example of `{}` is rejected",
                    key.name
                );
            }
        }
    }

    #[test]
    fn numbers_in_strings_are_numbers() {
        let read = read(
            &POLICY,
            entries(&[
                ("max", Scalar::Str("3".into())),
                ("base", Scalar::Str("250ms".into())),
                ("factor", Scalar::Str("1.5".into())),
            ]),
        )
        .expect("valid");
        let timings = read.timings();
        assert_eq!(timings.max, Some(3));
        assert_eq!(timings.base, Some(250_000_000));
        assert_eq!(timings.factor, Some(1.5));
    }

    #[test]
    fn code_is_refused_with_where_to_write_it() {
        let error =
            read(&POLICY, entries(&[("notify", Scalar::Str("log".into()))])).expect_err("code");
        assert_eq!(
            error.to_string(),
            "invalid retry policy at `notify = \"log\"`: `notify` is written in code, not in a configuration: give it where the call is made, in `#[retry(notify = log_retry)]`, `retry_block!(notify = log_retry => ...)` or the `Retrier`; a retry policy takes `max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`"
        );
    }

    #[test]
    fn a_window_above_what_the_breaker_keeps_is_refused() {
        let error =
            read(&BREAKER, entries(&[("window", Scalar::Unsigned(500))])).expect_err("too large");
        assert_eq!(
            error.message(),
            "`window = 500` is too large; expected a whole number from 1 to 128"
        );
    }

    #[test]
    fn a_hedge_needs_its_delay() {
        let error =
            read(&HEDGING, entries(&[("min_samples", Scalar::Unsigned(5))])).expect_err("no delay");
        assert_eq!(error.at(), "hedge");
        assert_eq!(
            error.message(),
            "a hedge needs `hedge`: add `hedge = \"50ms\"`"
        );
    }
}

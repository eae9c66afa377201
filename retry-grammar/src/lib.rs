//! The argument grammar of `#[retry(...)]`, written once.
//!
//! Not for direct use: `retry-macro` reads the attribute with it and `retry-runtime` reads
//! policy strings (`Policy::from_str`) with it, so that both accept the same values, apply the
//! same defaults and rules, and say the same thing when something is wrong. Depend on
//! `retry-runtime` instead.
//!
//! - [`KEYS`] is the table of arguments: name, aliases, example, [`Kind`] of value, one-line
//!   documentation, default, and how the value reaches the runtime ([`Pass`]).
//! - [`Value`] is a value as written, in a form that both the macro (from `syn` tokens) and the
//!   policy string (from text, [`Value::from_text`]) produce.
//! - [`Settings`] reads `key = value` pairs with the grammars of [`read`], and checks the
//!   [`RULES`] across keys. Every [`Problem`] says whether it is about a key or its value, so the
//!   macro can point at the token and `Policy::from_str` at the part of the text.
//! - [`config`] reads the same keys from a configuration (TOML, YAML, JSON, the environment),
//!   through the runtime's `serde` feature.
//! - [`docs`] renders the documentation tables from the same data.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod docs;
pub mod duration;
mod keys;
pub mod read;
mod rules;
#[cfg(feature = "serde")]
mod serde_glue;
mod settings;
mod value;

pub use keys::{
    ATTEMPTS, AWS2026, BACKOFF, BASE, BLOCK_KEYS, CRATE, DEADLINE, FACTOR, FALLBACK, GATE, HEDGE,
    JITTER, KEY, KEYS, Key, Kind, MAX, MAX_DELAY, MAX_HEDGES, NAME, NON_IDEMPOTENT, ON, POLICY,
    Pass, SLEEP, THROTTLE_BASE, TIMEOUT, Word, key,
};
pub use read::{BACKOFF_FORMS, BackoffForm, JITTER_FORMS, JitterForm, Setting};
pub use rules::{RULES, Rule};
pub use settings::{At, Context, Entry, Problem, Scope, Settings, Timings, Violation};
pub use value::Value;

/// `retries` before the first call gives up, when neither `max` nor `attempts` is written.
pub const DEFAULT_MAX: u32 = 3;
/// The pause before the first retry, in nanoseconds (`base = "1s"`).
pub const DEFAULT_BASE: u64 = 1_000_000_000;
/// The growth of the pause per retry (`factor = 2`).
pub const DEFAULT_FACTOR: f64 = 2.0;
/// The backoff form.
pub const DEFAULT_BACKOFF: Backoff = Backoff::Exponential;
/// The cap on every pause when `max_delay` is not written and `base` is shorter, in
/// nanoseconds (`"30s"`).
pub const DEFAULT_MAX_DELAY: u64 = 30_000_000_000;
/// The jitter form, which bare `jitter` also names: `d + U[0, d/2)`.
pub const DEFAULT_JITTER: Jitter = Jitter::Proportional(0.5);

/// How the nominal pause grows; the runtime's `Backoff` without its documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// `base·factor^(n−1)`.
    Exponential,
    /// `base·n`.
    Linear,
    /// `base`.
    Constant,
}

/// How each pause is randomised; the runtime's `Jitter` with durations in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Jitter {
    /// Exactly the nominal pause.
    None,
    /// `d + U[0, f·d)`, `f` in (0, 1].
    Proportional(f64),
    /// `d + U[0, j)`, `j` in nanoseconds.
    Absolute(u64),
    /// `U[0, d]`.
    Full,
    /// `d/2 + U[0, d/2]`.
    Equal,
    /// `min(max_delay, U[base, 3·previous])`.
    Decorrelated,
}

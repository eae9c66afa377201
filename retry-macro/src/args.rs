//! Parses `#[retry(...)]` into [`Args`]: each key's value checked on its own, spans kept.

use crate::duration;
use crate::errors::Errors;
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, ExprUnary, Ident, Lit, Token, UnOp};

/// The keys `#[retry]` accepts, in the order the docs list them.
pub(crate) const KEYS: &[&str] = &[
    "max",
    "attempts",
    "base",
    "factor",
    "backoff",
    "max_delay",
    "deadline",
    "jitter",
    "on",
    "on_result",
    "timeout",
    "notify",
    "on_give_up",
    "policy",
    "sleep",
    "budget",
    "breaker",
    "nested",
];

/// The keys that set timings, which `policy = ...` replaces.
pub(crate) const TIMING_KEYS: &[&str] = &[
    "max",
    "attempts",
    "base",
    "factor",
    "backoff",
    "max_delay",
    "deadline",
    "jitter",
];

/// Names people bring from other retry libraries, and the key that does that job here.
const ALIASES: &[(&str, &str)] = &[
    ("retries", "max"),
    ("max_retries", "max"),
    ("times", "max"),
    ("tries", "attempts"),
    ("max_attempts", "attempts"),
    ("delay", "base"),
    ("initial", "base"),
    ("initial_delay", "base"),
    ("min_delay", "base"),
    ("multiplier", "factor"),
    ("exp", "factor"),
    ("cap", "max_delay"),
    ("max_backoff", "max_delay"),
    ("max_interval", "max_delay"),
    ("max_elapsed", "deadline"),
    ("max_elapsed_time", "deadline"),
    ("total", "deadline"),
    ("per_attempt_timeout", "timeout"),
    ("attempt_timeout", "timeout"),
    ("on_retry", "notify"),
    ("before_sleep", "notify"),
    ("callback", "notify"),
    ("retry_if_result", "on_result"),
    ("on_ok", "on_result"),
    ("on_failure", "on_give_up"),
    ("circuit_breaker", "breaker"),
    ("throttle", "budget"),
    ("when", "on"),
    ("retry_if", "on"),
    ("predicate", "on"),
    ("if", "on"),
];

/// One `key` or `key = value` as written.
struct RawArg {
    key: Ident,
    value: Option<Expr>,
}

impl Parse for RawArg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let key = Ident::parse_any(input)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            Some(input.parse()?)
        } else if input.is_empty() || input.peek(Token![,]) {
            None
        } else {
            // `max: 3`, `max 3`, `max(3)`: say what belongs after the key.
            return Err(input.error(format!(
                "expected `=` after `{key}`, like `{key} = {}`",
                example(&key)
            )));
        };
        Ok(RawArg { key, value })
    }
}

/// A value and the tokens it was written as, for errors that point at it.
pub(crate) struct Setting<T> {
    pub value: T,
    pub tokens: TokenStream,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum BackoffForm {
    Exponential,
    Linear,
    Constant,
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum JitterForm {
    None,
    Proportional(f64),
    Absolute(u64),
    Full,
    Equal,
    Decorrelated,
}

/// `#[retry(...)]` as typed values. Durations are in nanoseconds.
///
/// A key whose value was rejected is `None` here but listed in `written`, so that the rules
/// across arguments neither trust a default in its place nor miss a repeat.
#[derive(Default)]
pub(crate) struct Args {
    written: Vec<Ident>,
    pub max: Option<Setting<u32>>,
    pub attempts: Option<Setting<u32>>,
    pub base: Option<Setting<u64>>,
    pub factor: Option<Setting<f64>>,
    pub backoff: Option<Setting<BackoffForm>>,
    pub max_delay: Option<Setting<u64>>,
    pub deadline: Option<Setting<u64>>,
    pub jitter: Option<Setting<JitterForm>>,
    pub on: Option<Setting<Expr>>,
    pub on_result: Option<Setting<Expr>>,
    pub timeout: Option<Setting<u64>>,
    pub notify: Option<Setting<Expr>>,
    pub on_give_up: Option<Setting<Expr>>,
    pub policy: Option<Setting<Expr>>,
    pub sleep: Option<Setting<Expr>>,
    pub budget: Option<Setting<Expr>>,
    pub breaker: Option<Setting<Expr>>,
    pub nested: Option<Setting<Nested>>,
}

/// `nested = retry | single`: what an annotated function does inside another that retries.
#[derive(Clone, Copy, PartialEq, Debug)]
pub(crate) enum Nested {
    /// One attempt; the layer above retries (the default).
    Single,
    /// Its own retries as well.
    Retry,
}

impl Args {
    /// Each timing key that was written, as written.
    pub(crate) fn timing_keys(&self) -> impl Iterator<Item = &Ident> {
        TIMING_KEYS.iter().filter_map(|key| self.written(key))
    }
}

/// Parses the attribute's arguments, pushing every mistake to `errors`. The settings that are
/// valid are kept, so the rules across arguments can still be checked in the same compile.
pub(crate) fn parse(tokens: TokenStream, errors: &mut Errors) -> Args {
    let mut args = Args::default();
    let raw = syn::parse::Parser::parse2(Punctuated::<RawArg, Token![,]>::parse_terminated, tokens);
    match raw {
        Ok(raw) => raw.into_iter().for_each(|arg| args.take(arg, errors)),
        Err(e) => errors.push(syn::Error::new(
            e.span(),
            format!("{e}; `#[retry]` takes `key = value` pairs separated by commas, like `#[retry(max = 3, base = \"1s\")]`"),
        )),
    }
    args
}

impl Args {
    /// The key as written, if it was written at all (valid or not).
    pub(crate) fn written(&self, key: &str) -> Option<&Ident> {
        self.written.iter().find(|k| k.unraw() == key)
    }

    fn take(&mut self, arg: RawArg, errors: &mut Errors) {
        let name = arg.key.unraw().to_string();
        if KEYS.contains(&name.as_str()) {
            if self.written(&name).is_some() {
                errors.push(repeated(&arg.key));
                return;
            }
            self.written.push(arg.key.clone());
        }
        match name.as_str() {
            "max" => set(&mut self.max, arg, errors, |key, v| integer(key, v, 0)),
            "attempts" => set(&mut self.attempts, arg, errors, |key, v| integer(key, v, 1)),
            "base" => set(&mut self.base, arg, errors, duration_value),
            "factor" => set(&mut self.factor, arg, errors, factor),
            "backoff" => set(&mut self.backoff, arg, errors, backoff),
            "max_delay" => set(&mut self.max_delay, arg, errors, duration_value),
            "deadline" => set(&mut self.deadline, arg, errors, duration_value),
            "jitter" => set_jitter(&mut self.jitter, arg, errors),
            "on" => set(&mut self.on, arg, errors, |_, v| Ok(v.clone())),
            "on_result" => set(&mut self.on_result, arg, errors, |_, v| Ok(v.clone())),
            "timeout" => set(&mut self.timeout, arg, errors, positive_duration),
            "notify" => set(&mut self.notify, arg, errors, |_, v| Ok(v.clone())),
            "on_give_up" => set(&mut self.on_give_up, arg, errors, |_, v| Ok(v.clone())),
            "policy" => set(&mut self.policy, arg, errors, policy),
            "sleep" => set(&mut self.sleep, arg, errors, |_, v| Ok(v.clone())),
            "budget" => set(&mut self.budget, arg, errors, |_, v| Ok(v.clone())),
            "breaker" => set(&mut self.breaker, arg, errors, |_, v| Ok(v.clone())),
            "nested" => set(&mut self.nested, arg, errors, nested),
            _ => errors.spanned(&arg.key, unknown_key(&name)),
        }
    }
}

/// Stores a `key = value` setting, or reports a missing or rejected value.
fn set<T>(
    slot: &mut Option<Setting<T>>,
    arg: RawArg,
    errors: &mut Errors,
    read: impl FnOnce(&Ident, &Expr) -> syn::Result<T>,
) {
    let Some(value) = &arg.value else {
        errors.spanned(
            &arg.key,
            format!(
                "`{0}` needs a value: `{0} = {1}`",
                arg.key,
                example(&arg.key)
            ),
        );
        return;
    };
    match read(&arg.key, value) {
        Ok(read) => {
            *slot = Some(Setting {
                value: read,
                tokens: value.to_token_stream(),
            })
        }
        Err(e) => errors.push(e),
    }
}

/// Like [`set`], but a bare `jitter` is valid: the default form.
fn set_jitter(slot: &mut Option<Setting<JitterForm>>, arg: RawArg, errors: &mut Errors) {
    let (form, tokens) = match &arg.value {
        None => (Ok(JitterForm::Proportional(0.5)), arg.key.to_token_stream()),
        Some(value) => (jitter(&arg.key, value), value.to_token_stream()),
    };
    match form {
        Ok(value) => *slot = Some(Setting { value, tokens }),
        Err(e) => errors.push(e),
    }
}

fn repeated(key: &Ident) -> syn::Error {
    syn::Error::new_spanned(key, format!("`{key}` is given twice; keep one"))
}

fn example(key: &Ident) -> &'static str {
    match key.to_string().as_str() {
        "max" => "3",
        "attempts" => "4",
        "base" => "\"1s\"",
        "factor" => "2",
        "backoff" => "exponential",
        "max_delay" => "\"30s\"",
        "deadline" => "\"10s\"",
        "on" => "is_transient",
        "on_result" => "is_unavailable",
        "timeout" => "\"2s\"",
        "notify" => "log_retry",
        "on_give_up" => "log_failure",
        "policy" => "COVERAGE_POLICY",
        "sleep" => "my_runtime::sleep",
        "budget" => "COVERAGE_BUDGET",
        "breaker" => "CONTRACT_BREAKER",
        "nested" => "retry",
        _ => "...",
    }
}

fn unknown_key(name: &str) -> String {
    let valid = KEYS
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let suggestion = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map(|(_, key)| *key)
        .or_else(|| {
            KEYS.iter()
                .copied()
                .find(|key| edit_distance(key, name) <= 2)
        });
    match suggestion {
        Some(key) => {
            format!("unknown argument `{name}`; did you mean `{key}`? valid arguments: {valid}")
        }
        None => format!("unknown argument `{name}`; valid arguments: {valid}"),
    }
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

fn lit(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        Expr::Group(group) => lit(&group.expr),
        _ => None,
    }
}

fn is_negative(value: &Expr) -> bool {
    matches!(
        value,
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            ..
        })
    )
}

fn integer(key: &Ident, value: &Expr, min: u32) -> syn::Result<u32> {
    let what = if key == "max" {
        "counts retries after the first call"
    } else {
        "counts calls, the first one included"
    };
    let range = format!("expected a whole number from {min} to {}", u32::MAX);
    match lit(value) {
        Some(Lit::Int(int)) if int.suffix().is_empty() => {
            let n: u32 = int.base10_parse().map_err(|_| {
                syn::Error::new_spanned(value, format!("`{key} = {int}` is too large; {range}"))
            })?;
            if n < min {
                let fix =
                    "`attempts = 1` makes a single call; to retry, write `attempts = 2` or more";
                return Err(syn::Error::new_spanned(
                    value,
                    format!("`{key}` {what}, so it must be at least {min}: {fix}"),
                ));
            }
            Ok(n)
        }
        Some(Lit::Str(text)) if text.value().trim().parse::<u32>().is_ok() => {
            Err(syn::Error::new_spanned(
                value,
                format!(
                    "`{key}` is a number, not a string; write it without quotes: `{key} = {}`",
                    text.value().trim()
                ),
            ))
        }
        _ if is_negative(value) => Err(syn::Error::new_spanned(
            value,
            format!("`{key}` {what} and cannot be negative; {range}"),
        )),
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`{key}` {what}; {range}, like `{key} = {}`", example(key)),
        )),
    }
}

fn duration_value(key: &Ident, value: &Expr) -> syn::Result<u64> {
    let unquoted = |digits: &str, suffix: &str| {
        let message = if suffix.is_empty() {
            format!(
                "`{key}` needs a unit: write `{key} = \"{digits}s\"` or `{key} = \"{digits}ms\"`"
            )
        } else {
            format!("durations are written as strings: `{key} = \"{digits}{suffix}\"`")
        };
        Err(syn::Error::new_spanned(value, message))
    };
    match lit(value) {
        Some(Lit::Str(text)) => duration_string(key, value, &text.value()),
        Some(Lit::Int(int)) => unquoted(int.base10_digits(), int.suffix()),
        Some(Lit::Float(float)) => unquoted(float.base10_digits(), float.suffix()),
        _ => Err(syn::Error::new_spanned(
            value,
            format!("`{key}` takes a duration string; {}", duration::ACCEPTED),
        )),
    }
}

fn positive_duration(key: &Ident, value: &Expr) -> syn::Result<u64> {
    match duration_value(key, value)? {
        0 => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{key} = {}` would cut off every attempt before it starts; give a duration longer than zero, like `{key} = \"2s\"`",
                value.to_token_stream()
            ),
        )),
        nanos => Ok(nanos),
    }
}

/// `policy = expr`, but not the string syntax of `Policy::from_str`, which is for run time.
fn policy(key: &Ident, value: &Expr) -> syn::Result<Expr> {
    match lit(value) {
        Some(Lit::Str(text)) => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{key}` takes a `Policy` expression, not a string; write the keys in the attribute instead, `#[retry({})]`, or parse the string at start-up (`\"...\".parse::<Policy>()`) and name the result: `{key} = MY_POLICY`",
                as_attribute_args(&text.value())
            ),
        )),
        _ => Ok(value.clone()),
    }
}

/// `max=3, base=1s` as the attribute spells it: `max = 3, base = "1s"`.
fn as_attribute_args(text: &str) -> String {
    let is_duration = |v: &str| {
        v.starts_with(|c: char| c.is_ascii_digit()) && v.ends_with(|c: char| c.is_alphabetic())
    };
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once('=') {
            Some((key, value)) if is_duration(value.trim()) => {
                format!("{} = \"{}\"", key.trim(), value.trim())
            }
            Some((key, value)) => format!("{} = {}", key.trim(), value.trim()),
            None => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn nested(key: &Ident, value: &Expr) -> syn::Result<Nested> {
    match ident_value(value).as_deref() {
        Some("retry") => Ok(Nested::Retry),
        Some("single") => Ok(Nested::Single),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "unknown `{key}`; expected `retry` (retry here even inside another retrying function) or `single` (one attempt there; the default)"
            ),
        )),
    }
}

/// Parses a duration string, or says what is wrong and, where the intent is clear, what to write.
fn duration_string(key: &Ident, value: &Expr, text: &str) -> syn::Result<u64> {
    duration::parse(text).map_err(|message| {
        let trimmed = text.trim();
        let message = if trimmed.starts_with('-') {
            format!("`{trimmed}` is negative; {}", duration::ACCEPTED)
        } else if let Some(fixed) = duration_suggestion(text) {
            format!("{message}; write `{key} = \"{fixed}\"`")
        } else if trimmed.parse::<f64>().is_ok() {
            format!("{message}; write `{key} = \"{trimmed}s\"` or `{key} = \"{trimmed}ms\"`")
        } else {
            message
        };
        syn::Error::new_spanned(value, format!("invalid `{key}`: {message}"))
    })
}

/// The duration string someone who wrote `"1 sec"` or `"2 minutes"` meant.
fn duration_suggestion(text: &str) -> Option<String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let split = compact
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(compact.len());
    let (number, unit) = compact.split_at(split);
    let unit = match unit.to_lowercase().as_str() {
        "ns" | "nsec" | "nanos" | "nanosecond" | "nanoseconds" => "ns",
        "us" | "µs" | "μs" | "usec" | "micros" | "microsecond" | "microseconds" => "us",
        "ms" | "msec" | "msecs" | "millis" | "millisecond" | "milliseconds" => "ms",
        "s" | "sec" | "secs" | "second" | "seconds" => "s",
        "m" | "min" | "mins" | "minute" | "minutes" => "m",
        "h" | "hr" | "hrs" | "hour" | "hours" => "h",
        _ => return None,
    };
    let fixed = format!("{number}{unit}");
    duration::parse(&fixed).is_ok().then_some(fixed)
}

fn factor(key: &Ident, value: &Expr) -> syn::Result<f64> {
    let number = match lit(value) {
        Some(Lit::Float(f)) if f.suffix().is_empty() || f.suffix() == "f64" => {
            f.base10_parse::<f64>().ok()
        }
        Some(Lit::Int(i)) if i.suffix().is_empty() => i.base10_parse::<f64>().ok(),
        _ => None,
    };
    match number {
        Some(n) if n.is_finite() && n >= 1.0 => Ok(n),
        Some(n) if n.is_finite() => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{key} = {}` would shrink each pause; expected a number ≥ 1 (`{key} = 1` keeps the pause constant, `{key} = 2` doubles it)",
                value.to_token_stream()
            ),
        )),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "`{key}` is the growth of the pause per retry; expected a number ≥ 1 like `{key} = 2` or `{key} = 1.5`"
            ),
        )),
    }
}

fn ident_value(value: &Expr) -> Option<String> {
    match value {
        Expr::Path(path) if path.qself.is_none() => {
            path.path.get_ident().map(|i| i.unraw().to_string())
        }
        Expr::Group(group) => ident_value(&group.expr),
        _ => None,
    }
}

fn backoff(key: &Ident, value: &Expr) -> syn::Result<BackoffForm> {
    match ident_value(value).as_deref() {
        Some("exponential") => Ok(BackoffForm::Exponential),
        Some("linear") => Ok(BackoffForm::Linear),
        Some("constant") => Ok(BackoffForm::Constant),
        _ => Err(syn::Error::new_spanned(
            value,
            format!(
                "unknown `{key}`; expected `exponential` (base·factor^(n−1)), `linear` (base·n) or `constant` (base)"
            ),
        )),
    }
}

const JITTER_FORMS: &str = "expected bare `jitter`, a fraction in (0, 1] like `jitter = 0.5`, a duration string like `jitter = \"500ms\"`, or one of `full`, `equal`, `decorrelated`, `none`";

fn jitter(key: &Ident, value: &Expr) -> syn::Result<JitterForm> {
    let error = |message: String| Err(syn::Error::new_spanned(value, message));
    let fraction = |f: f64| {
        if f > 0.0 && f <= 1.0 {
            Ok(JitterForm::Proportional(f))
        } else if f == 0.0 {
            error(format!(
                "`jitter = {}` adds no randomness; write `jitter = none` for that, or a fraction in (0, 1] like `jitter = 0.5`",
                value.to_token_stream()
            ))
        } else {
            error(format!(
                "a jitter fraction must be in (0, 1]: `jitter = {f}` would add up to {f}·d to each pause d; write a fraction like `jitter = 0.5`, a duration string like `jitter = \"500ms\"`, or `jitter = none` for no jitter"
            ))
        }
    };
    match lit(value) {
        Some(Lit::Float(f)) => match f.base10_parse::<f64>() {
            Ok(f) => fraction(f),
            Err(_) => error(format!("unknown `jitter`; {JITTER_FORMS}")),
        },
        Some(Lit::Int(i)) if i.suffix().is_empty() => match i.base10_parse::<f64>() {
            Ok(f) => fraction(f),
            Err(_) => error(format!("unknown `jitter`; {JITTER_FORMS}")),
        },
        Some(Lit::Int(i)) => error(format!(
            "durations are written as strings: `jitter = \"{}{}\"`",
            i.base10_digits(),
            i.suffix()
        )),
        Some(Lit::Str(text)) => duration_string(key, value, &text.value()).map(JitterForm::Absolute),
        Some(Lit::Bool(b)) if b.value => error(
            "`jitter = true` is not a form of `jitter`; write bare `jitter` (the default) to add up to half of each pause at random".to_owned(),
        ),
        Some(Lit::Bool(_)) => error(
            "`jitter = false` is not a form of `jitter`; write `jitter = none` for pauses without randomness".to_owned(),
        ),
        _ if is_negative(value) => error(
            "a jitter fraction cannot be negative; write a fraction in (0, 1] like `jitter = 0.5`, or `jitter = none` for no jitter".to_owned(),
        ),
        _ => match ident_value(value).as_deref() {
            Some("none") => Ok(JitterForm::None),
            Some("full") => Ok(JitterForm::Full),
            Some("equal") => Ok(JitterForm::Equal),
            Some("decorrelated") => Ok(JitterForm::Decorrelated),
            _ => error(format!("unknown `jitter`; {JITTER_FORMS}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn distance() {
        assert_eq!(edit_distance("jiter", "jitter"), 1);
        assert_eq!(edit_distance("base", "base"), 0);
        assert_eq!(edit_distance("maxdelay", "max_delay"), 1);
    }
}

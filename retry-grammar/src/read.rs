//! The grammar of each [`Kind`] of value: counts, durations, the factor, the backoff and jitter
//! forms, words, policy expressions and paths.

use crate::duration;
use crate::keys::{Key, Kind, Word};
use crate::settings::Problem;
use crate::{Backoff, Jitter, Value};

/// A value that its grammar accepted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Setting {
    /// A [`Kind::Count`].
    Count(u32),
    /// A [`Kind::Duration`], in nanoseconds.
    Duration(u64),
    /// A [`Kind::Factor`].
    Factor(f64),
    /// A [`Kind::Backoff`].
    Backoff(Backoff),
    /// A [`Kind::Jitter`].
    Jitter(Jitter),
    /// A [`Kind::Words`] value.
    Word(&'static Word),
    /// A [`Kind::Fraction`].
    Number(f64),
    /// A [`Kind::Bool`].
    Bool(bool),
    /// A percentile of a [`Kind::Hedge`], above 0 and below 100 (a duration there is a
    /// [`Setting::Duration`]).
    Percentile(f64),
    /// A [`Kind::Expr`], [`Kind::Policy`], [`Kind::Path`] or [`Kind::Text`]: the caller keeps
    /// the expression (the text) as written.
    Expr,
    /// A [`Kind::Policy`] string: the name of a policy resolved at run time, valid by
    /// [`policy_name`]; the caller keeps the literal as written.
    Name,
    /// A [`Kind::Flag`]: the key was written.
    Flag,
}

/// A backoff form: its word and its pause.
#[derive(Clone, Copy, Debug)]
pub struct BackoffForm {
    /// The word: `exponential`.
    pub word: &'static str,
    /// The form.
    pub form: Backoff,
    /// The runtime's variant: `Exponential`.
    pub variant: &'static str,
    /// Pause `n`: `base·factor^(n−1)`.
    pub pause: &'static str,
}

/// The backoff forms, in the order the documentation lists them.
pub const BACKOFF_FORMS: &[BackoffForm] = &[
    BackoffForm {
        word: "exponential",
        form: Backoff::Exponential,
        variant: "Exponential",
        pause: "base·factor^(n−1)",
    },
    BackoffForm {
        word: "linear",
        form: Backoff::Linear,
        variant: "Linear",
        pause: "base·n",
    },
    BackoffForm {
        word: "constant",
        form: Backoff::Constant,
        variant: "Constant",
        pause: "base",
    },
];

/// A jitter form: how `#[retry]` spells it, what the runtime calls it, and the pause it gives.
#[derive(Clone, Copy, Debug)]
pub struct JitterForm {
    /// How the attribute spells it, as the documentation says it.
    pub spelling: &'static str,
    /// The same in a few words, for the "value" column of the argument table.
    pub short: &'static str,
    /// The word that names it, for a form without a parameter.
    pub word: Option<&'static str>,
    /// The form, for a form named by its word.
    pub form: Option<Jitter>,
    /// The runtime's variant, with its parameter: `Proportional(f)`.
    pub variant: &'static str,
    /// The pause, from the nominal pause `d`.
    pub pause: &'static str,
}

/// The jitter forms, in the order the documentation lists them.
pub const JITTER_FORMS: &[JitterForm] = &[
    JitterForm {
        spelling: "bare `jitter` (the default: `f` = 0.5), or a number `f` in (0, 1] like `jitter = 0.2`",
        short: "bare `jitter`, a number in (0, 1]",
        word: None,
        form: None,
        variant: "Proportional(f)",
        pause: "`d + U[0, f·d)`: with the default, 1 s becomes about 1.2 or 1.4 s",
    },
    JitterForm {
        spelling: "a duration string `j` like `jitter = \"500ms\"`",
        short: "a duration string",
        word: None,
        form: None,
        variant: "Absolute(j)",
        pause: "`d + U[0, j)` (an absolute addition, as in \"0–500 ms\")",
    },
    JitterForm {
        spelling: "`jitter = full`",
        short: "`full`",
        word: Some("full"),
        form: Some(Jitter::Full),
        variant: "Full",
        pause: "`U[0, d]`",
    },
    JitterForm {
        spelling: "`jitter = equal`",
        short: "`equal`",
        word: Some("equal"),
        form: Some(Jitter::Equal),
        variant: "Equal",
        pause: "`d/2 + U[0, d/2]`",
    },
    JitterForm {
        spelling: "`jitter = decorrelated`",
        short: "`decorrelated`",
        word: Some("decorrelated"),
        form: Some(Jitter::Decorrelated),
        variant: "Decorrelated",
        pause: "`min(max_delay, U[base, 3·previous])`, starting from `previous = base` (ignores the backoff form)",
    },
    JitterForm {
        spelling: "`jitter = none`",
        short: "`none`",
        word: Some("none"),
        form: Some(Jitter::None),
        variant: "None",
        pause: "exactly `d`, for deterministic behaviour",
    },
];

/// Reads `key = value` (`value` is `None` for the key alone) with the grammar of the key's kind.
/// `written` is the value as written, for messages: `"500ms"`, `0.5`.
pub fn read(key: &'static Key, value: Option<&Value>, written: &str) -> Result<Setting, Problem> {
    let Some(value) = value else {
        return match key.kind {
            Kind::Jitter => Ok(Setting::Jitter(crate::DEFAULT_JITTER)),
            Kind::Flag => Ok(Setting::Flag),
            _ => Err(Problem::key(format!(
                "`{}` needs a value: `{}`",
                key.name,
                key.with_example()
            ))),
        };
    };
    let read = Read {
        key,
        value,
        written,
    };
    match key.kind {
        Kind::Count {
            min,
            max,
            counts,
            below_min,
        } => read.count(min, max, counts, below_min).map(Setting::Count),
        Kind::Duration { zero } => read.duration(zero).map(Setting::Duration),
        Kind::Factor => read.factor().map(Setting::Factor),
        Kind::Backoff => read.backoff().map(Setting::Backoff),
        Kind::Jitter => read.jitter().map(Setting::Jitter),
        Kind::Words(words) => read.word(words).map(Setting::Word),
        Kind::Expr { .. } => Ok(Setting::Expr),
        Kind::Policy => read.policy(),
        Kind::Path => read.path().map(|()| Setting::Expr),
        Kind::Flag => Err(Problem::value(format!(
            "`{0}` takes no value; write `{0}` alone",
            key.name
        ))),
        Kind::Hedge => read.hedge(),
        Kind::Fraction {
            min,
            above_min,
            max,
            is,
        } => read.fraction(min, above_min, max, is).map(Setting::Number),
        Kind::Text => read.text().map(|()| Setting::Expr),
        Kind::Bool => read.boolean().map(Setting::Bool),
    }
}

/// The "value" column of the documentation for a key of this kind.
pub fn describe(kind: &Kind) -> String {
    match kind {
        Kind::Count { min, max, .. } if *max < u32::MAX => format!("integer from {min} to {max}"),
        Kind::Count { min, .. } => format!("integer ≥ {min}"),
        Kind::Duration { zero: None } => "duration string".to_owned(),
        Kind::Duration { zero: Some(_) } => "duration string > 0".to_owned(),
        Kind::Factor => "number ≥ 1".to_owned(),
        Kind::Backoff => list(BACKOFF_FORMS.iter().map(|f| format!("`{}`", f.word)), ", "),
        Kind::Jitter => list(JITTER_FORMS.iter().map(|f| f.short.to_owned()), ", "),
        Kind::Words(words) => list(words.iter().map(|w| format!("`{}`", w.word)), " or "),
        Kind::Expr { value } => (*value).to_owned(),
        Kind::Policy => {
            "a name, `\"contract-service\"` (ASCII letters, digits, `-`, `_`, `.`); or an expression giving a `Policy` or `&Policy`".to_owned()
        }
        Kind::Path => "a path".to_owned(),
        Kind::Flag => "the key alone".to_owned(),
        Kind::Hedge => {
            "duration string > 0, or a percentile of the observed latency: `\"p95\"`, `\"p99.9\"`"
                .to_owned()
        }
        Kind::Fraction {
            min,
            above_min,
            max,
            ..
        } => range(*min, *above_min, *max).replace("expected a ", ""),
        Kind::Text => "a string".to_owned(),
        Kind::Bool => "`true` or `false`".to_owned(),
    }
}

/// The range of a [`Kind::Fraction`], as a message says it.
fn range(min: f64, above_min: bool, max: f64) -> String {
    match (above_min, max.is_finite()) {
        (true, false) => format!("expected a number above {min}"),
        (true, true) => format!("expected a number above {min} and at most {max}"),
        (false, false) => format!("expected a number ≥ {min}"),
        (false, true) => format!("expected a number from {min} to {max}"),
    }
}

/// `a, b, c` or, with `last` = `" or "`, `a, b or c`.
fn list(items: impl Iterator<Item = String>, last: &str) -> String {
    let items: Vec<String> = items.collect();
    match items.split_last() {
        Some((tail, [])) => tail.clone(),
        Some((tail, init)) => format!("{}{last}{tail}", init.join(", ")),
        None => String::new(),
    }
}

struct Read<'a> {
    key: &'static Key,
    value: &'a Value,
    written: &'a str,
}

impl Read<'_> {
    fn problem<T>(&self, message: impl Into<String>) -> Result<T, Problem> {
        Err(Problem::value(message))
    }

    fn count(&self, min: u32, max: u32, counts: &str, below_min: &str) -> Result<u32, Problem> {
        let key = self.key.name;
        let range = format!("expected a whole number from {min} to {max}");
        match self.value {
            Value::Int { digits, suffix } if suffix.is_empty() => {
                let n = match digits.parse::<u32>() {
                    Ok(n) if n <= max => n,
                    _ => return self.problem(format!("`{key} = {digits}` is too large; {range}")),
                };
                if n < min {
                    return self.problem(format!(
                        "`{key}` {counts}, so it must be at least {min}: {below_min}"
                    ));
                }
                Ok(n)
            }
            Value::Str(text) if text.trim().parse::<u32>().is_ok() => self.problem(format!(
                "`{key}` is a number, not a string; write it without quotes: `{key} = {}`",
                text.trim()
            )),
            Value::Negative => {
                self.problem(format!("`{key}` {counts} and cannot be negative; {range}"))
            }
            _ => self.problem(format!(
                "`{key}` {counts}; {range}, like `{}`",
                self.key.with_example()
            )),
        }
    }

    /// A number in its range: `ratio = 0.1`.
    fn fraction(&self, min: f64, above_min: bool, max: f64, is: &str) -> Result<f64, Problem> {
        let key = self.key.name;
        let range = range(min, above_min, max);
        let number = match self.value {
            Value::Float { digits, suffix } | Value::Int { digits, suffix }
                if suffix.is_empty() =>
            {
                digits.parse::<f64>().ok()
            }
            _ => None,
        };
        match number {
            Some(n) if n.is_finite() && n <= max && (n > min || (n == min && !above_min)) => Ok(n),
            Some(n) if n.is_finite() && n <= max => {
                self.problem(format!("`{key} = {}` is too small; {range}", self.written))
            }
            Some(_) => self.problem(format!("`{key} = {}` is too large; {range}", self.written)),
            None if *self.value == Value::Negative => {
                self.problem(format!("`{key}` cannot be negative; {range}"))
            }
            None => self.problem(format!(
                "`{key}` {is}; {range}, like `{}`",
                self.key.with_example()
            )),
        }
    }

    /// `fail_fast = true`.
    fn boolean(&self) -> Result<bool, Problem> {
        match self.value {
            Value::Bool(b) => Ok(*b),
            _ => self.problem(format!(
                "`{}` is `true` or `false`, like `{}`",
                self.key.name,
                self.key.with_example()
            )),
        }
    }

    /// A name: `name = "contract"`.
    fn text(&self) -> Result<(), Problem> {
        match self.value {
            Value::Str(text) | Value::Word(text) | Value::Path(text) if !text.trim().is_empty() => {
                Ok(())
            }
            _ => self.problem(format!(
                "`{}` takes a name, like `{}`",
                self.key.name,
                self.key.with_example()
            )),
        }
    }

    /// `hedge = "50ms"` or `hedge = "p95"`.
    fn hedge(&self) -> Result<Setting, Problem> {
        let key = self.key.name;
        if let Value::Str(text) = self.value {
            if let Some(number) = text.trim().strip_prefix('p') {
                return match number.parse::<f64>() {
                    Ok(p) if p > 0.0 && p < 100.0 => Ok(Setting::Percentile(p)),
                    _ => self.problem(format!(
                        "`{key} = \"{text}\"` is not a percentile: write `p` and a number above 0 and below 100, like `{key} = \"p95\"` (hedge after the 95th percentile of the observed latency), or a duration like `{key} = \"50ms\"`"
                    )),
                };
            }
        }
        self.duration(Some(
            "would start every hedge with the attempt itself, doubling every call",
        ))
        .map(Setting::Duration)
    }

    fn duration(&self, zero: Option<&str>) -> Result<u64, Problem> {
        let key = self.key.name;
        let unquoted = |digits: &str, suffix: &str| {
            if suffix.is_empty() {
                self.problem(format!(
                    "`{key}` needs a unit: write `{key} = \"{digits}s\"` or `{key} = \"{digits}ms\"`"
                ))
            } else {
                self.problem(format!(
                    "durations are written as strings: `{key} = \"{digits}{suffix}\"`"
                ))
            }
        };
        let nanos = match self.value {
            Value::Str(text) => self.duration_string(text)?,
            Value::Int { digits, suffix } | Value::Float { digits, suffix } => {
                return unquoted(digits, suffix);
            }
            _ => {
                return self.problem(format!(
                    "`{key}` takes a duration string; {}",
                    duration::ACCEPTED
                ));
            }
        };
        match zero {
            Some(why) if nanos == 0 => self.problem(format!(
                "`{key} = {}` {why}; give a duration longer than zero, like `{}`",
                self.written,
                self.key.with_example()
            )),
            _ => Ok(nanos),
        }
    }

    /// Parses a duration string, or says what is wrong and, where the intent is clear, what to
    /// write.
    fn duration_string(&self, text: &str) -> Result<u64, Problem> {
        let key = self.key.name;
        duration::parse(text).or_else(|message| {
            let trimmed = text.trim();
            let message = if trimmed.starts_with('-') {
                format!("`{trimmed}` is negative; {}", duration::ACCEPTED)
            } else if let Some(fixed) = duration::suggestion(text) {
                format!("{message}; write `{key} = \"{fixed}\"`")
            } else if is_plain_number(trimmed) {
                format!("{message}; write `{key} = \"{trimmed}s\"` or `{key} = \"{trimmed}ms\"`")
            } else {
                message
            };
            self.problem(format!("invalid `{key}`: {message}"))
        })
    }

    fn factor(&self) -> Result<f64, Problem> {
        let key = self.key.name;
        let number = match self.value {
            Value::Float { digits, suffix } if suffix.is_empty() || suffix == "f64" => {
                digits.parse::<f64>().ok()
            }
            Value::Int { digits, suffix } if suffix.is_empty() => digits.parse::<f64>().ok(),
            _ => None,
        };
        match number {
            Some(n) if n.is_finite() && n >= 1.0 => Ok(n),
            Some(n) if n.is_finite() => self.problem(format!(
                "`{key} = {}` would shrink each pause; expected a number ≥ 1 (`{key} = 1` keeps the pause constant, `{key} = 2` doubles it)",
                self.written
            )),
            _ => self.problem(format!(
                "`{key}` is the growth of the pause per retry; expected a number ≥ 1 like `{key} = 2` or `{key} = 1.5`"
            )),
        }
    }

    fn backoff(&self) -> Result<Backoff, Problem> {
        let found = self
            .word_text()
            .and_then(|word| BACKOFF_FORMS.iter().find(|f| f.word == word));
        match found {
            Some(form) => Ok(form.form),
            None => self.problem(format!(
                "unknown `{}`; expected {}",
                self.key.name,
                list(
                    BACKOFF_FORMS
                        .iter()
                        .map(|f| format!("`{}` ({})", f.word, f.pause)),
                    " or "
                )
            )),
        }
    }

    fn jitter(&self) -> Result<Jitter, Problem> {
        let key = self.key.name;
        let words = list(
            JITTER_FORMS
                .iter()
                .filter_map(|f| f.word)
                .map(|w| format!("`{w}`")),
            ", ",
        );
        let forms = format!(
            "expected bare `{key}`, a fraction in (0, 1] like `{key} = 0.5`, a duration string like `{key} = \"500ms\"`, or one of {words}"
        );
        let fraction = |f: f64| {
            if f > 0.0 && f <= 1.0 {
                Ok(Jitter::Proportional(f))
            } else if f == 0.0 {
                self.problem(format!(
                    "`{key} = {}` adds no randomness; write `{key} = none` for that, or a fraction in (0, 1] like `{key} = 0.5`",
                    self.written
                ))
            } else {
                self.problem(format!(
                    "a {key} fraction must be in (0, 1]: `{key} = {f}` would add up to {f}·d to each pause d; write a fraction like `{key} = 0.5`, a duration string like `{key} = \"500ms\"`, or `{key} = none` for no {key}"
                ))
            }
        };
        let unknown = || self.problem(format!("unknown `{key}`; {forms}"));
        match self.value {
            Value::Float { digits, suffix } if suffix.is_empty() || suffix == "f64" => {
                match digits.parse::<f64>() {
                    Ok(f) => fraction(f),
                    Err(_) => unknown(),
                }
            }
            Value::Int { digits, suffix } if suffix.is_empty() => match digits.parse::<f64>() {
                Ok(f) => fraction(f),
                Err(_) => unknown(),
            },
            Value::Int { digits, suffix } => self.problem(format!(
                "durations are written as strings: `{key} = \"{digits}{suffix}\"`"
            )),
            Value::Str(text) => match jitter_word(text.trim()) {
                Some(form) => Ok(form),
                None => self.duration_string(text).map(Jitter::Absolute),
            },
            Value::Bool(true) => self.problem(format!(
                "`{key} = true` is not a form of `{key}`; write bare `{key}` (the default) to add up to half of each pause at random"
            )),
            Value::Bool(false) => self.problem(format!(
                "`{key} = false` is not a form of `{key}`; write `{key} = none` for pauses without randomness"
            )),
            Value::Negative => self.problem(format!(
                "a {key} fraction cannot be negative; write a fraction in (0, 1] like `{key} = 0.5`, or `{key} = none` for no {key}"
            )),
            Value::Word(word) => jitter_word(word).map_or_else(unknown, Ok),
            _ => unknown(),
        }
    }

    /// A word, or a string holding one: `nested = retry` or `nested = "retry"`.
    fn word(&self, words: &'static [Word]) -> Result<&'static Word, Problem> {
        let found = self
            .word_text()
            .and_then(|text| words.iter().find(|w| w.word == text));
        match found {
            Some(word) => Ok(word),
            None => self.problem(format!(
                "unknown `{}`; expected {}",
                self.key.name,
                list(
                    words.iter().map(|w| format!("`{}` ({})", w.word, w.doc)),
                    " or "
                )
            )),
        }
    }

    fn word_text(&self) -> Option<&str> {
        match self.value {
            Value::Word(word) => Some(word),
            Value::Str(text) => Some(text.trim()),
            _ => None,
        }
    }

    /// `policy = "name"`, or `policy = expr`; a string that holds the syntax of
    /// `Policy::from_str` is neither.
    fn policy(&self) -> Result<Setting, Problem> {
        let key = self.key.name;
        let Value::Str(text) = self.value else {
            return Ok(Setting::Expr);
        };
        if text.contains('=') {
            return self.problem(format!(
                "`{key} = \"...\"` names a policy of the registry, and `{}` is policy syntax, not a name; write the keys in the attribute instead, `#[retry({})]`, or parse the string at start-up (`\"...\".parse::<Policy>()`) and name the result: `{key} = MY_POLICY`",
                text.trim(),
                as_attribute_args(text)
            ));
        }
        policy_name(text).map(|()| Setting::Name).or_else(|why| {
            self.problem(format!(
                "`{key} = {}` is not a policy's name: {why}; write the name the registry lists the policy under, like `{key} = \"contract-service\"`",
                self.written
            ))
        })
    }

    fn path(&self) -> Result<(), Problem> {
        let key = self.key.name;
        match self.value {
            Value::Word(_) | Value::Path(_) => Ok(()),
            Value::Str(text) if Value::from_text(text) != Value::Str(text.clone()) => {
                self.problem(format!(
                    "`{key}` takes a path, not a string; write it without quotes: `{key} = {}`",
                    text.trim()
                ))
            }
            _ => self.problem(format!(
                "`{key}` takes the path at which `retry_runtime` can be reached, like `{}` or, for a renamed dependency, `{key} = rt`",
                self.key.with_example()
            )),
        }
    }
}

/// Whether `name` may name a policy: not empty, and only ASCII letters, digits, `-`, `_` and
/// `.`, so that it can be a key of a configuration file (`[retry.contract-service]`), part of an
/// environment variable's name and a metric label as it is. `Err` says what is wrong: "it is
/// empty", "it contains `:`, and a name holds only ...".
pub fn policy_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".to_owned());
    }
    let mut wrong: Vec<char> = Vec::new();
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    for c in name.chars() {
        if !allowed(c) && !wrong.contains(&c) {
            wrong.push(c);
        }
    }
    if wrong.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = wrong
        .iter()
        .map(|c| match c {
            ' ' => "a space".to_owned(),
            c if c.is_whitespace() || c.is_control() => format!("`{}`", c.escape_default()),
            c => format!("`{c}`"),
        })
        .collect();
    Err(format!(
        "it contains {}, and a name holds only ASCII letters, digits, `-`, `_` and `.`",
        list(shown.into_iter(), " and ")
    ))
}

/// The jitter form a word names: `full`.
fn jitter_word(word: &str) -> Option<Jitter> {
    JITTER_FORMS
        .iter()
        .find(|f| f.word == Some(word))
        .and_then(|f| f.form)
}

/// `12` or `1.5`, which a unit would make a duration.
fn is_plain_number(text: &str) -> bool {
    !text.is_empty()
        && text.parse::<f64>().is_ok()
        && text.bytes().all(|b| b.is_ascii_digit() || b == b'.')
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{self, KEYS};

    fn text(key: &'static Key, text: &str) -> Result<Setting, Problem> {
        read(key, Some(&Value::from_text(text)), text)
    }

    #[test]
    fn each_kind_reads_its_values() {
        assert_eq!(text(&keys::MAX, "3"), Ok(Setting::Count(3)));
        assert_eq!(text(&keys::ATTEMPTS, "1"), Ok(Setting::Count(1)));
        assert_eq!(
            text(&keys::BASE, "1.5s"),
            Ok(Setting::Duration(1_500_000_000))
        );
        assert_eq!(text(&keys::FACTOR, "1.5"), Ok(Setting::Factor(1.5)));
        assert_eq!(
            text(&keys::BACKOFF, "linear"),
            Ok(Setting::Backoff(Backoff::Linear))
        );
        assert_eq!(
            text(&keys::JITTER, "0.25"),
            Ok(Setting::Jitter(Jitter::Proportional(0.25)))
        );
        assert_eq!(
            text(&keys::JITTER, "500ms"),
            Ok(Setting::Jitter(Jitter::Absolute(500_000_000)))
        );
        assert_eq!(
            text(&keys::JITTER, "decorrelated"),
            Ok(Setting::Jitter(Jitter::Decorrelated))
        );
        let nested = keys::key("nested").expect("in the table");
        assert!(matches!(text(nested, "retry"), Ok(Setting::Word(w)) if w.word == "retry"));
        assert!(matches!(text(nested, "\"single\""), Ok(Setting::Word(w)) if w.word == "single"));
        assert_eq!(text(&keys::CRATE, "a::b"), Ok(Setting::Expr));
    }

    #[test]
    fn each_kind_says_what_is_wrong() {
        let message = |key, value| text(key, value).expect_err(value).message;
        assert_eq!(
            message(&keys::ATTEMPTS, "0"),
            "`attempts` counts calls, the first one included, so it must be at least 1: `attempts = 1` makes a single call; to retry, write `attempts = 2` or more"
        );
        assert_eq!(
            message(&keys::MAX, "-1"),
            "`max` counts retries after the first call and cannot be negative; expected a whole number from 0 to 4294967295"
        );
        assert_eq!(
            message(&keys::DEADLINE, "10"),
            "`deadline` needs a unit: write `deadline = \"10s\"` or `deadline = \"10ms\"`"
        );
        assert_eq!(
            message(&keys::TIMEOUT, "0s"),
            "`timeout = 0s` would cut off every attempt before it starts; give a duration longer than zero, like `timeout = \"2s\"`"
        );
        assert_eq!(
            message(&keys::BACKOFF, "quadratic"),
            "unknown `backoff`; expected `exponential` (base·factor^(n−1)), `linear` (base·n) or `constant` (base)"
        );
        assert_eq!(
            message(keys::key("nested").expect("in the table"), "sometimes"),
            "unknown `nested`; expected `retry` (retry here even inside another retrying function) or `single` (one attempt there; the default)"
        );
        assert_eq!(
            message(&keys::CRATE, "3"),
            "`crate` takes the path at which `retry_runtime` can be reached, like `crate = my_reexport::retry_runtime` or, for a renamed dependency, `crate = rt`"
        );
        assert!(message(&keys::BASE, "1 sec").ends_with("; write `base = \"1s\"`"));
    }

    #[test]
    fn a_policy_is_a_name_or_an_expression() {
        let policy = |written: &str, value: Value| read(&keys::POLICY, Some(&value), written);
        let name = |text: &str| policy(&format!("{text:?}"), Value::Str(text.to_owned()));
        assert_eq!(name("contract-service"), Ok(Setting::Name));
        assert_eq!(name("payments.v2_eu"), Ok(Setting::Name));
        assert_eq!(
            policy("COVERAGE", Value::Word("COVERAGE".to_owned())),
            Ok(Setting::Expr)
        );
        let message = |text: &str| name(text).expect_err(text).message;
        assert_eq!(
            message(""),
            "`policy = \"\"` is not a policy's name: it is empty; write the name the registry lists the policy under, like `policy = \"contract-service\"`"
        );
        assert_eq!(
            message("contract service/eu "),
            "`policy = \"contract service/eu \"` is not a policy's name: it contains a space and `/`, and a name holds only ASCII letters, digits, `-`, `_` and `.`; write the name the registry lists the policy under, like `policy = \"contract-service\"`"
        );
        assert!(message("Straße").contains("contains `ß`"));
        assert!(message("a\tb").contains("contains `\\t`"));
        assert_eq!(
            message("max=3, base=1s"),
            "`policy = \"...\"` names a policy of the registry, and `max=3, base=1s` is policy syntax, not a name; write the keys in the attribute instead, `#[retry(max = 3, base = \"1s\")]`, or parse the string at start-up (`\"...\".parse::<Policy>()`) and name the result: `policy = MY_POLICY`"
        );
    }

    #[test]
    fn only_jitter_stands_alone() {
        for key in KEYS {
            let alone = read(key, None, "");
            assert_eq!(alone.is_ok(), key.is(&keys::JITTER), "`{}`", key.name);
        }
    }

    #[test]
    fn the_value_column() {
        assert_eq!(describe(&keys::MAX.kind), "integer ≥ 0");
        assert_eq!(
            describe(&keys::BACKOFF.kind),
            "`exponential`, `linear`, `constant`"
        );
        assert_eq!(
            describe(&keys::JITTER.kind),
            "bare `jitter`, a number in (0, 1], a duration string, `full`, `equal`, `decorrelated`, `none`"
        );
    }
}

//! The settings read so far, the checks each `key = value` goes through, and what they add up
//! to.

use crate::keys::{self, KEYS, Key, suggestion};
use crate::read::{self, Setting};
use crate::{Backoff, Jitter, Value};

/// Which part of `key = value` a problem is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// The key.
    Key,
    /// The value (the key, when it has none).
    Value,
}

/// Something wrong with one `key = value`: where, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The part it is about.
    pub at: At,
    /// What is wrong and what to write instead, lowercase, code in backticks.
    pub message: String,
}

impl Problem {
    pub(crate) fn key(message: impl Into<String>) -> Self {
        Problem {
            at: At::Key,
            message: message.into(),
        }
    }

    pub(crate) fn value(message: impl Into<String>) -> Self {
        Problem {
            at: At::Value,
            message: message.into(),
        }
    }
}

/// A rule across keys that the settings break, at the key it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The key whose part the problem is about; it was written.
    pub key: &'static Key,
    /// The problem.
    pub problem: Problem,
}

/// Where the settings are written, which decides the keys that may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `#[retry(...)]`: every key.
    Attribute,
    /// A policy string (`Policy::from_str`): the timing keys.
    PolicyString,
    /// A block (`retry_block!(...)`): every key, and the [`BLOCK_KEYS`](crate::BLOCK_KEYS).
    Block,
    /// A configuration (TOML, YAML, JSON, the environment): the keys of one
    /// [`Section`](crate::config::Section). A key of the attribute that is code (`on`, `notify`,
    /// `fallback`, ...) is refused with where to write it instead.
    Config(&'static crate::config::Section),
}

/// What the rules across keys need to know beyond the keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// Whether the function (or block) is async; `None` outside an attribute or a block.
    pub is_async: Option<bool>,
    /// The settings are a block's, so that a message speaks of the block, not the function.
    pub block: bool,
}

/// One key that was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// The key.
    pub key: &'static Key,
    /// Its value, or `None` if the value was refused (already reported): the rules across keys
    /// then trust neither it nor a default in its place.
    pub setting: Option<Setting>,
    /// The value as written: `"500ms"`.
    pub written: String,
}

/// The `key = value` pairs read so far.
#[derive(Clone, Debug)]
pub struct Settings {
    scope: Scope,
    entries: Vec<Entry>,
}

/// The timings that were written, with `attempts` turned into `max`: what a `Policy` needs
/// beyond its defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timings {
    /// Retries after the first call.
    pub max: Option<u32>,
    /// The pause before the first retry, in nanoseconds.
    pub base: Option<u64>,
    /// The growth of the pause.
    pub factor: Option<f64>,
    /// The backoff form.
    pub backoff: Option<Backoff>,
    /// The cap on every pause, in nanoseconds.
    pub max_delay: Option<u64>,
    /// The base after a throttled attempt, in nanoseconds.
    pub throttle_base: Option<u64>,
    /// The time budget, in nanoseconds.
    pub deadline: Option<u64>,
    /// The jitter form.
    pub jitter: Option<Jitter>,
}

impl Settings {
    /// No settings yet.
    pub fn new(scope: Scope) -> Self {
        Settings {
            scope,
            entries: Vec::new(),
        }
    }

    /// Reads `name = value` (`value` is `None` for the key alone); `written` is the value as
    /// written, for messages. A key whose value is refused is still recorded, so that a repeat
    /// is caught and no rule trusts a default in its place.
    pub fn read(
        &mut self,
        name: &str,
        value: Option<&Value>,
        written: &str,
    ) -> Result<&'static Key, Problem> {
        let Some(key) = self.lookup(name) else {
            return Err(Problem::key(self.unknown(name)));
        };
        if !self.allows(key) {
            if let Scope::Config(section) = self.scope {
                return Err(Problem::key(crate::config::refusal(
                    key,
                    section,
                    &self.valid(),
                )));
            }
            return Err(Problem::key(format!(
                "`{name}` cannot be set in a policy string, which holds the timings only ({}); give `{name}` in the attribute",
                self.valid()
            )));
        }
        if self.get(key).is_some() {
            let why = if key.is(&keys::POLICY) {
                ": a call has one policy, a name (with the timing keys beside it as its default) or an expression"
            } else {
                ""
            };
            return Err(Problem::key(format!(
                "`{name}` is given twice; keep one{why}"
            )));
        }
        let read = read::read(key, value, written);
        self.entries.push(Entry {
            key,
            setting: read.as_ref().ok().copied(),
            written: written.to_owned(),
        });
        read.map(|_| key)
    }

    /// The entry of `key`, if it was written (valid or not).
    pub fn get(&self, key: &Key) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.key.is(key))
    }

    /// The value of `key`, if it was written and accepted.
    pub fn setting(&self, key: &Key) -> Option<Setting> {
        self.get(key).and_then(|entry| entry.setting)
    }

    /// Every key written, in the order written.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Checks the [`RULES`](crate::RULES) across keys.
    pub fn check(&self, context: &Context) -> Vec<Violation> {
        let mut violations = Vec::new();
        for rule in crate::RULES {
            (rule.check)(self, context, &mut violations);
        }
        violations
    }

    /// The timings written, `attempts` as `max`.
    pub fn timings(&self) -> Timings {
        let count = |key| match self.setting(key) {
            Some(Setting::Count(n)) => Some(n),
            _ => None,
        };
        let duration = |key| match self.setting(key) {
            Some(Setting::Duration(nanos)) => Some(nanos),
            _ => None,
        };
        Timings {
            max: count(&keys::MAX).or_else(|| count(&keys::ATTEMPTS).map(|n| n.saturating_sub(1))),
            base: duration(&keys::BASE),
            factor: match self.setting(&keys::FACTOR) {
                Some(Setting::Factor(f)) => Some(f),
                _ => None,
            },
            backoff: match self.setting(&keys::BACKOFF) {
                Some(Setting::Backoff(form)) => Some(form),
                _ => None,
            },
            max_delay: duration(&keys::MAX_DELAY),
            throttle_base: duration(&keys::THROTTLE_BASE),
            deadline: duration(&keys::DEADLINE),
            jitter: match self.setting(&keys::JITTER) {
                Some(Setting::Jitter(form)) => Some(form),
                _ => None,
            },
        }
    }

    fn allows(&self, key: &Key) -> bool {
        match self.scope {
            Scope::Attribute | Scope::Block => true,
            Scope::PolicyString => key.is_timing(),
            Scope::Config(section) => section.keys.contains(key),
        }
    }

    /// The key named `name`: one of the table's, or in a block one of the block's own.
    fn lookup(&self, name: &str) -> Option<&'static Key> {
        let block = || keys::BLOCK_KEYS.iter().find(|k| k.name == name);
        match self.scope {
            Scope::Block => keys::key(name).or_else(block),
            // A section's own key first; then the attribute's and a block's, to say where
            // they are written instead.
            Scope::Config(section) => section
                .keys
                .iter()
                .find(|k| k.name == name)
                .or_else(|| keys::key(name))
                .or_else(block),
            _ => keys::key(name),
        }
    }

    fn in_scope(&self) -> impl Iterator<Item = &'static Key> + Clone + '_ {
        let (table, block): (&'static [Key], &'static [Key]) = match self.scope {
            Scope::Block => (KEYS, keys::BLOCK_KEYS),
            Scope::Config(section) => (section.keys, &[]),
            _ => (KEYS, &[]),
        };
        table.iter().chain(block).filter(|key| self.allows(key))
    }

    /// The keys that may be written here, as a message lists them.
    fn valid(&self) -> String {
        self.in_scope()
            .map(|key| format!("`{}`", key.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn unknown(&self, name: &str) -> String {
        if self.scope == Scope::Attribute {
            // A block's own key, written on a function: say what a function has instead.
            if name == keys::NON_IDEMPOTENT.name {
                return format!(
                    "`{name}` is an argument of `retry_block!`; mark a function with `#[non_idempotent]` instead, beside `#[retry]`"
                );
            }
            if name == keys::KEY.name {
                return format!(
                    "`{name}` is an argument of `retry_block!`; a function's idempotency key is a parameter: `key: &IdempotencyKey`, or the one that identifies the operation marked `#[idempotency_key]`"
                );
            }
            if name == keys::NAME.name {
                return format!(
                    "`{name}` is an argument of `retry_block!`; a function's name in the events and its metrics' `function` label is the function's own"
                );
            }
        }
        let valid = self.valid();
        // A configuration has keys; the attribute and a block have arguments.
        let (one, all) = match self.scope {
            Scope::Config(_) => ("key", "keys"),
            _ => ("argument", "arguments"),
        };
        match suggestion(name, self.in_scope()) {
            Some(key) => format!(
                "unknown {one} `{name}`; did you mean `{}`? valid {all}: {valid}",
                key.name
            ),
            None => format!("unknown {one} `{name}`; valid {all}: {valid}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(scope: Scope, text: &str) -> (Settings, Vec<Problem>) {
        let mut settings = Settings::new(scope);
        let mut problems = Vec::new();
        for part in text.split(',') {
            let (name, value) = match part.split_once('=') {
                Some((name, value)) => (name.trim(), Some(value.trim())),
                None => (part.trim(), None),
            };
            let parsed = value.map(Value::from_text);
            if let Err(problem) = settings.read(name, parsed.as_ref(), value.unwrap_or("")) {
                problems.push(problem);
            }
        }
        (settings, problems)
    }

    #[test]
    fn attempts_becomes_max() {
        let (settings, problems) = settings(Scope::PolicyString, "attempts=4, base=250ms");
        assert!(problems.is_empty());
        let timings = settings.timings();
        assert_eq!(timings.max, Some(3));
        assert_eq!(timings.base, Some(250_000_000));
    }

    #[test]
    fn a_policy_string_holds_the_timings_only() {
        let (_, problems) = settings(Scope::PolicyString, "notify=log, retries=3");
        assert_eq!(
            problems[0],
            Problem::key(
                "`notify` cannot be set in a policy string, which holds the timings only (`max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`); give `notify` in the attribute"
            )
        );
        assert_eq!(
            problems[1].message,
            "unknown argument `retries`; did you mean `max`? valid arguments: `max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`"
        );
    }

    #[test]
    fn a_block_takes_its_own_keys_and_the_attribute_says_where_they_go() {
        let (block, problems) = settings(Scope::Block, "non_idempotent, key = id, max = 2");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(block.setting(&keys::NON_IDEMPOTENT), Some(Setting::Flag));
        let (_, problems) = settings(Scope::Block, "non_idempotent = true, retries = 2");
        assert_eq!(
            problems[0],
            Problem::value("`non_idempotent` takes no value; write `non_idempotent` alone")
        );
        assert!(
            problems[1]
                .message
                .ends_with("`crate`, `non_idempotent`, `key`, `name`")
        );
        let (_, problems) = settings(Scope::Attribute, "name = \"lookup\"");
        assert!(problems[0].message.contains("is the function's own"));
        let (_, problems) = settings(Scope::Attribute, "non_idempotent, key = id");
        assert!(
            problems[0]
                .message
                .contains("mark a function with `#[non_idempotent]`")
        );
        assert!(
            problems[1]
                .message
                .contains("a function's idempotency key is a parameter")
        );
    }

    #[test]
    fn a_refused_value_is_still_written() {
        let (settings, problems) = settings(Scope::Attribute, "max=-1, max=2");
        assert_eq!(problems.len(), 2);
        assert_eq!(problems[1], Problem::key("`max` is given twice; keep one"));
        assert_eq!(settings.get(&keys::MAX).map(|e| e.setting), Some(None));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the text, each key either reads it or says why, and the rules run.
        #[test]
        fn any_value_of_any_key_reads_or_says_why(text in ".*", name in prop::sample::select(KEYS.iter().map(|k| k.name).collect::<Vec<_>>())) {
            let mut settings = Settings::new(Scope::Attribute);
            let _ = settings.read(name, Some(&Value::from_text(&text)), &text);
            let _ = settings.check(&Context { is_async: Some(false), block: false });
            let _ = settings.timings();
        }
    }
}

//! The table of `#[retry]`'s arguments.
//!
//! A key that the code handles by itself (a timing, `on`, `policy`, `crate`, and the three whose
//! presence changes the loop, `timeout`, `sleep` and `fallback`) is a named constant; the others are rows
//! written inline in [`KEYS`], because the macro passes them to the runtime from the table alone.

/// One argument of `#[retry(...)]`.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// The key as written: `max`.
    pub name: &'static str,
    /// Names people bring from other retry libraries, for "did you mean": `retries` → `max`.
    pub aliases: &'static [&'static str],
    /// A typical value, as the attribute spells it, for messages: `3`, `"1s"`, `log_retry`.
    pub example: &'static str,
    /// What the value may be, and so which grammar reads it.
    pub kind: Kind,
    /// What it does, in one line (the "meaning" column of the documentation).
    pub doc: &'static str,
    /// The default, as the documentation states it.
    pub default: &'static str,
    /// `Some(why)` when the key needs an `async fn`; `why` says so to a sync function, with the
    /// fix.
    pub async_only: Option<&'static str>,
    /// How the value reaches the runtime.
    pub pass: Pass,
}

/// Keys are told apart by name.
impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.name == other.name
    }
}

impl Eq for Key {}

impl Key {
    /// Is this the key `other`? Keys are told apart by name.
    pub fn is(&self, other: &Key) -> bool {
        self == other
    }

    /// A timing key, which `policy = ...` replaces.
    pub fn is_timing(&self) -> bool {
        matches!(self.pass, Pass::Policy(_))
    }

    /// `key = example`, as a message shows it.
    pub fn with_example(&self) -> String {
        format!("{} = {}", self.name, self.example)
    }
}

/// What a key's value may be; each kind is read by its grammar in [`read`](crate::read).
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A whole number from `min` to `max`.
    Count {
        /// The least value.
        min: u32,
        /// The greatest value: `u32::MAX` unless the runtime clamps below it.
        max: u32,
        /// What it counts, after the key's name: "counts retries after the first call".
        counts: &'static str,
        /// The fix for a value below `min`.
        below_min: &'static str,
    },
    /// A duration string: `"250ms"`.
    Duration {
        /// `Some(why)` when zero is refused, and why: "would cut off every attempt".
        zero: Option<&'static str>,
    },
    /// A number ≥ 1.
    Factor,
    /// One of [`BACKOFF_FORMS`](crate::BACKOFF_FORMS).
    Backoff,
    /// One of [`JITTER_FORMS`](crate::JITTER_FORMS), or the key alone.
    Jitter,
    /// One of the words.
    Words(&'static [Word]),
    /// Any expression, passed to the runtime as written; `value` is its type as the
    /// documentation states it.
    Expr {
        /// The "value" column of the documentation: "`Fn(&E)`".
        value: &'static str,
    },
    /// The name of a policy resolved at run time (a string of the characters
    /// [`read::policy_name`](crate::read::policy_name) allows), or an expression giving a
    /// `Policy`.
    Policy,
    /// A path.
    Path,
    /// The key alone, without a value: `non_idempotent`.
    Flag,
    /// A duration string (not zero), or a percentile of the observed latency: `"p95"`.
    Hedge,
    /// A number from `min` to `max`, read from a configuration: a budget's `ratio`.
    Fraction {
        /// The least value.
        min: f64,
        /// Whether `min` itself is refused (a number above it is needed).
        above_min: bool,
        /// The greatest value; infinity for none.
        max: f64,
        /// What it is, after the key's name: "is the share of first attempts paid back as
        /// retries".
        is: &'static str,
    },
    /// A name, read from a configuration: a breaker's `name`.
    Text,
    /// `true` or `false`, read from a configuration: a rate limit's `fail_fast`.
    Bool,
}

/// A word a [`Kind::Words`] key accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Word {
    /// The word: `retry`.
    pub word: &'static str,
    /// What it means, for messages.
    pub doc: &'static str,
    /// What the macro passes for it with [`Pass::Value`]: an expression under the runtime's
    /// `__private` module, like `level::Warn`. Empty for a [`Pass::Switch`] key.
    pub value: &'static str,
}

/// How a key's value reaches the runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pass {
    /// A timing: the named builder of `Policy` (`attempts` sets `max`).
    Policy(&'static str),
    /// Read by the macro itself: `on` and `policy` start the loop, `crate` is where the runtime
    /// is.
    Macro,
    /// `.key(value)` on the loop state: an expression as written, a duration as a `Duration`, a
    /// word as its [`Word::value`].
    Value,
    /// `.key(&value)` on the loop state.
    Ref,
    /// `.builder()` on the loop state when the value is the first of the key's words; nothing
    /// for the others (the default).
    Switch(&'static str),
}

/// `gate = INVENTORY_GATE`: an admission gate asked before every attempt, first tries included.
pub const GATE: Key = Key {
    name: "gate",
    aliases: &["admission_gate", "load_shedder", "rate_limiter"],
    example: "INVENTORY_GATE",
    kind: Kind::Expr {
        value: "an `AdmissionGate` (usually a `static`)",
    },
    doc: "asked before every attempt, the first included: while it sheds load (adaptive throttling, a CUBIC rate limit, an AIMD or Gradient2 concurrency limit), the function returns `E::from(Rejected)` at once without calling the body, and a `fallback` hears `GiveUpReason::GateRejected`; every attempt reports its answer to it (a throttling verdict as shed load); needs `E: From<retry_runtime::Rejected>`",
    default: "—",
    async_only: None,
    pass: Pass::Ref,
};

/// `aws2026 = S3_RETRIES`: the AWS SDKs' updated standard retry mode decides after each failure.
pub const AWS2026: Key = Key {
    name: "aws2026",
    aliases: &["aws_standard", "retry_quota"],
    example: "S3_RETRIES",
    kind: Kind::Expr {
        value: "an `Aws2026Standard` (usually a `static`)",
    },
    doc: "the AWS SDKs' updated standard retry mode decides after each failure, in place of `max` and the pauses: at most 3 attempts, a retry quota of 500 tokens shared by every call that names it (14 a retry, 5 after a throttling verdict; a success gives back the last retry's cost), pauses of `random × min(base × 2^(n−1), 20 s)` from 50 ms, or 1 s after a throttling verdict, a server's pause held to [computed, computed + 5 s]",
    default: "—",
    async_only: None,
    pass: Pass::Ref,
};

/// `max = 3`.
pub const MAX: Key = Key {
    name: "max",
    aliases: &["retries", "max_retries", "times"],
    example: "3",
    kind: Kind::Count {
        min: 0,
        max: u32::MAX,
        counts: "counts retries after the first call",
        below_min: "",
    },
    doc: "retries after the first call: `max = 3` means at most 4 calls, pauses ≈ 1 s, 2 s, 4 s with `base = \"1s\"`",
    default: "3",
    async_only: None,
    pass: Pass::Policy("max"),
};

/// `attempts = 4`.
pub const ATTEMPTS: Key = Key {
    name: "attempts",
    aliases: &["tries", "max_attempts"],
    example: "4",
    kind: Kind::Count {
        min: 1,
        max: u32::MAX,
        counts: "counts calls, the first one included",
        below_min: "`attempts = 1` makes a single call; to retry, write `attempts = 2` or more",
    },
    doc: "the same limit counted as total calls (`attempts = 4` ≡ `max = 3`); giving both is an error",
    default: "—",
    async_only: None,
    pass: Pass::Policy("max"),
};

/// `base = "1s"`.
pub const BASE: Key = Key {
    name: "base",
    aliases: &["delay", "initial", "initial_delay", "min_delay"],
    example: "\"1s\"",
    kind: Kind::Duration { zero: None },
    doc: "the pause before the first retry",
    default: "`\"1s\"`",
    async_only: None,
    pass: Pass::Policy("base"),
};

/// `factor = 2`.
pub const FACTOR: Key = Key {
    name: "factor",
    aliases: &["multiplier", "exp"],
    example: "2",
    kind: Kind::Factor,
    doc: "growth of the pause per retry (exponential only)",
    default: "2",
    async_only: None,
    pass: Pass::Policy("factor"),
};

/// `backoff = exponential`.
pub const BACKOFF: Key = Key {
    name: "backoff",
    aliases: &[],
    example: "exponential",
    kind: Kind::Backoff,
    doc: "pause n (n = 1, 2, …): `base·factor^(n−1)`, `base·n`, `base`",
    default: "`exponential`",
    async_only: None,
    pass: Pass::Policy("backoff"),
};

/// `max_delay = "30s"`.
pub const MAX_DELAY: Key = Key {
    name: "max_delay",
    aliases: &["cap", "max_backoff", "max_interval"],
    example: "\"30s\"",
    kind: Kind::Duration { zero: None },
    doc: "no single pause is ever longer, jitter and server-suggested pauses included (cap applied last)",
    default: "`\"30s\"`, or `base` if that is longer",
    async_only: None,
    pass: Pass::Policy("max_delay"),
};

/// `throttle_base = "1s"`.
pub const THROTTLE_BASE: Key = Key {
    name: "throttle_base",
    aliases: &["throttling_base", "throttled_base"],
    example: "\"1s\"",
    kind: Kind::Duration { zero: None },
    doc: "the pause before a retry after a throttled attempt (`Verdict::Throttled`: a 429, a 503 with `Retry-After`, `RESOURCE_EXHAUSTED`), growing from there as `base` does",
    default: "`base`",
    async_only: None,
    pass: Pass::Policy("throttle_base"),
};

/// `deadline = "10s"`.
pub const DEADLINE: Key = Key {
    name: "deadline",
    aliases: &["max_elapsed", "max_elapsed_time", "total"],
    example: "\"10s\"",
    kind: Kind::Duration { zero: None },
    doc: "total time budget from the first call, calls and pauses included, on the clock of the pauses: tokio's for async functions (so a paused test clock governs both), `std::time::Instant` for sync ones and for `sleep = f`, a `Sleeper` type's own; a pause that would end past it is not taken and the loop gives up with the last error at once",
    default: "none",
    async_only: None,
    pass: Pass::Policy("deadline"),
};

/// `jitter`, `jitter = full`, ...
pub const JITTER: Key = Key {
    name: "jitter",
    aliases: &[],
    example: "full",
    kind: Kind::Jitter,
    doc: "randomises each pause; the forms are in the `Jitter` table",
    default: "bare `jitter` (`d + U[0, d/2)`)",
    async_only: None,
    pass: Pass::Policy("jitter"),
};

/// `policy = COVERAGE_POLICY`.
pub const POLICY: Key = Key {
    name: "policy",
    aliases: &[],
    example: "COVERAGE_POLICY",
    kind: Kind::Policy,
    doc: "a name: the policy of that name in the process's registry (`retry_runtime::named`), looked up once per call and kept for all its attempts; the timing keys written beside it are the default when the name is not there; the name's budget replaces a written `budget`, and its breaker a written `breaker` (without one, which shows that `E` can carry a `CircuitOpen`, the name's breaker is not used). An expression: timings chosen at run time (a `const`, or a string from configuration read with `Policy::from_str`), which excludes the timing keys above",
    default: "—",
    async_only: None,
    pass: Pass::Macro,
};

/// `on = is_transient`.
pub const ON: Key = Key {
    name: "on",
    aliases: &["when", "retry_if", "predicate", "if"],
    example: "is_transient",
    kind: Kind::Expr {
        value: "an expression callable as `Fn(&E) -> bool` or `Fn(&E) -> Verdict`",
    },
    doc: "which errors are worth retrying; everything else is returned at once",
    default: "the error type's `Transient` impl",
    async_only: None,
    pass: Pass::Macro,
};

/// `timeout = "2s"`.
pub const TIMEOUT: Key = Key {
    name: "timeout",
    aliases: &["per_attempt_timeout", "attempt_timeout"],
    example: "\"2s\"",
    kind: Kind::Duration {
        zero: Some("would cut off every attempt before it starts"),
    },
    doc: "each attempt is cut off after this long (clipped to the time left before `deadline`) and counts as a transient failure; needs `E: From<retry_runtime::Elapsed>`",
    default: "—",
    async_only: Some(
        "a blocking call cannot be cut off from outside; give the call its own timeout (a socket read timeout, a client timeout), or make the function `async`",
    ),
    pass: Pass::Value,
};

/// `sleep = my_runtime::sleep`.
pub const SLEEP: Key = Key {
    name: "sleep",
    aliases: &[],
    example: "my_runtime::sleep",
    kind: Kind::Expr {
        value: "`Fn(Duration) -> impl Future<Output = ()>` or a `Sleeper` type",
    },
    doc: "pause with another runtime's timer; the deadline is then measured on its clock (`Sleeper::now`; `std::time::Instant` for a function)",
    default: "tokio's",
    async_only: Some("a sync function pauses with `std::thread::sleep`; remove `sleep`"),
    pass: Pass::Value,
};

/// `fallback = save_for_later`: the builder is a pass-through, but an async function awaits
/// what the loop ends with (`finish(result).await`).
pub const FALLBACK: Key = Key {
    name: "fallback",
    aliases: &["or_else", "recover"],
    example: "save_for_later",
    kind: Kind::Expr {
        value: "`FnOnce(E, GiveUp) -> Result<T, E>`; with `on_result`, `FnOnce(Result<T, E>, GiveUp) -> Result<T, E>`; in an `async fn` also async",
    },
    doc: "called once when the loop gives up, with why (a `GiveUp`) and the last error, or with `on_result` the last outcome (an `Ok` it rejected as well); what it returns is the function's result. Not called for an accepted `Ok`, a permanent error, a dropped future, or under a layer that retries",
    default: "—",
    async_only: None,
    pass: Pass::Value,
};

/// `hedge = "50ms"` or `hedge = "p95"`: read by the macro, which runs each attempt with
/// `run_hedged` and a `static` `Hedge` of the function.
pub const HEDGE: Key = Key {
    name: "hedge",
    aliases: &["hedge_after", "hedging_delay", "hedge_delay"],
    example: "\"50ms\"",
    kind: Kind::Hedge,
    doc: "an attempt that has not answered after this long gets a copy running beside it (a hedge), and the first acceptable answer wins (an `Ok`, or an error not worth retrying) while the others are dropped; `\"p95\"` waits for the 95th percentile of this function's observed latency; each hedge withdraws a token from `budget` and asks `breaker`; only for a body that may run twice at once (no `&mut` parameter; a `#[non_idempotent]` function sends its key on every copy)",
    default: "—",
    async_only: Some(
        "hedging runs the body several times at once, which a blocking function cannot do on one thread; make the function `async`, or remove `hedge`",
    ),
    pass: Pass::Macro,
};

/// `max_hedges = 2`: with `hedge`, read by the macro.
pub const MAX_HEDGES: Key = Key {
    name: "max_hedges",
    aliases: &["hedges", "max_hedged_attempts"],
    example: "2",
    kind: Kind::Count {
        min: 1,
        max: u32::MAX,
        counts: "counts the copies started beside each attempt",
        below_min: "to not hedge, remove `hedge` and `max_hedges`",
    },
    doc: "with `hedge`, the most copies started beside each attempt, one per delay",
    default: "1",
    async_only: Some(
        "hedging runs the body several times at once, which a blocking function cannot do on one thread; make the function `async`, or remove `max_hedges`",
    ),
    pass: Pass::Macro,
};

/// `crate = my_reexport::retry_runtime`.
pub const CRATE: Key = Key {
    name: "crate",
    aliases: &[],
    example: "my_reexport::retry_runtime",
    kind: Kind::Path,
    doc: "where the runtime is, for a renamed dependency (`rt = { package = \"retry-runtime\", ... }`, then `crate = rt`) or one re-exported by another crate; every generated path goes through it",
    default: "`::retry_runtime`",
    async_only: None,
    pass: Pass::Macro,
};

/// Every key, in the order the documentation lists them. The rows written inline here are
/// pass-through options: the macro hands their value to the runtime builder of the same name
/// ([`Pass`]) and needs no other code for them.
pub static KEYS: &[Key] = &[
    MAX,
    ATTEMPTS,
    BASE,
    FACTOR,
    BACKOFF,
    MAX_DELAY,
    THROTTLE_BASE,
    DEADLINE,
    JITTER,
    POLICY,
    ON,
    Key {
        name: "on_result",
        aliases: &["retry_if_result", "on_ok"],
        example: "is_unavailable",
        kind: Kind::Expr {
            value: "`Fn(&T) -> bool` or `Fn(&T) -> Verdict`",
        },
        doc: "an `Ok` value it marks (`true`, or a `Verdict` that retries) is a transient failure, an HTTP 503 that arrives as `Ok(response)`; `RetryAfter` is honoured as for errors; when the loop gives up the last `Ok` is returned, or handed to `fallback`",
        default: "—",
        async_only: None,
        pass: Pass::Value,
    },
    TIMEOUT,
    Key {
        name: "notify",
        aliases: &["on_retry", "before_sleep", "callback"],
        example: "log_retry",
        kind: Kind::Expr {
            value: "`Fn(&E, &RetryEvent)` or `Fn(Result<&T, &E>, &RetryEvent)`; in an async function also async",
        },
        doc: "called before each pause with the error (or, in the second form, the outcome, which also carries an `Ok` that `on_result` rejected), the attempt number, the real pause (jitter included) and the time since the first call; an async hook is awaited before the pause, its time taken out of the pause and bounded by the deadline",
        default: "—",
        async_only: None,
        pass: Pass::Value,
    },
    Key {
        name: "on_give_up",
        aliases: &["on_failure"],
        example: "log_failure",
        kind: Kind::Expr {
            value: "`Fn(&E)`, `Fn(&E, &GiveUp)` or `Fn(Result<&T, &E>, &GiveUp)`; in an async function also async",
        },
        doc: "called once when the loop gives up on a failure it could have retried (retries used up, deadline, a server-suggested pause too long, the budget empty, the breaker open), with the last error (or outcome) and, in the two-argument forms, why, the attempts and the time spent; an async hook is awaited before the fallback and the return",
        default: "—",
        async_only: None,
        pass: Pass::Value,
    },
    SLEEP,
    Key {
        name: "budget",
        aliases: &["throttle"],
        example: "COVERAGE_BUDGET",
        kind: Kind::Expr {
            value: "a `RetryBudget` (usually a `static`)",
        },
        doc: "retries draw from a shared token bucket; when it is empty the loop gives up with the current error at once",
        default: "—",
        async_only: None,
        pass: Pass::Ref,
    },
    Key {
        name: "breaker",
        aliases: &["circuit_breaker"],
        example: "CONTRACT_BREAKER",
        kind: Kind::Expr {
            value: "a `CircuitBreaker` (usually a `static`)",
        },
        doc: "while open, the function returns `E::from(CircuitOpen)` at once without calling the body; a failure after which it is open ends the loop at once with that failure, without a pause; needs `E: From<retry_runtime::CircuitOpen>`",
        default: "—",
        async_only: None,
        pass: Pass::Ref,
    },
    GATE,
    AWS2026,
    Key {
        name: "nested",
        aliases: &[],
        example: "retry",
        kind: Kind::Words(&[
            Word {
                word: "retry",
                doc: "retry here even inside another retrying function",
                value: "",
            },
            Word {
                word: "single",
                doc: "one attempt there; the default",
                value: "",
            },
        ]),
        doc: "inside another annotated function that retries: retry here too, or make one attempt",
        default: "`single`",
        async_only: None,
        pass: Pass::Switch("nested_retry"),
    },
    // After `sleep`: the builder asks the sleeper whether the function can await the fallback.
    FALLBACK,
    Key {
        name: "log_level",
        aliases: &["level"],
        example: "\"warn\"",
        kind: Kind::Words(&[
            Word {
                word: "error",
                doc: "`ERROR`, the default",
                value: "level::Error",
            },
            Word {
                word: "warn",
                doc: "`WARN`",
                value: "level::Warn",
            },
            Word {
                word: "info",
                doc: "`INFO`",
                value: "level::Info",
            },
            Word {
                word: "debug",
                doc: "`DEBUG`",
                value: "level::Debug",
            },
            Word {
                word: "trace",
                doc: "`TRACE`",
                value: "level::Trace",
            },
        ]),
        doc: "with the `tracing` feature, the level of the one event logged when a call fails after retrying or the loop gives up",
        default: "`\"error\"`",
        async_only: None,
        pass: Pass::Value,
    },
    HEDGE,
    MAX_HEDGES,
    CRATE,
];

/// The key named `name` (a raw identifier's name without `r#`).
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|key| key.name == name)
}

/// `non_idempotent`, in a block: the attribute's `#[non_idempotent]`.
pub const NON_IDEMPOTENT: Key = Key {
    name: "non_idempotent",
    aliases: &["not_idempotent"],
    example: "non_idempotent",
    kind: Kind::Flag,
    doc: "the block has a side effect that a repeat would do twice (a payment, an email): it compiles only with `key`, which every attempt sends",
    default: "—",
    async_only: None,
    pass: Pass::Macro,
};

/// `key = claim.id`, in a block: the attribute's key parameter.
pub const KEY: Key = Key {
    name: "key",
    aliases: &["idempotency_key"],
    example: "claim.id",
    kind: Kind::Expr {
        value: "a value whose type implements `Display` and owns its data (`IdempotencyKey`, `u64`, `Uuid`, `String`, `str`)",
    },
    doc: "the idempotency key every attempt sends, which `attempt().key()` gives inside the block; evaluated once, before the first attempt",
    default: "—",
    async_only: None,
    pass: Pass::Macro,
};

/// `name = "coverage"`, in a block: the name a function has of its own.
pub const NAME: Key = Key {
    name: "name",
    aliases: &["label"],
    example: "\"coverage\"",
    kind: Kind::Expr {
        value: "a string literal",
    },
    doc: "the name in the events and the metrics' `function` label; without it, the block's module and line (`\"claims::handler:42\"`), which an edit above the block changes",
    default: "module and line",
    async_only: None,
    pass: Pass::Macro,
};

/// The keys that only a block takes, beside [`KEYS`]: a function has its `#[non_idempotent]`
/// mark, its key parameter and its name instead.
pub static BLOCK_KEYS: &[Key] = &[NON_IDEMPOTENT, KEY, NAME];

/// The key someone who wrote `name` most likely meant: the one whose alias it is, else one
/// within two edits of it, among `candidates`.
pub(crate) fn suggestion<'k>(
    name: &str,
    candidates: impl Iterator<Item = &'k Key> + Clone,
) -> Option<&'k Key> {
    candidates
        .clone()
        .find(|key| key.aliases.contains(&name))
        .or_else(|| {
            candidates
                .into_iter()
                .find(|key| edit_distance(key.name, name) <= 2)
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Setting, read};

    #[test]
    fn distance() {
        assert_eq!(edit_distance("jiter", "jitter"), 1);
        assert_eq!(edit_distance("base", "base"), 0);
        assert_eq!(edit_distance("maxdelay", "max_delay"), 1);
    }

    #[test]
    fn names_and_aliases_are_unique() {
        let mut seen = Vec::new();
        for key in KEYS.iter().chain(BLOCK_KEYS) {
            for name in std::iter::once(&key.name).chain(key.aliases) {
                assert!(!seen.contains(name), "`{name}` appears twice in the table");
                seen.push(name);
            }
        }
    }

    #[test]
    fn every_example_is_a_valid_value() {
        for key in KEYS {
            let value = crate::Value::from_text(key.example);
            assert!(
                read::read(key, Some(&value), key.example).is_ok(),
                "the example of `{}` is rejected",
                key.name
            );
        }
    }

    #[test]
    fn the_documented_defaults_are_the_defaults() {
        let read = |key: &'static Key, text: &str| {
            read::read(key, Some(&crate::Value::from_text(text)), text).expect(key.name)
        };
        assert_eq!(MAX.default, crate::DEFAULT_MAX.to_string());
        assert_eq!(
            read(&BASE, BASE.default.trim_matches('`')),
            Setting::Duration(crate::DEFAULT_BASE)
        );
        assert_eq!(
            read(&FACTOR, FACTOR.default),
            Setting::Factor(crate::DEFAULT_FACTOR)
        );
        assert_eq!(
            read(&BACKOFF, BACKOFF.default.trim_matches('`')),
            Setting::Backoff(crate::DEFAULT_BACKOFF)
        );
        let max_delay = MAX_DELAY.default.split('`').nth(1).expect("quoted");
        assert_eq!(
            read(&MAX_DELAY, max_delay),
            Setting::Duration(crate::DEFAULT_MAX_DELAY)
        );
        assert_eq!(
            read::read(&JITTER, None, "").expect("bare jitter"),
            Setting::Jitter(crate::DEFAULT_JITTER)
        );
    }

    #[test]
    fn every_switch_key_has_words() {
        for key in KEYS {
            if let Pass::Switch(_) = key.pass {
                assert!(
                    matches!(key.kind, Kind::Words(words) if words.len() >= 2),
                    "`{}` switches on its first word, and needs another for the default",
                    key.name
                );
            }
            if let (Pass::Value, Kind::Words(words)) = (key.pass, key.kind) {
                assert!(
                    words.iter().all(|w| !w.value.is_empty()),
                    "each word of `{}` needs the value the macro passes for it",
                    key.name
                );
            }
        }
    }
}

//! Each key of the attribute's grammar (`retry_grammar::KEYS` and `BLOCK_KEYS`) and what
//! [`HttpRetry`] has for it: a method, or why it has none (the reason the guide gives too). A key
//! added to the grammar fails `every_key_has_a_method_or_a_reason` until it has a row here and in
//! the guide.

use crate::HttpRetry;
use retry_grammar::{BLOCK_KEYS, KEYS};
use retry_runtime::{
    AdmissionGate, Aimd, Aws2026Standard, Backoff, CircuitBreaker, GiveUp, Jitter, Policy,
    RetryBudget, Verdict, level,
};
use std::sync::Arc;
use std::time::Duration;

/// What [`HttpRetry`] has for a key.
enum Has {
    /// A method: its name, and a probe that calls it (the probe is written by `method!` from
    /// the name, so it does not compile if the method is missing).
    Method(&'static str, fn() -> HttpRetry),
    /// No method, and why.
    Reason(&'static str),
}

/// A row for a method: `method!(key => name(args))` calls `HttpRetry::new(..).name(args)`.
macro_rules! method {
    ($key:literal => $name:ident($($arg:expr),*)) => {
        ($key, Has::Method(stringify!($name), || HttpRetry::new(Policy::new()).$name($($arg),*)))
    };
}

const MS: Duration = Duration::from_millis(1);

/// The table; the reasons are the guide's ("The attribute's options").
fn table() -> Vec<(&'static str, Has)> {
    vec![
        method!("max" => max(5)),
        method!("attempts" => attempts(4)),
        method!("base" => base(MS)),
        method!("factor" => factor(3.0)),
        method!("backoff" => backoff(Backoff::Linear)),
        method!("max_delay" => max_delay(MS)),
        method!("throttle_base" => throttle_base(MS)),
        method!("deadline" => deadline(MS)),
        method!("jitter" => jitter(Jitter::None)),
        ("policy", Has::Reason("the constructor's argument")),
        ("on", Has::Reason("errors are judged by the layer")),
        method!("timeout" => timeout(MS)),
        (
            "sleep",
            Has::Reason("tower's and reqwest's futures run on tokio"),
        ),
        (
            "fallback",
            Has::Reason("a layer returns what the service below answered"),
        ),
        ("hedge", Has::Reason("not offered by the HTTP doors")),
        ("max_hedges", Has::Reason("not offered by the HTTP doors")),
        ("crate", Has::Reason("where the macro finds the runtime")),
        method!("on_result" => on_response(|_, _| Verdict::Fail)),
        method!("notify" => notify(|_| {})),
        method!("on_give_up" => on_give_up(|_: &GiveUp| {})),
        method!("budget" => budget(Arc::new(RetryBudget::new()))),
        method!("breaker" => breaker(Arc::new(CircuitBreaker::new()))),
        method!("gate" => gate(Arc::new(AdmissionGate::aimd(Aimd::new())))),
        method!("aws2026" => aws2026(Arc::new(Aws2026Standard::new()))),
        method!("nested" => nested_retry()),
        method!("log_level" => log_level(level::Warn)),
        method!("name" => name("probe")),
        (
            "non_idempotent",
            Has::Reason("a request's idempotency key is its header"),
        ),
        (
            "key",
            Has::Reason("a request's idempotency key is its header"),
        ),
    ]
}

/// The guide, which gives the reasons to the reader.
const GUIDE: &str = include_str!("../docs/guide.md");

#[test]
fn every_key_has_a_method_or_a_reason() {
    let table = table();
    for key in KEYS.iter().chain(BLOCK_KEYS) {
        let Some((_, has)) = table.iter().find(|(name, _)| *name == key.name) else {
            panic!(
                "the attribute's key `{}` has neither an `HttpRetry` method nor a reason in \
                 retry-http/src/parity.rs: add the method, or the reason here and in \
                 docs/guide.md (\"The attribute's options\")",
                key.name
            );
        };
        match has {
            Has::Method(method, probe) => {
                let _ = probe();
                assert!(
                    GUIDE.contains(&format!("`{method}`")),
                    "docs/guide.md does not name the method `{method}`"
                );
            }
            Has::Reason(why) => {
                assert!(!why.is_empty());
                assert!(
                    GUIDE.contains(&format!("| `{}`", key.name))
                        || GUIDE.contains(&format!(", `{}` |", key.name)),
                    "docs/guide.md's table does not say why `{}` has no method",
                    key.name
                );
            }
        }
    }
}

#[test]
fn every_row_is_a_key_of_the_grammar() {
    for (name, _) in table() {
        assert!(
            KEYS.iter().chain(BLOCK_KEYS).any(|key| key.name == name),
            "`{name}` is not a key of the attribute any more: remove its row"
        );
    }
}

//! The settings in a service's configuration (issue 42, item 1; the runtime's `serde` feature):
//! `Policy`, `RetryBudget`, `CircuitBreaker`, `Hedge`, a per-attempt `Timeout` and
//! `AdmissionGate` read from
//! TOML, YAML, JSON and environment variables with the attribute's keys, units and rules (its
//! grammar, `retry-grammar`), refused with the grammar's messages, and written back so that
//! what is written reads back to the same settings.

use proptest::prelude::*;
use retry_grammar::{KEYS, Kind};
use retry_runtime::config::Timeout;
use retry_runtime::{Backoff, CircuitBreaker, Hedge, Jitter, Policy, RetryBudget};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);
const S: Duration = Duration::from_secs(1);

/// Policies that a configuration can write: every jitter and backoff form, each optional key.
fn policies() -> Vec<Policy> {
    let p = Policy::new();
    vec![
        p,
        p.max(0),
        p.max(u32::MAX).base(250 * MS).factor(1.5),
        p.base(90 * S).jitter(Jitter::None),
        p.backoff(Backoff::Linear).jitter(Jitter::Full),
        p.backoff(Backoff::Constant).jitter(Jitter::Equal),
        p.jitter(Jitter::Decorrelated).max_delay(2 * S),
        p.jitter(Jitter::Proportional(0.2)).deadline(10 * S),
        p.jitter(Jitter::Absolute(500 * MS))
            .throttle_base(S + 500 * MS),
        p.base(Duration::from_nanos(7))
            .max_delay(Duration::from_micros(3))
            .deadline(Duration::from_nanos(u64::MAX)),
    ]
}

// ---- Policy: round trips ------------------------------------------------------------------------

#[test]
fn a_policy_round_trips_through_toml() {
    for policy in policies() {
        let text = toml::to_string(&policy).expect("serializes");
        let back: Policy = toml::from_str(&text).expect(&text);
        assert_eq!(back, policy, "{text}");
    }
}

#[test]
fn a_policy_is_written_with_the_attributes_keys_and_units() {
    let policy = Policy::new()
        .max(5)
        .base(250 * MS)
        .jitter(Jitter::Full)
        .deadline(90 * S);
    assert_eq!(
        toml::to_string(&policy).expect("serializes"),
        "max = 5\nbase = \"250ms\"\nfactor = 2.0\nbackoff = \"exponential\"\njitter = \"full\"\ndeadline = \"90s\"\n"
    );
    // No `factor` with a linear backoff: it has no effect there, and the rules refuse it.
    let linear = Policy::new()
        .backoff(Backoff::Linear)
        .base(S + 500 * MS)
        .factor(3.0);
    let written = serde_json::to_string(&linear).expect("serializes");
    assert_eq!(
        written,
        r#"{"max":3,"base":"1500ms","backoff":"linear","jitter":0.5}"#
    );
    let back: Policy = serde_json::from_str(&written).expect("reads back");
    assert_eq!(
        (1..=5).map(|n| back.nominal_delay(n)).collect::<Vec<_>>(),
        (1..=5).map(|n| linear.nominal_delay(n)).collect::<Vec<_>>(),
        "the same pauses"
    );
}

#[test]
fn a_policy_reads_as_the_attribute_and_from_str_read_it() {
    let from_toml: Policy = toml::from_str(
        r#"
        attempts = 4
        base = "100ms"
        factor = 3
        max_delay = "2s"
        throttle_base = "1s"
        deadline = "1m"
        jitter = "250ms"
        "#,
    )
    .expect("valid");
    let from_str: Policy =
        "attempts=4, base=100ms, factor=3, max_delay=2s, throttle_base=1s, deadline=1m, jitter=250ms"
            .parse()
            .expect("valid");
    assert_eq!(from_toml, from_str);
    assert_eq!(from_toml.get_max(), 3);
    assert_eq!(from_toml.get_jitter(), Jitter::Absolute(250 * MS));
    let empty: Policy = toml::from_str("").expect("the defaults");
    assert_eq!(empty, Policy::new());
}

#[test]
fn a_policy_round_trips_through_yaml_json_and_the_environment() {
    for policy in policies() {
        let yaml = serde_norway::to_string(&policy).expect("serializes");
        assert_eq!(
            serde_norway::from_str::<Policy>(&yaml).expect(&yaml),
            policy,
            "{yaml}"
        );
        let json = serde_json::to_string(&policy).expect("serializes");
        assert_eq!(
            serde_json::from_str::<Policy>(&json).expect(&json),
            policy,
            "{json}"
        );
        let env = to_env("RETRY_", &policy);
        assert_eq!(from_env::<Policy>("RETRY_", &env), policy, "{env:?}");
    }
}

/// The settings as environment variables, `RETRY_MAX=3`: every value a string, as the
/// environment has nothing else.
fn to_env(prefix: &str, settings: &impl Serialize) -> Vec<(String, String)> {
    let serde_json::Value::Object(map) = serde_json::to_value(settings).expect("serializes") else {
        panic!("settings are a map");
    };
    map.into_iter()
        .map(|(key, value)| {
            let value = match value {
                serde_json::Value::String(text) => text,
                other => other.to_string(),
            };
            (format!("{prefix}{}", key.to_uppercase()), value)
        })
        .collect()
}

fn from_env<T: DeserializeOwned>(prefix: &str, vars: &[(String, String)]) -> T {
    envy::prefixed(prefix)
        .from_iter(vars.iter().cloned())
        .unwrap_or_else(|e| panic!("{vars:?}: {e}"))
}

/// The real environment, in a child process (tests run in parallel, and setting a variable is
/// `unsafe` in edition 2024): `RETRY_MAX=3` and the rest, as a deployment sets them.
#[test]
fn a_policy_reads_from_the_process_environment() {
    let child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "configuration::child_reads_the_environment",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env("RETRY_CHILD_MAX", "7")
        .env("RETRY_CHILD_BASE", "250ms")
        .env("RETRY_CHILD_JITTER", "none")
        .env("RETRY_CHILD_DEADLINE", "1m30s")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        !child.status.success(),
        "1m30s is not one duration: {stdout}"
    );
    assert!(
        stdout.contains("invalid retry policy at `deadline = \"1m30s\"`: invalid `deadline`: unknown unit `m30s` in `1m30s`"),
        "{stdout}"
    );
    let child = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "configuration::child_reads_the_environment",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env("RETRY_CHILD_MAX", "7")
        .env("RETRY_CHILD_BASE", "250ms")
        .env("RETRY_CHILD_JITTER", "none")
        .env("RETRY_CHILD_DEADLINE", "90s")
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success(), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[test]
#[ignore = "run by a_policy_reads_from_the_process_environment, with the variables set"]
fn child_reads_the_environment() {
    let policy: Policy = envy::prefixed("RETRY_CHILD_")
        .from_env()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        policy,
        Policy::new()
            .max(7)
            .base(250 * MS)
            .jitter(Jitter::None)
            .deadline(90 * S)
    );
}

/// A policy built in code that breaks a rule of the attribute is written as it runs; reading it
/// back is refused with the rule.
#[test]
fn a_policy_that_breaks_a_rule_is_written_and_refused_when_read() {
    let short = Policy::new().deadline(500 * MS);
    let written = toml::to_string(&short).expect("serializes");
    assert!(written.ends_with("deadline = \"500ms\"\n"), "{written}");
    let error = toml::from_str::<Policy>(&written).expect_err("the rule");
    assert!(
        error.message().starts_with(
            "invalid retry policy at `deadline = \"500ms\"`: `deadline = \"500ms\"` is shorter than `base = \"1s\"`"
        ),
        "{error}"
    );
}

#[test]
fn a_policy_no_configuration_can_write_is_an_error_to_serialize() {
    let spread = Policy::new().jitter(Jitter::Spread(0.2));
    assert_eq!(
        serde_json::to_string(&spread)
            .expect_err("no form")
            .to_string(),
        "`Jitter::Spread(0.2)` has no configuration form: `jitter` is none, a fraction, a duration, `full`, `equal` or `decorrelated`"
    );
    let shrinking = Policy::new().factor_unclamped(0.5);
    assert_eq!(
        serde_json::to_string(&shrinking)
            .expect_err("no form")
            .to_string(),
        "a factor below 1 (`factor_unclamped(0.5)`) has no configuration form: `factor` is a number ≥ 1"
    );
}

// ---- the budget's, breaker's, hedge's and timeout's settings --------------------------------------

/// `value` written to each format and read back writes the same settings again; returns what
/// was read from TOML.
fn round_trips<T: Serialize + DeserializeOwned>(value: &T) -> T {
    let expected = serde_json::to_value(value).expect("serializes");
    let same = |back: &T, format: &str| {
        assert_eq!(
            serde_json::to_value(back).expect("serializes"),
            expected,
            "through {format}"
        );
    };
    let yaml = serde_norway::to_string(value).expect("serializes");
    same(&serde_norway::from_str(&yaml).expect(&yaml), "YAML");
    let json = serde_json::to_string(value).expect("serializes");
    same(&serde_json::from_str(&json).expect(&json), "JSON");
    let env = to_env("RETRY_SETTINGS_", value);
    same(&from_env("RETRY_SETTINGS_", &env), "the environment");
    let text = toml::to_string(value).expect("serializes");
    let back = toml::from_str(&text).expect(&text);
    same(&back, "TOML");
    back
}

#[test]
fn a_budget_round_trips_and_starts_empty() {
    let budgets = [
        RetryBudget::new(),
        RetryBudget::new()
            .ratio(0.25)
            .min_per_second(0)
            .max_tokens(7),
        RetryBudget::new().ratio(1000.0).max_tokens(u32::MAX),
    ];
    for budget in &budgets {
        let back = round_trips(budget);
        assert_eq!(back.get_ratio(), budget.get_ratio());
        assert_eq!(back.get_min_per_second(), budget.get_min_per_second());
        assert_eq!(back.get_max_tokens(), budget.get_max_tokens());
    }
    // A used budget writes its settings, not its tokens, and reads back as a fresh one.
    let used = RetryBudget::new().ratio(0.5);
    for _ in 0..10 {
        used.deposit();
    }
    assert_eq!(used.available(), 5.0);
    assert_eq!(
        toml::to_string(&used).expect("serializes"),
        "ratio = 0.5\nmin_per_second = 10\nmax_tokens = 100\n"
    );
    let fresh: RetryBudget =
        toml::from_str(&toml::to_string(&used).expect("serializes")).expect("reads back");
    assert_eq!(fresh.available(), 0.0);
}

#[test]
fn a_breaker_round_trips_and_starts_closed() {
    let breakers = [
        CircuitBreaker::new(),
        CircuitBreaker::new()
            .consecutive_failures(0)
            .failure_rate(0.5)
            .window(10)
            .min_calls(4)
            .open_for(90 * S)
            .name("contract"),
    ];
    for breaker in &breakers {
        round_trips(breaker);
    }
    let settings = "consecutive_failures = 2\nwindow = 20\nopen_for = \"10s\"\nname = \"bank\"\n";
    let open: CircuitBreaker = toml::from_str(settings).expect("valid");
    let t0 = std::time::Instant::now();
    for _ in 0..2 {
        open.admit(t0).expect("closed").record(false, t0);
    }
    assert!(open.admit(t0).is_err(), "open after two failures");
    assert_eq!(open.get_name(), "bank");
    // Its settings, not its state; read back, a closed breaker.
    assert_eq!(toml::to_string(&open).expect("serializes"), settings);
    let fresh: CircuitBreaker = toml::from_str(settings).expect("valid");
    assert_eq!(fresh.state(t0), retry_runtime::BreakerState::Closed);
}

#[test]
fn a_hedge_round_trips() {
    let fixed = Hedge::after(50 * MS).max_hedges(2);
    let back = round_trips(&fixed);
    assert_eq!(back.delay(), Some(50 * MS));
    assert_eq!(back.get_max_hedges(), 2);
    let percentile = Hedge::percentile(99.9)
        .min_samples(5)
        .period(Duration::from_secs(60));
    round_trips(&percentile);
    assert_eq!(
        toml::to_string(&percentile).expect("serializes"),
        "hedge = \"p99.9\"\nmax_hedges = 1\nmin_samples = 5\nperiod = \"1m\"\n"
    );
}

#[derive(Debug, Serialize, Deserialize)]
struct Call {
    timeout: Timeout,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<Policy>,
}

#[test]
fn a_timeout_round_trips() {
    for limit in [2 * S, 1500 * MS, Duration::from_nanos(1)] {
        let call = Call {
            timeout: Timeout(limit),
            policy: None,
        };
        let back: Call = round_trips(&call);
        assert_eq!(back.timeout, Timeout(limit));
    }
    let call: Call = toml::from_str("timeout = \"2s\"\n[policy]\nmax = 1\n").expect("valid");
    assert_eq!(call.timeout, Timeout(2 * S));
    assert_eq!(call.policy, Some(Policy::new().max(1)));
    let zero = toml::from_str::<Call>("timeout = \"0s\"").expect_err("zero");
    assert_eq!(
        zero.message(),
        "invalid timeout at `timeout = \"0s\"`: `timeout = \"0s\"` would cut off every attempt before it starts; give a duration longer than zero, like `timeout = \"2s\"`"
    );
}

#[test]
fn a_gate_round_trips_in_each_mode() {
    use retry_runtime::{
        AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, GateMode, Gradient2,
    };
    let gates = [
        AdmissionGate::adaptive_throttling(AdaptiveThrottling::new()),
        AdmissionGate::adaptive_throttling(
            AdaptiveThrottling::new()
                .k(1.5)
                .window(30 * S)
                .bins(8)
                .requests_padding(8.0),
        )
        .name("search"),
        AdmissionGate::rate_limit(ClientRateLimit::new().fail_fast(true).beta(0.5)),
        AdmissionGate::aimd(Aimd::new().initial_limit(10).backoff_ratio(0.8)).name("inventory"),
        AdmissionGate::gradient2(
            Gradient2::new()
                .queue_size(2)
                .long_window(100)
                .rtt_tolerance(2.0),
        ),
    ];
    for gate in &gates {
        let back = round_trips(gate);
        assert_eq!(back.mode(), gate.mode());
        assert_eq!(back.get_name(), gate.get_name());
    }
    let aimd: AdmissionGate =
        toml::from_str("mode = \"aimd\"\nname = \"inventory\"\ninitial_limit = 2\nmin_limit = 1\n")
            .expect("valid");
    assert_eq!(aimd.mode(), GateMode::Aimd);
    let t0 = std::time::Instant::now();
    let (_first, _second) = (
        aimd.admit(t0).expect("1 of 2"),
        aimd.admit(t0).expect("2 of 2"),
    );
    assert!(
        aimd.admit(t0).is_err(),
        "the limit read from the configuration: 2"
    );
    assert_eq!(
        toml::to_string(&aimd).expect("serializes"),
        "mode = \"aimd\"\nname = \"inventory\"\ninitial_limit = 2\nmin_limit = 1\nmax_limit = 200\nbackoff_ratio = 0.9\ntimeout = \"5s\"\n"
    );
}

#[test]
fn a_gate_is_refused_with_the_grammars_message() {
    use retry_runtime::AdmissionGate;
    use serde_json::json;
    let modes = "`adaptive_throttling` (client-side adaptive throttling, the SRE book's), `rate_limit` (the AWS SDKs' adaptive client rate limit, CUBIC), `aimd` (an AIMD concurrency limit) or `gradient2` (a Gradient2 concurrency limit)";
    for (json, expected) in [
        (
            json!({"k": 2}),
            "invalid admission gate at `mode`: an admission gate needs `mode`: add `mode = \"adaptive_throttling\"`; the modes are `adaptive_throttling`, `rate_limit`, `aimd`, `gradient2`".to_owned(),
        ),
        (
            json!({"mode": "cubic"}),
            format!("invalid admission gate at `mode = \"cubic\"`: unknown `mode`; expected {modes}"),
        ),
        (
            json!({"beta": 0.5, "mode": "aimd"}),
            "invalid admission gate at `beta = 0.5`: unknown key `beta`; valid keys: `mode`, `name`, `initial_limit`, `min_limit`, `max_limit`, `backoff_ratio`, `timeout`".to_owned(),
        ),
        (
            json!({"mode": "adaptive_throttling", "k": 0.5}),
            "invalid admission gate at `k = 0.5`: `k = 0.5` is too small; expected a number from 1 to 1000".to_owned(),
        ),
        (
            json!({"mode": "adaptive_throttling", "bins": 64}),
            "invalid admission gate at `bins = 64`: `bins = 64` is too large; expected a whole number from 1 to 32".to_owned(),
        ),
        (
            json!({"mode": "rate_limit", "beta": 0}),
            "invalid admission gate at `beta = 0`: `beta = 0` is too small; expected a number above 0 and at most 1".to_owned(),
        ),
        (
            json!({"mode": "rate_limit", "fail_fast": "yes"}),
            "invalid admission gate at `fail_fast = \"yes\"`: `fail_fast` is `true` or `false`, like `fail_fast = true`".to_owned(),
        ),
    ] {
        assert_eq!(refused::<AdmissionGate>(json), expected);
    }
}

// ---- one grammar: the attribute's keys and rules ---------------------------------------------------

/// The attribute's example of a key as TOML writes it: `3`, `"1s"`, and a word quoted.
fn toml_value(key: &retry_grammar::Key) -> String {
    let example = key.example;
    if matches!(key.kind, Kind::Flag) {
        "true".to_owned()
    } else if example.starts_with('"') || example.parse::<f64>().is_ok() {
        example.to_owned()
    } else {
        format!("\"{example}\"")
    }
}

/// Every key of the grammar, including one added later: its example reads to the policy
/// `Policy::from_str` (the attribute's grammar) builds, or it is refused: as code, with where to
/// write it, or as a setting that is not a policy's.
#[test]
fn every_key_of_the_grammar_reads_as_the_attribute_reads_it_or_is_refused() {
    let valid = "`max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`";
    for key in KEYS.iter().chain(retry_grammar::BLOCK_KEYS) {
        let text = format!("{} = {}", key.name, toml_value(key));
        let read = toml::from_str::<Policy>(&text);
        if key.is_timing() {
            let expected: Policy = format!("{}={}", key.name, key.example)
                .parse()
                .expect(&text);
            assert_eq!(read.expect(&text), expected, "{text}");
            continue;
        }
        let message = read.expect_err(&text).message().to_owned();
        let value = toml_value(key);
        let expected = match key.kind {
            Kind::Expr { .. } | Kind::Policy | Kind::Path | Kind::Flag => {
                let written = match key.kind {
                    Kind::Flag => key.name.to_owned(),
                    _ => key.with_example(),
                };
                let place = if retry_grammar::BLOCK_KEYS.contains(key) {
                    format!("in `retry_block!({written} => ...)`")
                } else {
                    format!(
                        "in `#[retry({written})]`, `retry_block!({written} => ...)` or the `Retrier`"
                    )
                };
                format!(
                    "invalid retry policy at `{} = {value}`: `{}` is written in code, not in a configuration: give it where the call is made, {place}; a retry policy takes {valid}",
                    key.name, key.name
                )
            }
            _ => format!(
                "invalid retry policy at `{} = {value}`: `{}` is not a setting of a retry policy, which takes {valid}",
                key.name, key.name
            ),
        };
        assert_eq!(message, expected, "{text}");
    }
}

#[test]
fn code_is_refused_with_where_it_is_written() {
    for (text, message) in [
        (
            r#"on = "is_transient""#,
            "invalid retry policy at `on = \"is_transient\"`: `on` is written in code, not in a configuration: give it where the call is made, in `#[retry(on = is_transient)]`, `retry_block!(on = is_transient => ...)` or the `Retrier`; a retry policy takes `max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`",
        ),
        (
            r#"sleep = "tokio::time::sleep""#,
            "invalid retry policy at `sleep = \"tokio::time::sleep\"`: `sleep` is written in code, not in a configuration: give it where the call is made, in `#[retry(sleep = my_runtime::sleep)]`, `retry_block!(sleep = my_runtime::sleep => ...)` or the `Retrier`; a retry policy takes `max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`",
        ),
    ] {
        let error = toml::from_str::<Policy>(text).expect_err(text);
        assert_eq!(error.message(), message);
    }
}

/// The message a JSON value of `T` is refused with: serde_json adds no position to an error
/// of a `Value`, so this is the grammar's message as a configuration crate shows it.
fn refused<T: DeserializeOwned + std::fmt::Debug>(json: serde_json::Value) -> String {
    serde_json::from_value::<T>(json.clone())
        .map(|ok| panic!("{json} was read as {ok:?}"))
        .unwrap_err()
        .to_string()
}

/// Every rule across keys that a configuration can break, at the key it names; a rule added
/// to `RULES` later fails here until it has a case.
#[test]
fn every_rule_across_keys_is_enforced_on_a_configuration() {
    use serde_json::json;
    let cases = [
        (
            "`max` with `attempts`",
            refused::<Policy>(json!({"max": 3, "attempts": 4})),
            "invalid retry policy at `attempts = 4`: give `max` (retries after the first call) or `attempts` (calls in all), not both: `max = 3` is `attempts = 4`",
        ),
        (
            "`max_delay` below `base`",
            refused::<Policy>(json!({"max_delay": "500ms"})),
            "invalid retry policy at `max_delay = \"500ms\"`: `max_delay = \"500ms\"` is shorter than `base = \"1s\"` (the default): no pause may exceed `max_delay`, so not even the first pause could be taken; raise `max_delay` or set a shorter `base`",
        ),
        (
            "`deadline` below `base` when `max > 0`",
            refused::<Policy>(json!({"deadline": "500ms", "base": "1s"})),
            "invalid retry policy at `deadline = \"500ms\"`: `deadline = \"500ms\"` is shorter than `base = \"1s\"`: the first pause would already end past the deadline, so no retry could ever happen; raise `deadline`, set a shorter `base`, or write `max = 0` for a single call",
        ),
        (
            "`factor` with `backoff = linear` or `backoff = constant`",
            refused::<Policy>(json!({"factor": 2, "backoff": "constant"})),
            "invalid retry policy at `factor = 2`: `factor` has no effect with `backoff = constant` (pause n is `base`); remove `factor`, or write `backoff = exponential`",
        ),
        (
            // `policy` is code: refused before any timing key could clash with it.
            "`policy` given as an expression, with a timing key (`max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`); beside a name they are the default",
            refused::<Policy>(json!({"policy": "COVERAGE", "max": 3})),
            "invalid retry policy at `policy = \"COVERAGE\"`: `policy` is written in code, not in a configuration: give it where the call is made, in `#[retry(policy = COVERAGE_POLICY)]`, `retry_block!(policy = COVERAGE_POLICY => ...)` or the `Retrier`; a retry policy takes `max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`",
        ),
        (
            // A configuration is not a function: `timeout` and `hedge` are their own settings.
            "`timeout`, `sleep`, `hedge` or `max_hedges` on a sync function",
            refused::<Policy>(json!({"timeout": "2s"})),
            "invalid retry policy at `timeout = \"2s\"`: `timeout` is not a setting of a retry policy, which takes `max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`",
        ),
        (
            "`max_hedges` without `hedge`",
            refused::<Hedge>(json!({"max_hedges": 2})),
            "invalid hedge at `max_hedges = 2`: `max_hedges` counts the copies that `hedge` starts, and there is no `hedge`; add `hedge = \"50ms\"`, or remove `max_hedges`",
        ),
    ];
    for (_, got, expected) in &cases {
        assert_eq!(got, expected);
    }
    let covered: Vec<&str> = cases.iter().map(|(rule, ..)| *rule).collect();
    let rules: Vec<String> = retry_grammar::RULES.iter().map(|r| (r.doc)()).collect();
    assert_eq!(covered, rules, "a rule without a case here");
}

#[test]
fn malformed_values_are_refused_with_the_grammars_message() {
    use serde_json::json;
    let accepted = "expected a duration like `\"250ms\"`, `\"1.5s\"` or `\"2m\"`: an unsigned decimal number followed by `ns`, `us`, `µs`, `ms`, `s`, `m` or `h`";
    let policy_keys = "`max`, `attempts`, `base`, `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`";
    let cases = [
        // Wrong types.
        (
            json!({"max": "three"}),
            "invalid retry policy at `max = \"three\"`: `max` counts retries after the first call; expected a whole number from 0 to 4294967295, like `max = 3`".to_owned(),
        ),
        (
            json!({"max": [3]}),
            "invalid retry policy at `max = a list`: `max` counts retries after the first call; expected a whole number from 0 to 4294967295, like `max = 3`".to_owned(),
        ),
        (
            json!({"base": 5}),
            "invalid retry policy at `base = 5`: `base` needs a unit: write `base = \"5s\"` or `base = \"5ms\"`".to_owned(),
        ),
        (
            json!({"base": true}),
            format!("invalid retry policy at `base = true`: `base` takes a duration string; {accepted}"),
        ),
        (
            json!({"backoff": "quadratic"}),
            "invalid retry policy at `backoff = \"quadratic\"`: unknown `backoff`; expected `exponential` (base·factor^(n−1)), `linear` (base·n) or `constant` (base)".to_owned(),
        ),
        (
            json!({"jitter": {"form": "full"}}),
            "invalid retry policy at `jitter = a table`: unknown `jitter`; expected bare `jitter`, a fraction in (0, 1] like `jitter = 0.5`, a duration string like `jitter = \"500ms\"`, or one of `full`, `equal`, `decorrelated`, `none`".to_owned(),
        ),
        // Units.
        (
            json!({"base": "1 sec"}),
            format!("invalid retry policy at `base = \"1 sec\"`: invalid `base`: unknown unit `sec` in `1 sec`; {accepted}; write `base = \"1s\"`"),
        ),
        (
            json!({"base": "1000000000000d"}),
            format!("invalid retry policy at `base = \"1000000000000d\"`: invalid `base`: unknown unit `d` in `1000000000000d`; {accepted}"),
        ),
        (
            json!({"max_delay": "1.5ns"}),
            "invalid retry policy at `max_delay = \"1.5ns\"`: invalid `max_delay`: `1.5ns` is finer than a nanosecond; round it to whole nanoseconds, or use a smaller unit".to_owned(),
        ),
        // Negative values.
        (
            json!({"max": -1}),
            "invalid retry policy at `max = -1`: `max` counts retries after the first call and cannot be negative; expected a whole number from 0 to 4294967295".to_owned(),
        ),
        (
            json!({"base": "-1s"}),
            format!("invalid retry policy at `base = \"-1s\"`: invalid `base`: `-1s` is negative; {accepted}"),
        ),
        (
            json!({"jitter": -0.5}),
            "invalid retry policy at `jitter = -0.5`: a jitter fraction cannot be negative; write a fraction in (0, 1] like `jitter = 0.5`, or `jitter = none` for no jitter".to_owned(),
        ),
        // Huge values.
        (
            json!({"max": u64::MAX}),
            "invalid retry policy at `max = 18446744073709551615`: `max = 18446744073709551615` is too large; expected a whole number from 0 to 4294967295".to_owned(),
        ),
        (
            json!({"attempts": "4294967296"}),
            "invalid retry policy at `attempts = \"4294967296\"`: `attempts = 4294967296` is too large; expected a whole number from 1 to 4294967295".to_owned(),
        ),
        (
            json!({"deadline": "1000000000000h"}),
            "invalid retry policy at `deadline = \"1000000000000h\"`: invalid `deadline`: `1000000000000h` is too long: durations must fit in 584 years of nanoseconds".to_owned(),
        ),
        (
            json!({"factor": 0.5}),
            "invalid retry policy at `factor = 0.5`: `factor = 0.5` would shrink each pause; expected a number ≥ 1 (`factor = 1` keeps the pause constant, `factor = 2` doubles it)".to_owned(),
        ),
        // Unknown keys.
        (
            json!({"retries": 3}),
            format!("invalid retry policy at `retries = 3`: unknown key `retries`; did you mean `max`? valid keys: {policy_keys}"),
        ),
        (
            json!({"jiter": "full"}),
            format!("invalid retry policy at `jiter = \"full\"`: unknown key `jiter`; did you mean `jitter`? valid keys: {policy_keys}"),
        ),
        (
            json!({"colour": "blue"}),
            format!("invalid retry policy at `colour = \"blue\"`: unknown key `colour`; valid keys: {policy_keys}"),
        ),
    ];
    for (json, expected) in cases {
        assert_eq!(refused::<Policy>(json), expected);
    }
    assert_eq!(
        refused::<RetryBudget>(json!({"ratio": 2000})),
        "invalid retry budget at `ratio = 2000`: `ratio = 2000` is too large; expected a number from 0 to 1000"
    );
    assert_eq!(
        refused::<CircuitBreaker>(json!({"window": 500})),
        "invalid circuit breaker at `window = 500`: `window = 500` is too large; expected a whole number from 1 to 128"
    );
    assert_eq!(
        refused::<CircuitBreaker>(json!({"failure_rate": -0.5})),
        "invalid circuit breaker at `failure_rate = -0.5`: `failure_rate` cannot be negative; expected a number from 0 to 1"
    );
    assert_eq!(
        refused::<CircuitBreaker>(json!({"open_for": "30s", "name": 3})),
        "invalid circuit breaker at `name = 3`: `name` takes a name, like `name = \"contract\"`"
    );
    assert_eq!(
        refused::<Hedge>(json!({"hedge": "p100"})),
        "invalid hedge at `hedge = \"p100\"`: `hedge = \"p100\"` is not a percentile: write `p` and a number above 0 and below 100, like `hedge = \"p95\"` (hedge after the 95th percentile of the observed latency), or a duration like `hedge = \"50ms\"`"
    );
    assert_eq!(
        refused::<Hedge>(json!({"period": "1s"})),
        "invalid hedge at `hedge`: a hedge needs `hedge`: add `hedge = \"50ms\"`"
    );
}

/// NaN and infinity, which TOML and YAML can write and JSON cannot.
#[test]
fn nan_and_infinite_numbers_are_refused() {
    let growth = "`factor` is the growth of the pause per retry; expected a number ≥ 1 like `factor = 2` or `factor = 1.5`";
    for (text, shown) in [("nan", "NaN"), ("inf", "inf"), ("-inf", "-inf")] {
        let error = toml::from_str::<Policy>(&format!("factor = {text}")).expect_err(text);
        assert_eq!(
            error.message(),
            format!("invalid retry policy at `factor = {shown}`: {growth}")
        );
    }
    let error = serde_norway::from_str::<Policy>("factor: .nan").expect_err("NaN");
    assert!(
        error
            .to_string()
            .starts_with(&format!("invalid retry policy at `factor = NaN`: {growth}")),
        "{error}"
    );
    let error = serde_norway::from_str::<RetryBudget>("ratio: .inf").expect_err("infinite");
    assert!(
        error.to_string().starts_with("invalid retry budget at `ratio = inf`: `ratio` is the fraction of a token each first attempt deposits; expected a number from 0 to 1000, like `ratio = 0.1`"),
        "{error}"
    );
}

/// What a user of TOML sees: the format's position (the table's: a settings map is read as a
/// whole, so that the rules across its keys can be checked), then the grammar's message.
#[test]
fn a_toml_error_points_at_the_table_and_says_what_to_write() {
    let error = toml::from_str::<Policy>("max = 3\nbase = \"1 sec\"\n").expect_err("bad unit");
    assert_eq!(
        error.to_string(),
        "TOML parse error at line 1, column 1\n  |\n1 | max = 3\n  | ^\ninvalid retry policy at `base = \"1 sec\"`: invalid `base`: unknown unit `sec` in `1 sec`; expected a duration like `\"250ms\"`, `\"1.5s\"` or `\"2m\"`: an unsigned decimal number followed by `ns`, `us`, `µs`, `ms`, `s`, `m` or `h`; write `base = \"1s\"`\n"
    );
}

// ---- no panic, whatever the value ------------------------------------------------------------------

/// The keys of every settings type, and the attribute's.
fn key_names() -> Vec<&'static str> {
    let sections = [
        &retry_grammar::config::POLICY,
        &retry_grammar::config::BUDGET,
        &retry_grammar::config::BREAKER,
        &retry_grammar::config::HEDGING,
        &retry_grammar::config::GATE_THROTTLING,
        &retry_grammar::config::GATE_RATE_LIMIT,
        &retry_grammar::config::GATE_AIMD,
        &retry_grammar::config::GATE_GRADIENT2,
    ];
    KEYS.iter()
        .chain(sections.iter().flat_map(|s| s.keys.iter()))
        .map(|k| k.name)
        .collect()
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{Value, json};
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        "[-+]?[0-9]{0,22}(\\.[0-9]{0,12})?(ns|us|µs|ms|s|m|h|d| sec)?".prop_map(Value::String),
        prop::sample::select(vec![
            "full", "none", "linear", "p95", "p0", "p100", "NaN", "inf"
        ])
        .prop_map(|w| Value::String(w.to_owned())),
        ".{0,12}".prop_map(Value::String),
    ];
    let key = prop_oneof![
        prop::sample::select(key_names()).prop_map(str::to_owned),
        ".{0,8}"
    ];
    leaf.prop_recursive(3, 24, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Any JSON value is read or refused, never a panic; a policy that is read writes back to
    /// itself.
    #[test]
    fn any_json_value_reads_or_says_why(value in json_value()) {
        if let Ok(policy) = serde_json::from_value::<Policy>(value.clone()) {
            let written = serde_json::to_value(policy).expect("a read policy writes");
            prop_assert_eq!(serde_json::from_value::<Policy>(written).expect("reads back"), policy);
        }
        let _ = serde_json::from_value::<RetryBudget>(value.clone());
        let _ = serde_json::from_value::<CircuitBreaker>(value.clone());
        let _ = serde_json::from_value::<Hedge>(value.clone());
        let _ = serde_json::from_value::<retry_runtime::AdmissionGate>(value.clone());
        let _ = serde_json::from_value::<Timeout>(value);
    }
}

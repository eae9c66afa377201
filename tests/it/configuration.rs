//! The settings in a service's configuration (issue 42, item 1; the runtime's `serde` feature):
//! `Policy`, `RetryBudget`, `CircuitBreaker`, `Hedge` and a per-attempt `Timeout` read from
//! TOML, YAML, JSON and environment variables with the attribute's keys, units and rules (its
//! grammar, `retry-grammar`), refused with the grammar's messages, and written back so that
//! what is written reads back to the same settings.

use retry_runtime::{Backoff, Jitter, Policy};
use serde::Serialize;
use serde::de::DeserializeOwned;
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
    let linear = Policy::new().backoff(Backoff::Linear).base(S + 500 * MS);
    assert_eq!(
        serde_json::to_string(&linear).expect("serializes"),
        r#"{"max":3,"base":"1500ms","backoff":"linear","jitter":0.5}"#,
        "no `factor` with a linear backoff, which the rules would refuse"
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

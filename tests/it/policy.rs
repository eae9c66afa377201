//! `policy = expr`: the timings come from a `Policy` (or `&Policy`) chosen at run time, built
//! as a `const` or read from configuration with `Policy::from_str` in the attribute's own
//! syntax (`"max=3, base=1s, jitter=full"`). The string means exactly what the attribute means,
//! and a string that cannot be read names the part that is wrong.

use crate::common::{Busy, MS, S, fail};
use retry_runtime::{Backoff, Jitter, Policy, retry, testing};
use std::cell::Cell;
use std::io;
use std::str::FromStr;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;
use tokio::time::Instant;

// ---- a `const` policy -----------------------------------------------------------------------------

const COVERAGE: Policy = Policy::new()
    .max(2)
    .base(Duration::from_millis(300))
    .backoff(Backoff::Linear)
    .jitter(Jitter::None);

#[retry(policy = COVERAGE)]
async fn by_const(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn a_const_policy_sets_every_timing() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(by_const(&calls).await, Err(Busy(3)));
    // Linear: 300 ms, then 600 ms.
    assert_eq!(t0.elapsed(), 900 * MS);
}

static SHARED: Policy = Policy::new()
    .max(1)
    .base(Duration::from_secs(5))
    .jitter(Jitter::None);

#[retry(policy = &SHARED)]
async fn by_reference(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn a_reference_to_a_policy() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(by_reference(&calls).await, Err(Busy(2)));
    assert_eq!(t0.elapsed(), 5 * S);
}

// ---- loaded at start-up ----------------------------------------------------------------------------

/// What a service would read from its configuration file once.
static LOADED: LazyLock<Policy> = LazyLock::new(|| {
    "max=3, base=1s, jitter=none"
        .parse()
        .expect("a valid policy string")
});

#[retry(policy = &*LOADED, on = |_: &Busy| true)]
async fn by_loaded(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[tokio::test(start_paused = true)]
async fn a_policy_loaded_from_a_string() {
    let (t0, calls) = (Instant::now(), Cell::new(0));
    assert_eq!(by_loaded(&calls).await, Err(Busy(4)));
    assert_eq!(t0.elapsed(), 7 * S);
}

#[retry(policy = *LOADED)]
fn by_loaded_value(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[test]
fn sync_a_policy_value_loaded_from_a_string() {
    let calls = Cell::new(0);
    let (result, pauses) = testing::record(|| by_loaded_value(&calls));
    assert_eq!(result, Err(Busy(4)));
    assert_eq!(pauses, [S, 2 * S, 4 * S]);
}

/// Configuration that can change while the service runs: each call reads it anew.
static LIVE: Mutex<Policy> = Mutex::new(Policy::new());

fn live() -> Policy {
    *LIVE.lock().expect("not poisoned")
}

#[retry(policy = live())]
fn by_live_configuration(calls: &Cell<u32>) -> Result<u32, Busy> {
    fail(calls)
}

#[test]
fn the_expression_is_evaluated_on_each_call() {
    *LIVE.lock().unwrap() = "max=1, base=10ms, jitter=none".parse().unwrap();
    let calls = Cell::new(0);
    let (_, pauses) = testing::record(|| by_live_configuration(&calls));
    assert_eq!(pauses, [10 * MS]);

    *LIVE.lock().unwrap() = "attempts=3, base=2s, backoff=constant, jitter=none"
        .parse()
        .unwrap();
    let (_, pauses) = testing::record(|| by_live_configuration(&calls));
    assert_eq!(pauses, [2 * S, 2 * S]);
}

#[retry(policy = policy, timeout = "1s", notify = |_: &io::Error, _: &retry_runtime::RetryEvent| heard.set(heard.get() + 1))]
async fn by_parameter(policy: &Policy, heard: &Cell<u32>) -> io::Result<()> {
    std::future::pending().await
}

#[tokio::test(start_paused = true)]
async fn a_policy_parameter_with_the_other_keys() {
    let (t0, heard) = (Instant::now(), Cell::new(0));
    let policy: Policy = "max=2, base=500ms, jitter=none".parse().unwrap();
    let error = by_parameter(&policy, &heard).await.unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    // Three 1 s timeouts, pauses of 500 ms and 1 s.
    assert_eq!(t0.elapsed(), 4500 * MS);
    assert_eq!(heard.get(), 2);
}

// ---- the string means what the attribute means -------------------------------------------------

/// Builds one function with `#[retry(ARGS)]` and one with `policy = stringify!(ARGS).parse()`,
/// and checks that they pause alike under the same seed, deadline included.
macro_rules! same_as_the_attribute {
    ($($test:ident: [$($args:tt)*],)*) => {$(
        #[test]
        fn $test() {
            #[retry($($args)*)]
            fn literal(calls: &Cell<u32>) -> Result<u32, Busy> {
                fail(calls)
            }
            #[retry(policy = parsed)]
            fn parsed(parsed: &Policy, calls: &Cell<u32>) -> Result<u32, Busy> {
                fail(calls)
            }
            let text = stringify!($($args)*);
            let policy: Policy = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            let (literal_calls, parsed_calls) = (Cell::new(0), Cell::new(0));
            for seed in [1, 2, 3] {
                let literal = testing::record_seeded(seed, || literal(&literal_calls));
                let parsed = testing::record_seeded(seed, || parsed(&policy, &parsed_calls));
                assert_eq!(literal, parsed, "`{text}`, seed {seed}");
            }
        }
    )*};
}

same_as_the_attribute! {
    same_defaults: [],
    same_max_and_base: [max = 4, base = "250ms", jitter = none],
    same_attempts: [attempts = 2, base = "1.5s", jitter = none],
    same_factor: [max = 5, base = "100us", factor = 1.5, jitter = none],
    same_linear: [max = 3, base = "2m", backoff = linear, jitter = none],
    same_constant: [max = 3, base = "1h", backoff = constant, jitter = none],
    same_max_delay: [max = 6, base = "1s", max_delay = "5s", jitter = none],
    same_deadline: [max = 9, base = "1s", deadline = "10s", jitter = none],
    same_default_jitter: [max = 3, base = "1s", jitter],
    same_fraction: [max = 3, base = "1s", jitter = 0.25],
    same_absolute: [max = 3, base = "1s", jitter = "300ms"],
    same_full: [max = 3, base = "1s", jitter = full],
    same_equal: [max = 3, base = "1s", jitter = equal],
    same_decorrelated: [max = 5, base = "10ms", max_delay = "1s", jitter = decorrelated],
    same_micro_sign: [max = 2, base = "750µs", jitter = none],
    same_nanos: [max = 2, base = "1500ns", deadline = "1ms", jitter = none],
}

#[test]
fn the_string_reads_every_key() {
    let policy: Policy =
        "max=5, base=\"250ms\", factor=3, max_delay=10s, deadline=1m, jitter=equal"
            .parse()
            .unwrap();
    assert_eq!(policy.get_max(), 5);
    assert_eq!(policy.get_base(), 250 * MS);
    assert_eq!(policy.get_factor(), 3.0);
    assert_eq!(policy.get_backoff(), Backoff::Exponential);
    assert_eq!(policy.get_max_delay(), 10 * S);
    assert_eq!(policy.get_deadline(), Some(60 * S));
    assert_eq!(policy.get_jitter(), Jitter::Equal);

    assert_eq!(Policy::from_str("").unwrap(), Policy::new());
    assert_eq!(Policy::from_str(" , ").unwrap(), Policy::new());
    assert_eq!(
        Policy::from_str("jitter").unwrap().get_jitter(),
        Jitter::Proportional(0.5)
    );
    assert_eq!(Policy::from_str("attempts=1").unwrap().get_max(), 0);
}

// ---- errors name the part -------------------------------------------------------------------------

/// The part an error names, and its message.
fn error(text: &str) -> (String, String) {
    let error = text.parse::<Policy>().expect_err(text);
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("invalid retry policy at `{}`: ", error.part())),
        "{message}"
    );
    (error.part().to_owned(), message)
}

#[test]
fn a_bad_duration_names_its_part_and_the_accepted_forms() {
    let (part, message) = error("max=3, base=1 sec, jitter=full");
    assert_eq!(part, "base=1 sec");
    assert!(message.contains("\"250ms\""), "{message}");
    let (part, _) = error("deadline=10");
    assert_eq!(part, "deadline=10");
    let (part, message) = error("max_delay=-1s");
    assert_eq!(part, "max_delay=-1s");
    assert!(message.contains("number"), "{message}");
}

#[test]
fn an_unknown_key_names_its_part_and_the_valid_keys() {
    let (part, message) = error("max=3, retries=4");
    assert_eq!(part, "retries=4");
    assert!(
        message.contains("`retries`") && message.contains("`max`"),
        "{message}"
    );
}

#[test]
fn each_bad_value_names_its_part() {
    for (text, bad) in [
        ("max=three", "max=three"),
        ("max=-1", "max=-1"),
        ("base=1s, attempts=0", "attempts=0"),
        ("factor=0.5", "factor=0.5"),
        ("factor=inf", "factor=inf"),
        ("backoff=quadratic", "backoff=quadratic"),
        ("jitter=2", "jitter=2"),
        ("jitter=0", "jitter=0"),
        ("jitter=sometimes", "jitter=sometimes"),
        ("max", "max"),
        ("base=", "base="),
        ("max=3, base=1s, max=4", "max=4"),
    ] {
        assert_eq!(error(text).0, bad, "`{text}`");
    }
}

#[test]
fn the_rules_across_keys_name_the_part_that_breaks_them() {
    assert_eq!(error("max=3, attempts=4").0, "attempts=4");
    assert_eq!(error("factor=2, backoff=linear").0, "factor=2");
    assert_eq!(error("base=2s, max_delay=1s").0, "max_delay=1s");
    assert_eq!(error("deadline=500ms, base=1s").0, "deadline=500ms");
    // With no retries there is no pause to fit in the deadline.
    assert!("max=0, deadline=500ms, base=1s".parse::<Policy>().is_ok());
}

#[test]
fn the_part_is_the_one_written_even_with_spaces_and_quotes() {
    let (part, _) = error("  max = 3 ,  base = \"1 minute\"  ");
    assert_eq!(part, "base = \"1 minute\"");
}

/// Issue 13, defect 4: thirty fraction digits overflowed the arithmetic and panicked with
/// "attempt to multiply with overflow" in debug builds.
#[test]
fn a_long_fraction_is_refused_not_a_panic() {
    let (part, message) = error("max=2, max_delay=1.999999999999999999999999999999s");
    assert_eq!(part, "max_delay=1.999999999999999999999999999999s");
    assert_eq!(
        message,
        "invalid retry policy at `max_delay=1.999999999999999999999999999999s`: invalid \
         `max_delay`: `1.999999999999999999999999999999s` is finer than a nanosecond; round it \
         to whole nanoseconds, or use a smaller unit"
    );
    // Zeros past the nanosecond add no precision, so they are read.
    let policy: Policy = "base=1.500000000000000000000000000000s".parse().unwrap();
    assert_eq!(policy.get_base(), 1500 * MS);
}

#[test]
fn a_key_of_the_attribute_that_is_not_a_timing_says_where_it_belongs() {
    let (part, message) = error("max=3, notify=log_retry");
    assert_eq!(part, "notify=log_retry");
    assert!(
        message.ends_with("give `notify` in the attribute"),
        "{message}"
    );
}

/// The grammar is shared: a policy string gets the attribute's own message, word for word.
#[test]
fn the_string_and_the_attribute_say_the_same() {
    let attribute = [
        include_str!("../../tests-build/tests/ui/combined_errors.stderr"),
        include_str!("../../tests-build/tests/ui/deadline_below_base.stderr"),
        include_str!("../../tests-build/tests/ui/max_delay_long_fraction.stderr"),
    ]
    .concat();
    for text in [
        r#"base = "1 sec""#,
        r#"max = 2, base = "5s", deadline = "1s""#,
        r#"max_delay = "1.999999999999999999999999999999s""#,
    ] {
        let error = text.parse::<Policy>().expect_err(text).to_string();
        let (_, message) = error.split_once("`: ").expect("the part, then the message");
        assert!(
            attribute.contains(&format!("error: {message}\n")),
            "`{text}`: {message}"
        );
    }
}

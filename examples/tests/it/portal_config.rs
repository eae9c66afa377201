//! The portal's policies come from its TOML file (issue 42): the shipped `examples/portal.toml`
//! says what `check_coverage` has written beside its `policy = "contract-service"`, and the
//! `claims-portal` process runs what its file says: a copy with other values, given with
//! `--config`, changes the calls that reach the contract service; a copy that breaks a rule
//! stops it before it serves anyone, with the key named.
//!
//! The registry is installed in the `claims-portal` processes only: this test binary's
//! `check_coverage` (in `queue_portal`) runs without one, on the written default.

use crate::common::{Database, Engine, Portal, blocking};
use retry_examples::portal::config::{CONTRACT_SERVICE, Policies, SHIPPED};
use retry_examples::portal::coverage::{CONTRACT_BREAKER, COVERAGE_BUDGET};
use retry_examples::portal::{ClaimId, ContractService};
use retry_runtime::Policy;
use std::path::PathBuf;

/// The shipped file's `contract-service` is the default written in `check_coverage`'s attribute
/// (`max = 3, base = "1s", jitter`), with the budget and breaker written there
/// (`COVERAGE_BUDGET`, `CONTRACT_BREAKER`): the same settings, whichever runs.
#[test]
fn the_shipped_file_says_what_the_attribute_writes() {
    let on_disk = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/portal.toml"))
        .expect("examples/portal.toml");
    assert_eq!(
        SHIPPED, on_disk,
        "the compiled-in file is examples/portal.toml"
    );

    let policies = Policies::read(SHIPPED, "examples/portal.toml").expect("the shipped file reads");
    assert_eq!(
        policies.summary(),
        "Retry policies from examples/portal.toml: contract-service"
    );
    let contract = policies.contract().expect("contract-service is configured");
    let written: Policy = "max = 3, base = 1s, jitter"
        .parse()
        .expect("the attribute's words");
    assert_eq!(*contract.policy(), written);

    let breaker = contract.get_breaker().expect("a breaker");
    assert_eq!(settings(breaker), settings(&CONTRACT_BREAKER));
    assert_eq!(breaker.get_name(), "contract", "the metrics' label");
    let budget = contract.get_budget().expect("a budget");
    assert_eq!(settings(budget), settings(&COVERAGE_BUDGET));
    assert_eq!(
        budget.get_name(),
        CONTRACT_SERVICE,
        "named after its policy"
    );
}

/// A budget's or a breaker's settings as it serializes them (never its state), to compare two.
fn settings<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).expect("settings serialize")
}

/// `examples/portal.toml` with each `(from, to)` replaced, written to a file of its own.
fn copy_with(test: &str, changes: &[(&str, &str)]) -> PathBuf {
    let mut text = SHIPPED.to_owned();
    for (from, to) in changes {
        assert!(text.contains(from), "{from:?} is in examples/portal.toml");
        text = text.replace(from, to);
    }
    let dir = std::env::temp_dir().join(crate::common::unique_name(test));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    let file = dir.join("portal.toml");
    std::fs::write(&file, text).expect("the copy is written");
    file
}

/// One customer's claim, reported by `claims-portal report` against a service that stays
/// overloaded, with `args` added: what the process printed, and the calls that reached the
/// service.
async fn report_while_overloaded(test: &str, claim: u32, args: &[&str]) -> (String, u32) {
    let database = Database::fresh(Engine::Sqlite, test)
        .await
        .expect("SQLite needs no server");
    let service = ContractService::start().await.expect("the service starts");
    service.overload_next_checks(u32::MAX).await;
    let contract = service.addr().to_string();
    let claim_arg = format!("{claim}:dana@example.com");
    let mut all = vec![
        "report",
        "--database",
        &database.url,
        "--contract",
        &contract,
    ];
    all.extend(args);
    all.push(&claim_arg);
    let portal = Portal::start(test, &all);
    let output = blocking(move || portal.wait_success()).await;
    (output, service.coverage_checks(ClaimId(claim)).await)
}

/// The file is what runs: `max = 1` in a copy given with `--config` makes two calls where the
/// shipped `max = 3` makes four (its pauses shortened, so that the test does not wait 7 s), and
/// the copy's breaker, open after one failure, ends the call after the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_portal_runs_the_policies_of_its_file() {
    let test = "the_portal_runs_the_policies_of_its_file";
    let fast = [
        ("base = \"1s\"", "base = \"20ms\""),
        ("jitter = 0.5", "jitter = \"none\""),
    ];

    let four = copy_with(&format!("{test}-max3"), &fast);
    let (output, calls) =
        report_while_overloaded(test, 4714, &["--config", &four.display().to_string()]).await;
    assert_eq!(calls, 4, "the shipped `max = 3`:\n{output}");
    assert!(
        output.starts_with(&format!(
            "Retry policies from {}: contract-service\n",
            four.display()
        )),
        "{output}"
    );
    assert!(output.contains("told: claim 4714 saved as job"), "{output}");

    let two = copy_with(
        &format!("{test}-max1"),
        &[fast[0], fast[1], ("max = 3", "max = 1")],
    );
    let (output, calls) =
        report_while_overloaded(test, 4715, &["--config", &two.display().to_string()]).await;
    assert_eq!(calls, 2, "`max = 1` in the file:\n{output}");
    assert!(output.contains("told: claim 4715 saved as job"), "{output}");

    let one = copy_with(
        &format!("{test}-breaker"),
        &[
            fast[0],
            fast[1],
            ("consecutive_failures = 5", "consecutive_failures = 1"),
        ],
    );
    let (output, calls) =
        report_while_overloaded(test, 4716, &["--config", &one.display().to_string()]).await;
    assert_eq!(
        calls, 1,
        "the file's breaker opens after one failure:\n{output}"
    );
    assert!(output.contains("told: claim 4716 saved as job"), "{output}");
}

/// Without `--config` the process reads the shipped file, and says so first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_config_the_shipped_file_runs() {
    let test = "without_config_the_shipped_file_runs";
    let database = Database::fresh(Engine::Sqlite, test)
        .await
        .expect("SQLite needs no server");
    let service = ContractService::start().await.expect("the service starts");
    let contract = service.addr().to_string();
    let args = [
        "report",
        "--database",
        &database.url,
        "--contract",
        &contract,
        "4711:alma@example.com",
    ];
    let portal = Portal::start(test, &args);
    let output = blocking(move || portal.wait_success()).await;
    assert_eq!(
        output,
        "Retry policies from examples/portal.toml (built in): contract-service\n    \
         claim 4711: attempt 1 at  0.00 s\n\
         told: claim 4711 is covered\n"
    );
}

/// A copy that breaks one of the attribute's rules stops the process before it serves anyone,
/// and the error names the file, the key and the rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_breaks_a_rule_is_refused_with_its_key() {
    let test = "a_file_that_breaks_a_rule_is_refused_with_its_key";
    let bad = copy_with(test, &[("max = 3", "max = 3\nattempts = 4")]);
    let database = Database::fresh(Engine::Sqlite, test)
        .await
        .expect("SQLite needs no server");
    let service = ContractService::start().await.expect("the service starts");
    let contract = service.addr().to_string();
    let config = bad.display().to_string();
    let args = [
        "report",
        "--database",
        &database.url,
        "--contract",
        &contract,
        "--config",
        &config,
        "4711:alma@example.com",
    ];
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_claims-portal"))
        .args(args)
        .output()
        .expect("claims-portal runs");
    let stderr = String::from_utf8_lossy(&child.stderr).into_owned();
    assert!(!child.status.success(), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "claims-portal: the retry policies in {config} are not valid: "
        )),
        "{stderr}"
    );
    assert!(stderr.contains("retry.contract-service"), "{stderr}");
    assert!(stderr.contains("`attempts`"), "{stderr}");
    assert_eq!(service.coverage_checks(ClaimId(4711)).await, 0);
}

//! `AWS_RETRY_MODE` / `AWS_MAX_ATTEMPTS` and the shared config file's `retry_mode` /
//! `max_attempts`, read as the AWS SDKs read them: a table over a map of variables (and real
//! files), and one test of the real environment in a child process.

// Helpers outside `#[test]` functions unwrap too: a test that fails should panic.
#![allow(clippy::unwrap_used)]

use retry_config::aws::{AwsRetry, RetryMode, Source};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

/// Environment variables, as pairs.
type Vars<'a> = Vec<(&'a str, &'a str)>;

/// A shared config file of this test's own.
fn file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("retry-config-aws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn read(vars: &[(&str, &str)]) -> Result<AwsRetry, retry_config::ConfigError> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    AwsRetry::from_vars(|name| vars.get(name).cloned())
}

const PROFILES: &str = "\
[default]
retry_mode = adaptive
max_attempts = 4

[profile batch]
retry_mode = legacy ; old SDKs
max_attempts = 10
s3 =
  max_attempts = 99

[profile broken]
max_attempts = 0
retry_mode = standard
";

#[test]
fn the_environment_then_the_profile_then_the_defaults() {
    let config = file("config", PROFILES);
    let config = config.to_str().unwrap();
    let missing = "/nonexistent/retry-config/aws/config";
    let profile = |name: &str| Source::Profile {
        file: PathBuf::from(config),
        profile: name.to_owned(),
    };
    use RetryMode::*;
    use Source::{Default, Environment};
    // (variables, mode, where from, attempts, where from)
    let cases: Vec<(Vars<'_>, RetryMode, Source, u32, Source)> = vec![
        // Nothing set, no file: the standard mode, 3 attempts.
        (
            vec![("AWS_CONFIG_FILE", missing)],
            Standard,
            Default,
            3,
            Default,
        ),
        (vec![], Standard, Default, 3, Default),
        // The environment, read as the SDKs read it: any case, spaces ignored.
        (
            vec![("AWS_RETRY_MODE", "standard"), ("AWS_MAX_ATTEMPTS", "5")],
            Standard,
            Environment,
            5,
            Environment,
        ),
        (
            vec![
                ("AWS_RETRY_MODE", " Adaptive "),
                ("AWS_CONFIG_FILE", missing),
            ],
            Adaptive,
            Environment,
            3,
            Default,
        ),
        (
            vec![("AWS_RETRY_MODE", "LEGACY"), ("AWS_CONFIG_FILE", missing)],
            Legacy,
            Environment,
            3,
            Default,
        ),
        (
            vec![("AWS_MAX_ATTEMPTS", "1"), ("AWS_CONFIG_FILE", missing)],
            Standard,
            Default,
            1,
            Environment,
        ),
        // The default profile of the file.
        (
            vec![("AWS_CONFIG_FILE", config)],
            Adaptive,
            profile("default"),
            4,
            profile("default"),
        ),
        // Each setting on its own: the environment's attempts, the profile's mode.
        (
            vec![("AWS_CONFIG_FILE", config), ("AWS_MAX_ATTEMPTS", "6")],
            Adaptive,
            profile("default"),
            6,
            Environment,
        ),
        (
            vec![("AWS_CONFIG_FILE", config), ("AWS_RETRY_MODE", "standard")],
            Standard,
            Environment,
            4,
            profile("default"),
        ),
        // A named profile, `[profile batch]`; its sub-section's keys are not its own.
        (
            vec![("AWS_CONFIG_FILE", config), ("AWS_PROFILE", "batch")],
            Legacy,
            profile("batch"),
            10,
            profile("batch"),
        ),
        // A profile the file does not have: the defaults.
        (
            vec![("AWS_CONFIG_FILE", config), ("AWS_PROFILE", "absent")],
            Standard,
            Default,
            3,
            Default,
        ),
        // The environment set for both: the file is not read, so its broken profile is no error.
        (
            vec![
                ("AWS_CONFIG_FILE", config),
                ("AWS_PROFILE", "broken"),
                ("AWS_RETRY_MODE", "adaptive"),
                ("AWS_MAX_ATTEMPTS", "2"),
            ],
            Adaptive,
            Environment,
            2,
            Environment,
        ),
    ];
    for (vars, mode, mode_from, attempts, attempts_from) in cases {
        let aws = read(&vars).unwrap_or_else(|e| panic!("{vars:?}: {e}"));
        assert_eq!(aws.mode(), mode, "{vars:?}");
        assert_eq!(aws.mode_source(), &mode_from, "{vars:?}");
        assert_eq!(aws.max_attempts(), attempts, "{vars:?}");
        assert_eq!(aws.max_attempts_source(), &attempts_from, "{vars:?}");
        // The preset: `max_attempts` counts the first attempt.
        assert_eq!(
            aws.aws2026().policy().get_max_attempts(),
            attempts,
            "{vars:?}"
        );
        assert_eq!(aws.gate().is_some(), mode == Adaptive, "{vars:?}");
    }
}

#[test]
fn the_file_under_home_when_no_file_is_named() {
    let home = std::env::temp_dir().join(format!("retry-config-aws-home-{}", std::process::id()));
    std::fs::create_dir_all(home.join(".aws")).unwrap();
    std::fs::write(
        home.join(".aws").join("config"),
        "[default]\nmax_attempts = 8\n",
    )
    .unwrap();
    let aws = read(&[("HOME", home.to_str().unwrap())]).unwrap();
    assert_eq!((aws.mode(), aws.max_attempts()), (RetryMode::Standard, 8));
}

#[test]
fn invalid_values_are_errors_that_name_the_variable_and_the_value() {
    let config = file("broken", PROFILES);
    let config = config.to_str().unwrap();
    let cases: Vec<(Vars<'_>, String, &str)> = vec![
        (
            vec![("AWS_RETRY_MODE", "fast")],
            "AWS_RETRY_MODE".into(),
            "\"fast\"",
        ),
        (
            vec![("AWS_RETRY_MODE", "")],
            "AWS_RETRY_MODE".into(),
            "`standard`, `adaptive` or `legacy`",
        ),
        (
            vec![("AWS_MAX_ATTEMPTS", "0")],
            "AWS_MAX_ATTEMPTS".into(),
            "above 0",
        ),
        (
            vec![("AWS_MAX_ATTEMPTS", "-1")],
            "AWS_MAX_ATTEMPTS".into(),
            "\"-1\"",
        ),
        (
            vec![("AWS_MAX_ATTEMPTS", "three")],
            "AWS_MAX_ATTEMPTS".into(),
            "\"three\"",
        ),
        (
            vec![("AWS_MAX_ATTEMPTS", "2.5")],
            "AWS_MAX_ATTEMPTS".into(),
            "whole number",
        ),
        (
            vec![("AWS_MAX_ATTEMPTS", "4294967296")],
            "AWS_MAX_ATTEMPTS".into(),
            "\"4294967296\"",
        ),
        (
            vec![("AWS_MAX_ATTEMPTS", "")],
            "AWS_MAX_ATTEMPTS".into(),
            "counts the first attempt",
        ),
        // In the file: the file, the profile and the key.
        (
            vec![("AWS_CONFIG_FILE", config), ("AWS_PROFILE", "broken")],
            format!("{config} [broken] max_attempts"),
            "\"0\"",
        ),
    ];
    for (vars, key, fragment) in cases {
        let error = read(&vars).unwrap_err();
        assert_eq!(error.key(), Some(key.as_str()), "{vars:?}: {error}");
        assert!(error.to_string().contains(fragment), "{vars:?}: {error}");
    }
}

/// The child of [`the_real_environment_is_read`]: nothing unless its parent started it.
#[test]
fn child_reads_the_real_environment() {
    if std::env::var_os("RETRY_CONFIG_AWS_CHILD").is_none() {
        return;
    }
    let aws = AwsRetry::from_env().expect("valid settings");
    assert_eq!(aws.mode(), RetryMode::Adaptive);
    assert_eq!(aws.mode_source(), &Source::Environment);
    assert_eq!(aws.max_attempts(), 7);
    assert_eq!(aws.aws2026().policy().get_max_attempts(), 7);
    println!("child: read AWS_RETRY_MODE and AWS_MAX_ATTEMPTS");
}

/// The process's own environment, in a child process (tests run in parallel threads that
/// share one environment).
#[test]
fn the_real_environment_is_read() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_reads_the_real_environment", "--nocapture"])
        .env("RETRY_CONFIG_AWS_CHILD", "1")
        .env("AWS_RETRY_MODE", "adaptive")
        .env("AWS_MAX_ATTEMPTS", "7")
        .env("AWS_CONFIG_FILE", "/nonexistent/retry-config/aws/config")
        .env_remove("AWS_PROFILE")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    // The child ran its assertions (it returns at once without the variable).
    assert!(stdout.contains("child: read AWS_RETRY_MODE"), "{stdout}");
}

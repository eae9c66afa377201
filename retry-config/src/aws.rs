//! The AWS conventions: `AWS_RETRY_MODE` and `AWS_MAX_ATTEMPTS`, or the shared config file's
//! `retry_mode` and `max_attempts`, read as the AWS SDKs read them, for the runtime's `aws2026`
//! preset ([`Aws2026Standard`]).

use crate::ConfigError;
use retry_runtime::{AdmissionGate, Aws2026, Aws2026Standard, ClientRateLimit, RetryQuota};
use std::path::PathBuf;

/// The environment variable of the retry mode.
pub const AWS_RETRY_MODE: &str = "AWS_RETRY_MODE";
/// The environment variable of the attempt limit.
pub const AWS_MAX_ATTEMPTS: &str = "AWS_MAX_ATTEMPTS";
/// The environment variable that names the shared config file (`~/.aws/config` without it).
pub const AWS_CONFIG_FILE: &str = "AWS_CONFIG_FILE";
/// The environment variable that names the profile (`default` without it).
pub const AWS_PROFILE: &str = "AWS_PROFILE";

/// The SDKs' retry modes (`retry_mode`, `AWS_RETRY_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryMode {
    /// `standard`: the standard set of retried errors, a retry quota, 3 attempts unless
    /// `max_attempts` says otherwise. The default here, as in the Rust, Go v2 and JavaScript v3
    /// SDKs.
    Standard,
    /// `adaptive`: the standard mode and a client-side rate limiter
    /// ([`AwsRetry::gate`]).
    Adaptive,
    /// `legacy`: each SDK's own older rules. This crate has no legacy mode of its own: it is read
    /// (it is a valid value, and a file shared with other SDKs may hold it) and runs the
    /// standard mode, with 3 attempts unless `max_attempts` says otherwise.
    Legacy,
}

/// Where a setting was read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// Neither the environment nor the profile had it: the default.
    Default,
    /// The environment variable.
    Environment,
    /// The shared config file's profile: the file, and the profile's name.
    Profile {
        /// The file read.
        file: PathBuf,
        /// The profile read.
        profile: String,
    },
}

/// The retry settings the AWS SDKs would read: `AWS_RETRY_MODE` / `AWS_MAX_ATTEMPTS` first, then
/// the active profile's `retry_mode` / `max_attempts` in the shared config file
/// (`AWS_CONFIG_FILE`, else `~/.aws/config`; the profile `AWS_PROFILE`, else `default`), each
/// setting on its own; `max_attempts` counts the first attempt; an invalid value is an error
/// that names the variable (or the file, the profile and the key) and the value.
///
/// ```
/// use retry_config::aws::{AwsRetry, RetryMode};
/// use std::collections::HashMap;
///
/// let env = HashMap::from([("AWS_RETRY_MODE", "adaptive"), ("AWS_MAX_ATTEMPTS", "5")]);
/// let aws = AwsRetry::from_vars(|name| env.get(name).map(|v| v.to_string()))?;
/// assert_eq!((aws.mode(), aws.max_attempts()), (RetryMode::Adaptive, 5));
/// let standard = aws.aws2026(); // the `aws2026` preset with 5 attempts
/// assert_eq!(standard.policy().get_max_attempts(), 5);
/// assert!(aws.gate().is_some()); // adaptive: the client rate limiter
///
/// let error = AwsRetry::from_vars(|name| (name == "AWS_MAX_ATTEMPTS").then(|| "0".into())).unwrap_err();
/// assert_eq!(error.key(), Some("AWS_MAX_ATTEMPTS"));
/// # Ok::<(), retry_config::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsRetry {
    mode: RetryMode,
    mode_from: Source,
    max_attempts: Option<u32>,
    max_attempts_from: Source,
}

impl AwsRetry {
    /// Reads the process's environment and, for what it does not set, the shared config file.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// Reads the variables `var` gives (the environment, or a test's map) and, for what they do
    /// not set, the shared config file they name (`AWS_CONFIG_FILE`; else `config` under
    /// `.aws` in `HOME`, or `USERPROFILE` on Windows). A missing file is no settings, as for
    /// the SDKs; a file that exists and cannot be read is an error.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let env_mode = var(AWS_RETRY_MODE);
        let env_attempts = var(AWS_MAX_ATTEMPTS);
        let profile = if env_mode.is_none() || env_attempts.is_none() {
            read_profile(&var)?
        } else {
            None
        };
        let from_profile = |key: &str| {
            profile.as_ref().and_then(|(file, name, pairs)| {
                pairs
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, value)| (value.clone(), file, name))
            })
        };
        let (mode, mode_from) = match (env_mode, from_profile("retry_mode")) {
            (Some(value), _) => (mode(&value, AWS_RETRY_MODE)?, Source::Environment),
            (None, Some((value, file, name))) => {
                let key = format!("{} [{name}] retry_mode", file.display());
                (mode(&value, &key)?, profile_source(file, name))
            }
            (None, None) => (RetryMode::Standard, Source::Default),
        };
        let (max_attempts, max_attempts_from) = match (env_attempts, from_profile("max_attempts")) {
            (Some(value), _) => (
                Some(attempts(&value, AWS_MAX_ATTEMPTS)?),
                Source::Environment,
            ),
            (None, Some((value, file, name))) => {
                let key = format!("{} [{name}] max_attempts", file.display());
                (Some(attempts(&value, &key)?), profile_source(file, name))
            }
            (None, None) => (None, Source::Default),
        };
        Ok(AwsRetry {
            mode,
            mode_from,
            max_attempts,
            max_attempts_from,
        })
    }

    /// The retry mode.
    pub fn mode(&self) -> RetryMode {
        self.mode
    }

    /// Where the mode was read.
    pub fn mode_source(&self) -> &Source {
        &self.mode_from
    }

    /// The attempt limit, the first attempt included: the one read, else 3 (the standard and
    /// adaptive modes' default).
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts.unwrap_or(3)
    }

    /// Where the attempt limit was read.
    pub fn max_attempts_source(&self) -> &Source {
        &self.max_attempts_from
    }

    /// The runtime's `aws2026` preset with these settings: [`Aws2026::new`] with
    /// [`max_attempts`](Self::max_attempts), and a full quota of its own. Give it to a door with
    /// `aws2026 = ...` (the attribute, `Retrier::aws2026`, `HttpRetry::aws2026`); keep it in a
    /// `static` or an `Arc`, so that its quota is shared by the calls to one service.
    pub fn aws2026(&self) -> Aws2026Standard {
        Aws2026Standard::with(
            Aws2026::new().max_attempts(self.max_attempts()),
            RetryQuota::new(),
        )
    }

    /// The adaptive mode's client-side rate limiter (botocore's CUBIC limiter,
    /// [`AdmissionGate::rate_limit`]), for `gate = ...`; `None` in the other modes.
    pub fn gate(&self) -> Option<AdmissionGate> {
        (self.mode == RetryMode::Adaptive)
            .then(|| AdmissionGate::rate_limit(ClientRateLimit::new()))
    }
}

fn profile_source(file: &std::path::Path, name: &str) -> Source {
    Source::Profile {
        file: file.to_path_buf(),
        profile: name.to_owned(),
    }
}

/// A mode as the SDKs read it: surrounding spaces ignored, any case.
fn mode(value: &str, key: &str) -> Result<RetryMode, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "standard" => Ok(RetryMode::Standard),
        "adaptive" => Ok(RetryMode::Adaptive),
        "legacy" => Ok(RetryMode::Legacy),
        _ => Err(ConfigError::at(
            key,
            format!("expected a retry mode, `standard`, `adaptive` or `legacy`; found {value:?}"),
        )),
    }
}

/// An attempt limit: a whole number above 0, the first attempt included.
fn attempts(value: &str, key: &str) -> Result<u32, ConfigError> {
    match value.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ConfigError::at(
            key,
            format!(
                "expected the number of attempts, a whole number above 0 that counts the first attempt (`3` is a call and 2 retries); found {value:?}"
            ),
        )),
    }
}

/// The file, the profile's name and its `key = value` pairs, if the file exists and has the
/// profile.
type Profile = (PathBuf, String, Vec<(String, String)>);

fn read_profile(var: &impl Fn(&str) -> Option<String>) -> Result<Option<Profile>, ConfigError> {
    let file = match var(AWS_CONFIG_FILE) {
        Some(file) => PathBuf::from(file),
        None => match var("HOME").or_else(|| var("USERPROFILE")) {
            Some(home) => PathBuf::from(home).join(".aws").join("config"),
            None => return Ok(None),
        },
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(ConfigError::at(
                file.display().to_string(),
                format!("the shared config file cannot be read: {error}"),
            ));
        }
    };
    let name = var(AWS_PROFILE).unwrap_or_else(|| "default".to_owned());
    Ok(Some((file, name.clone(), profile(&text, &name))))
}

/// The `key = value` pairs of profile `name` in a shared config file: `[default]` (or
/// `[profile default]`) for the default profile, `[profile NAME]` for the others; comments
/// (`#`, `;`) and the indented lines of sub-sections (`s3 =` and what follows it) skipped. When
/// a key is given twice, the later one counts.
fn profile(text: &str, name: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let indented = line.starts_with([' ', '\t']);
        let line = line.trim();
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(header) = line.strip_prefix('[') {
            let header = header.split(']').next().unwrap_or_default().trim();
            let section = match header.strip_prefix("profile") {
                Some(rest) if rest.starts_with([' ', '\t']) => rest.trim(),
                _ => header,
            };
            inside = section == name;
            continue;
        }
        if !inside || indented {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            let value = value.trim();
            // An inline comment after a value (`3 # three`), as the SDKs' parsers drop it.
            let value = value
                .split_once(" #")
                .or_else(|| value.split_once(" ;"))
                .map_or(value, |(value, _)| value)
                .trim();
            let key = key.trim().to_owned();
            pairs.retain(|(k, _)| *k != key);
            pairs.push((key, value.to_owned()));
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::profile;

    #[test]
    fn profiles_are_found_by_their_header() {
        let text = "\
[default]
retry_mode = standard
max_attempts = 2

[profile fast]
# a comment
retry_mode=adaptive
max_attempts = 7 # seven
s3 =
  max_attempts = 99
";
        let pairs = |name| profile(text, name);
        assert_eq!(
            pairs("default"),
            [
                ("retry_mode".into(), "standard".into()),
                ("max_attempts".into(), "2".into())
            ]
        );
        assert_eq!(
            pairs("fast"),
            [
                ("retry_mode".into(), "adaptive".into()),
                ("max_attempts".into(), "7".into()),
                ("s3".into(), String::new())
            ]
        );
        assert!(pairs("missing").is_empty());
    }
}

//! The one error of this crate: a configuration that failed validation, with the key, the rule
//! and the value.

use std::fmt;

/// A configuration that failed validation: where (`retry.contract-service.breaker`), and the
/// rule and the value in the grammar's own words, as the attribute's compile errors give them.
/// A registry refuses such a configuration whole: the policies that ran before run on.
///
/// ```
/// use retry_config::Config;
///
/// let error = Config::from_toml("[retry.\"contract service\"]\nmax = 3").unwrap_err();
/// assert!(error.to_string().contains("`retry.contract service`"), "{error}");
/// assert_eq!(error.key(), Some("retry.contract service"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    key: Option<String>,
    message: String,
}

impl ConfigError {
    /// An error at `key` (a dotted path from the file's root: `retry.contract-service.base`).
    pub(crate) fn at(key: impl Into<String>, message: impl fmt::Display) -> Self {
        ConfigError {
            key: Some(key.into()),
            message: message.to_string(),
        }
    }

    /// An error of a file's format (TOML, JSON, YAML, ...), whose message names the line and the
    /// key itself: what a format of your own gives [`Registry::reload_with`](crate::Registry::reload_with).
    pub fn new(message: impl fmt::Display) -> Self {
        ConfigError {
            key: None,
            message: message.to_string(),
        }
    }

    /// The dotted path of the key the error is about, when the registry knows it (a file that
    /// is not valid TOML or JSON at all has none: its message gives the line).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The rule broken and the value found, in the grammar's words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "`{key}`: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

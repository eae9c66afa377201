//! What is wrong with a service config: each problem with the path of its field and the rule.

use std::fmt;

/// One problem in a service config: where (`methodConfig[0].retryPolicy.maxAttempts`) and what
/// rule it breaks (`must be at least 2, got 1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    path: String,
    rule: String,
}

impl FieldError {
    pub(crate) fn new(path: impl Into<String>, rule: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            rule: rule.into(),
        }
    }

    /// The field, as a JSON path from the top of the service config:
    /// `methodConfig[0].retryPolicy.maxAttempts`, `retryThrottling.tokenRatio`; empty for the
    /// document itself (not JSON, or not an object).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The rule the value breaks, with the value: `must be at least 2, got 1`.
    pub fn rule(&self) -> &str {
        &self.rule
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.rule)
        } else {
            write!(f, "{}: {}", self.path, self.rule)
        }
    }
}

/// A service config that cannot be used, with every problem found (not only the first, so that
/// one round of fixes is enough), in document order.
///
/// Its `Display` is the problems joined by `; `:
///
/// ```
/// use retry_grpc::ServiceConfig;
///
/// let json = r#"{"methodConfig": [{"name": [{"service": "pkg.Echo"}],
///     "retryPolicy": {"maxAttempts": 1, "initialBackoff": "0.1s", "maxBackoff": "1s",
///                     "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#;
/// let error = ServiceConfig::from_json(json).unwrap_err();
/// assert_eq!(error.to_string(), "methodConfig[0].retryPolicy.maxAttempts: must be at least 2, got 1");
/// assert_eq!(error.errors()[0].path(), "methodConfig[0].retryPolicy.maxAttempts");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    errors: Vec<FieldError>,
}

impl ConfigError {
    pub(crate) fn new(errors: Vec<FieldError>) -> Self {
        debug_assert!(!errors.is_empty());
        ConfigError { errors }
    }

    /// Every problem found, in document order; never empty.
    pub fn errors(&self) -> &[FieldError] {
        &self.errors
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

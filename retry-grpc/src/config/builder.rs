//! Builders for a config made in code; `build` checks the rules the JSON is checked with, and
//! names the fields as the JSON does.

use super::parse::{self, RawHedging, RawRetry, given};
use super::{
    CallPolicy, ConfigError, FieldError, HedgingPolicy, MAX_ATTEMPTS_LIMIT, MethodConfig,
    MethodName, RetryPolicy, RetryThrottling, ServiceConfig,
};
use crate::CodeSet;
use std::time::Duration;
use tonic::Code;

/// Builds a [`RetryPolicy`]; every field is required, as in the JSON.
///
/// ```
/// use retry_grpc::RetryPolicy;
/// use std::time::Duration;
///
/// let error = RetryPolicy::builder()
///     .max_attempts(1)
///     .initial_backoff(Duration::ZERO)
///     .backoff_multiplier(2.0)
///     .build()
///     .unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "retryPolicy.maxAttempts: must be at least 2, got 1; \
///      retryPolicy.initialBackoff: must be greater than 0, got \"0s\"; \
///      retryPolicy.maxBackoff: is required: a duration like \"0.1s\"; \
///      retryPolicy.retryableStatusCodes: is required: the codes to retry, like [\"UNAVAILABLE\"]"
/// );
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct RetryPolicyBuilder {
    max_attempts: Option<u32>,
    initial_backoff: Option<Duration>,
    max_backoff: Option<Duration>,
    backoff_multiplier: Option<f64>,
    retryable_status_codes: Option<CodeSet>,
    limit: Option<u32>,
}

impl RetryPolicyBuilder {
    /// `maxAttempts`: at least 2, the first attempt included; capped at 5.
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// `initialBackoff`, greater than 0.
    pub fn initial_backoff(mut self, initial_backoff: Duration) -> Self {
        self.initial_backoff = Some(initial_backoff);
        self
    }

    /// `maxBackoff`, greater than 0.
    pub fn max_backoff(mut self, max_backoff: Duration) -> Self {
        self.max_backoff = Some(max_backoff);
        self
    }

    /// `backoffMultiplier`, greater than 0.
    pub fn backoff_multiplier(mut self, backoff_multiplier: f64) -> Self {
        self.backoff_multiplier = Some(backoff_multiplier);
        self
    }

    /// `retryableStatusCodes`: not empty, without `OK`.
    pub fn retryable_status_codes(mut self, codes: impl IntoIterator<Item = Code>) -> Self {
        self.retryable_status_codes = Some(CodeSet::from_codes(codes));
        self
    }

    /// The cap on `maxAttempts` (5 unless set; at least 2).
    pub fn max_attempts_limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The policy, or every rule it breaks.
    pub fn build(self) -> Result<RetryPolicy, ConfigError> {
        let raw = RawRetry {
            max_attempts: given(self.max_attempts.map(i128::from)),
            initial_backoff: given(self.initial_backoff),
            max_backoff: given(self.max_backoff),
            backoff_multiplier: given(self.backoff_multiplier),
            retryable_status_codes: given(self.retryable_status_codes),
        };
        let mut errors = Vec::new();
        let limit = self.limit.unwrap_or(MAX_ATTEMPTS_LIMIT).max(2);
        parse::check_retry(raw, "retryPolicy", limit, &mut errors)
            .ok_or_else(|| ConfigError::new(errors))
    }
}

/// Builds a [`HedgingPolicy`]; `maxAttempts` is required, `hedgingDelay` is 0 and
/// `nonFatalStatusCodes` empty unless set.
///
/// ```
/// use retry_grpc::HedgingPolicy;
/// use std::time::Duration;
/// use tonic::Code;
///
/// let policy = HedgingPolicy::builder()
///     .max_attempts(3)
///     .hedging_delay(Duration::from_millis(50))
///     .non_fatal_status_codes([Code::Unavailable])
///     .build()?;
/// assert_eq!(policy.max_attempts(), 3);
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct HedgingPolicyBuilder {
    max_attempts: Option<u32>,
    hedging_delay: Option<Duration>,
    non_fatal_status_codes: Option<CodeSet>,
    limit: Option<u32>,
}

impl HedgingPolicyBuilder {
    /// `maxAttempts`: at least 2 copies, the first included; capped at 5.
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = Some(max_attempts);
        self
    }

    /// `hedgingDelay`: the time between copies.
    pub fn hedging_delay(mut self, hedging_delay: Duration) -> Self {
        self.hedging_delay = Some(hedging_delay);
        self
    }

    /// `nonFatalStatusCodes`: the codes after which the other copies go on (without `OK`).
    pub fn non_fatal_status_codes(mut self, codes: impl IntoIterator<Item = Code>) -> Self {
        self.non_fatal_status_codes = Some(CodeSet::from_codes(codes));
        self
    }

    /// The cap on `maxAttempts` (5 unless set; at least 2).
    pub fn max_attempts_limit(mut self, limit: u32) -> Self {
        self.limit = Some(limit);
        self
    }

    /// The policy, or every rule it breaks.
    pub fn build(self) -> Result<HedgingPolicy, ConfigError> {
        let raw = RawHedging {
            max_attempts: given(self.max_attempts.map(i128::from)),
            hedging_delay: given(self.hedging_delay),
            non_fatal_status_codes: given(self.non_fatal_status_codes),
        };
        let mut errors = Vec::new();
        let limit = self.limit.unwrap_or(MAX_ATTEMPTS_LIMIT).max(2);
        parse::check_hedging(raw, "hedgingPolicy", limit, &mut errors)
            .ok_or_else(|| ConfigError::new(errors))
    }
}

/// Builds a [`MethodConfig`].
///
/// ```
/// use retry_grpc::{HedgingPolicy, MethodConfig, MethodName, RetryPolicy};
/// use std::time::Duration;
/// use tonic::Code;
///
/// let retry = RetryPolicy::builder()
///     .max_attempts(3)
///     .initial_backoff(Duration::from_millis(10))
///     .max_backoff(Duration::from_millis(100))
///     .backoff_multiplier(2.0)
///     .retryable_status_codes([Code::Unavailable])
///     .build()?;
/// let hedging = HedgingPolicy::builder().max_attempts(3).build()?;
/// let error = MethodConfig::builder()
///     .name(MethodName::service("pkg.Echo"))
///     .retry_policy(retry)
///     .hedging_policy(hedging)
///     .build()
///     .unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "methodConfig: has both `retryPolicy` and `hedgingPolicy`; a method config may have one of them (gRFC A6)"
/// );
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct MethodConfigBuilder {
    names: Vec<MethodName>,
    retry: Option<RetryPolicy>,
    hedging: Option<HedgingPolicy>,
    timeout: Option<Duration>,
    wait_for_ready: Option<bool>,
    max_request_message_bytes: Option<u64>,
    max_response_message_bytes: Option<u64>,
}

impl MethodConfigBuilder {
    /// Adds a name the config applies to.
    pub fn name(mut self, name: MethodName) -> Self {
        self.names.push(name);
        self
    }

    /// The retry policy.
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// The hedging policy.
    pub fn hedging_policy(mut self, policy: HedgingPolicy) -> Self {
        self.hedging = Some(policy);
        self
    }

    /// The deadline of the whole call.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// `waitForReady`.
    pub fn wait_for_ready(mut self, wait_for_ready: bool) -> Self {
        self.wait_for_ready = Some(wait_for_ready);
        self
    }

    /// `maxRequestMessageBytes`.
    pub fn max_request_message_bytes(mut self, bytes: u64) -> Self {
        self.max_request_message_bytes = Some(bytes);
        self
    }

    /// `maxResponseMessageBytes`.
    pub fn max_response_message_bytes(mut self, bytes: u64) -> Self {
        self.max_response_message_bytes = Some(bytes);
        self
    }

    /// The method config; refused with both policies.
    pub fn build(self) -> Result<MethodConfig, ConfigError> {
        let policy = match (self.retry, self.hedging) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::new(vec![FieldError::new(
                    "methodConfig",
                    parse::both_policies_rule(),
                )]));
            }
            (Some(retry), None) => Some(CallPolicy::Retry(retry)),
            (None, Some(hedging)) => Some(CallPolicy::Hedging(hedging)),
            (None, None) => None,
        };
        Ok(MethodConfig {
            names: self.names,
            policy,
            timeout: self.timeout,
            wait_for_ready: self.wait_for_ready,
            max_request_message_bytes: self.max_request_message_bytes,
            max_response_message_bytes: self.max_response_message_bytes,
        })
    }
}

/// Builds a [`ServiceConfig`] (see [`ServiceConfig::builder`]).
#[derive(Clone, Debug, Default)]
#[must_use]
pub struct ServiceConfigBuilder {
    method_configs: Vec<MethodConfig>,
    retry_throttling: Option<RetryThrottling>,
}

impl ServiceConfigBuilder {
    /// Adds a method config.
    pub fn method_config(mut self, config: MethodConfig) -> Self {
        self.method_configs.push(config);
        self
    }

    /// The retry throttling.
    pub fn retry_throttling(mut self, throttling: RetryThrottling) -> Self {
        self.retry_throttling = Some(throttling);
        self
    }

    /// The config; refused when a name is given twice.
    pub fn build(self) -> Result<ServiceConfig, ConfigError> {
        ServiceConfig::new(self.method_configs, self.retry_throttling)
    }
}

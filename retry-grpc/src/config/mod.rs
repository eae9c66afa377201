//! The standard gRPC service config: `methodConfig` (names, `retryPolicy`, `hedgingPolicy`,
//! `timeout`, ...) and `retryThrottling`, read from JSON with the official implementations'
//! rules, or built in code.
//!
//! The JSON is the one gRPC's documents define (gRFC A6, `doc/service_config.md`,
//! `grpc/service_config/service_config.proto`), so the file a Go, Java or C++ client reads
//! works unchanged:
//!
//! ```
//! use retry_grpc::{CallPolicy, ServiceConfig};
//! use std::time::Duration;
//! use tonic::Code;
//!
//! let config: ServiceConfig = r#"{
//!   "methodConfig": [{
//!     "name": [{"service": "pkg.Echo"}],
//!     "timeout": "2s",
//!     "retryPolicy": {
//!       "maxAttempts": 4,
//!       "initialBackoff": "0.1s",
//!       "maxBackoff": "1s",
//!       "backoffMultiplier": 2,
//!       "retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
//!     }
//!   }],
//!   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
//! }"#.parse()?;
//!
//! let method = config.method_config("/pkg.Echo/Say").expect("the service's config");
//! assert_eq!(method.timeout(), Some(Duration::from_secs(2)));
//! let Some(CallPolicy::Retry(policy)) = method.policy() else { unreachable!() };
//! assert_eq!(policy.max_attempts(), 4);
//! assert!(policy.retryable_status_codes().contains(Code::Unavailable));
//! assert!(config.method_config("/pkg.Other/Say").is_none());
//! # Ok::<(), retry_grpc::ConfigError>(())
//! ```
//!
//! # The rules
//!
//! Each rule is the official implementations' (grpc-go's `service_config.go`, C-core's
//! `retry_service_config.cc` and `service_config_impl.cc`, grpc-java's `ServiceConfigUtil` and
//! `ManagedChannelServiceConfig`); where they differ, the column says which this crate follows.
//!
//! | field | rule |
//! |---|---|
//! | the document | a JSON object; fields this crate does not know (`loadBalancingConfig`, `healthCheckConfig`, ...) are ignored, as every implementation ignores what it does not use |
//! | every object, anywhere in the document | a key at most once: `"methodConfig"` given twice is refused with the key's path (`methodConfig: duplicate key: ...`), as C-core refuses it, rather than keeping the last and dropping the first without a word (what `serde_json`, grpc-go and JavaScript's `JSON.parse` do) |
//! | `methodConfig[i].name` | a list of `{service, method}`; `""`, `null` and absent are the same; `method` without `service` is refused; a name may appear once in the whole config (C-core, Java; grpc-go refuses it too); a method config without names applies to nothing (as in Go and Java) |
//! | `retryPolicy` and `hedgingPolicy` | at most one of them per method config (A6; a `oneof` in `service_config.proto`) |
//! | `maxAttempts` (both policies) | an integer, at least 2; above 5 it is capped at 5 (A6's client-side limit; [`ServiceConfig::from_json_with_limit`] changes the limit, as grpc-java's `maxRetryAttempts` does), however large: `1e20` is 5 too, as A6 lets a client treat any larger value as its limit, where C-core refuses a value beyond its 32-bit integer (its [`requested_max_attempts`](RetryPolicy::requested_max_attempts) is then `u32::MAX`) |
//! | `initialBackoff`, `maxBackoff` | required durations (`"0.1s"`), greater than 0 |
//! | `backoffMultiplier` | a required number greater than 0 |
//! | `retryableStatusCodes` | required and non-empty; names (`"UNAVAILABLE"`, exact case, as C-core and Java compare them) or numbers 0–16 (as grpc-java accepts them); `OK` is refused (Java) |
//! | `hedgingDelay` | a duration, 0 or more; absent means 0 (A6: "set this to 0s, or leave unset") |
//! | `nonFatalStatusCodes` | optional, may be empty (grpc-java and `service_config.proto`; A6's comment calls it required, no implementation enforces it); no `OK` |
//! | `timeout` | a duration, 0 or more |
//! | `waitForReady` | a boolean |
//! | `maxRequestMessageBytes`, `maxResponseMessageBytes` | integers, 0 or more |
//! | `retryThrottling.maxTokens` | a required integer in (0, 1000] (`service_config.proto`'s range; grpc-go refuses values outside it) |
//! | `retryThrottling.tokenRatio` | a required number greater than 0, read to 3 decimals as C-core reads it (digits past the third are dropped, so `0.0001` is 0 and refused) |
//!
//! Integers and numbers may also be written as strings (`"4"`), as the protobuf JSON mapping
//! allows and C-core accepts. `null` is the same as absent everywhere.
//!
//! # Which method config applies
//!
//! The most specific name wins ([`ServiceConfig::method_config`]): the exact
//! `service/method`, else the service's (`{"service": "pkg.Echo"}`), else the default (a name
//! with neither, `{}`), else none: no retries, no hedging, no timeout from the config.

mod builder;
mod error;
mod json;
mod parse;
mod strict;

pub use builder::{
    HedgingPolicyBuilder, MethodConfigBuilder, RetryPolicyBuilder, ServiceConfigBuilder,
};
pub use error::{ConfigError, FieldError};

use crate::CodeSet;
use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A6's client-side limit on `maxAttempts`: larger values are treated as 5.
pub const MAX_ATTEMPTS_LIMIT: u32 = 5;

/// The largest `retryThrottling.maxTokens`.
pub const MAX_TOKENS_LIMIT: u32 = 1000;

/// A service config: the method configs and the retry throttling of one server name.
///
/// Read it from JSON ([`from_json`](Self::from_json), [`FromStr`], serde's `Deserialize`) or
/// build it ([`builder`](Self::builder)); both check the same rules ([module docs](self)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceConfig {
    method_configs: Vec<MethodConfig>,
    retry_throttling: Option<RetryThrottling>,
    /// From each name's key (`MethodName::key`) to its method config.
    index: HashMap<String, usize>,
}

impl ServiceConfig {
    /// Reads a service config from its JSON text, capping `maxAttempts` at
    /// [`MAX_ATTEMPTS_LIMIT`].
    ///
    /// ```
    /// use retry_grpc::ServiceConfig;
    ///
    /// let error = ServiceConfig::from_json(r#"{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}"#)
    ///     .unwrap_err();
    /// assert_eq!(error.to_string(), "retryThrottling.maxTokens: must be greater than 0, got 0");
    /// ```
    pub fn from_json(json: &str) -> Result<Self, ConfigError> {
        Self::from_json_with_limit(json, MAX_ATTEMPTS_LIMIT)
    }

    /// [`from_json`](Self::from_json) with another cap on `maxAttempts` (at least 2), as
    /// grpc-java's `ManagedChannelBuilder::maxRetryAttempts` sets it.
    pub fn from_json_with_limit(json: &str, max_attempts_limit: u32) -> Result<Self, ConfigError> {
        // `serde_json::from_str`, with the check for duplicate keys.
        let mut deserializer = serde_json::Deserializer::from_str(json);
        let read = strict::read(&mut deserializer).and_then(|read| {
            deserializer.end()?;
            Ok(read)
        });
        let (value, duplicates) = read.map_err(|error| {
            ConfigError::new(vec![FieldError::new(
                "",
                format!("not valid JSON: {error}"),
            )])
        })?;
        if !duplicates.is_empty() {
            return Err(ConfigError::new(duplicates));
        }
        Self::from_value_with_limit(&value, max_attempts_limit)
    }

    /// Reads a service config from a JSON value.
    pub fn from_value(value: &serde_json::Value) -> Result<Self, ConfigError> {
        Self::from_value_with_limit(value, MAX_ATTEMPTS_LIMIT)
    }

    /// [`from_value`](Self::from_value) with another cap on `maxAttempts`.
    pub fn from_value_with_limit(
        value: &serde_json::Value,
        max_attempts_limit: u32,
    ) -> Result<Self, ConfigError> {
        parse::service_config(value, max_attempts_limit.max(2))
    }

    /// A builder, for a config made in code.
    ///
    /// ```
    /// use retry_grpc::{MethodConfig, MethodName, RetryPolicy, RetryThrottling, ServiceConfig};
    /// use std::time::Duration;
    /// use tonic::Code;
    ///
    /// let config = ServiceConfig::builder()
    ///     .method_config(
    ///         MethodConfig::builder()
    ///             .name(MethodName::service("pkg.Echo"))
    ///             .retry_policy(
    ///                 RetryPolicy::builder()
    ///                     .max_attempts(4)
    ///                     .initial_backoff(Duration::from_millis(100))
    ///                     .max_backoff(Duration::from_secs(1))
    ///                     .backoff_multiplier(2.0)
    ///                     .retryable_status_codes([Code::Unavailable])
    ///                     .build()?,
    ///             )
    ///             .build()?,
    ///     )
    ///     .retry_throttling(RetryThrottling::new(10, 0.1)?)
    ///     .build()?;
    /// assert!(config.method_config("/pkg.Echo/Say").is_some());
    /// # Ok::<(), retry_grpc::ConfigError>(())
    /// ```
    pub fn builder() -> ServiceConfigBuilder {
        ServiceConfigBuilder::default()
    }

    /// Checks that no name is given twice and indexes the names.
    pub(crate) fn new(
        method_configs: Vec<MethodConfig>,
        retry_throttling: Option<RetryThrottling>,
    ) -> Result<Self, ConfigError> {
        let mut errors = Vec::new();
        let names = method_configs
            .iter()
            .enumerate()
            .map(|(i, config)| (i, config.names.as_slice()));
        let index = index_names(names, &mut errors);
        if errors.is_empty() {
            Ok(ServiceConfig {
                method_configs,
                retry_throttling,
                index,
            })
        } else {
            Err(ConfigError::new(errors))
        }
    }

    /// The method configs, in the order written.
    pub fn method_configs(&self) -> &[MethodConfig] {
        &self.method_configs
    }

    /// The retry throttling of the server name, if the config has one.
    pub fn retry_throttling(&self) -> Option<RetryThrottling> {
        self.retry_throttling
    }

    /// The method config of a call's path, `/pkg.Service/Method` (the `:path` of its HTTP/2
    /// request, tonic's `GrpcMethod`): the exact name, else the service's, else the default,
    /// else `None`.
    ///
    /// ```
    /// use retry_grpc::ServiceConfig;
    /// use std::time::Duration;
    ///
    /// let config = ServiceConfig::from_json(r#"{"methodConfig": [
    ///     {"name": [{}], "timeout": "1s"},
    ///     {"name": [{"service": "pkg.Echo"}], "timeout": "2s"},
    ///     {"name": [{"service": "pkg.Echo", "method": "Say"}], "timeout": "3s"}
    /// ]}"#)?;
    /// let timeout = |path| config.method_config(path).and_then(|m| m.timeout());
    /// assert_eq!(timeout("/pkg.Echo/Say"), Some(Duration::from_secs(3)));
    /// assert_eq!(timeout("/pkg.Echo/Shout"), Some(Duration::from_secs(2)));
    /// assert_eq!(timeout("/pkg.Other/Say"), Some(Duration::from_secs(1)));
    /// # Ok::<(), retry_grpc::ConfigError>(())
    /// ```
    pub fn method_config(&self, path: &str) -> Option<&MethodConfig> {
        // Borrowed as it comes from tonic (the door looks up every call): no allocation.
        let path: std::borrow::Cow<'_, str> = if path.starts_with('/') {
            path.into()
        } else {
            format!("/{path}").into()
        };
        let service_key = path.rfind('/').filter(|&i| i > 0).map(|i| &path[..=i]);
        [Some(&*path), service_key, Some("")]
            .into_iter()
            .flatten()
            .find_map(|key| self.index.get(key))
            .map(|&i| &self.method_configs[i])
    }

    /// [`method_config`](Self::method_config) by service and method names:
    /// `lookup("pkg.Echo", "Say")`.
    pub fn lookup(&self, service: &str, method: &str) -> Option<&MethodConfig> {
        self.method_config(&format!("/{service}/{method}"))
    }

    /// The config as JSON, in the standard form ([`from_value`](Self::from_value) reads it back
    /// to an equal config). For handing a config built in code to another implementation.
    pub fn to_json(&self) -> serde_json::Value {
        json::service_config(self)
    }
}

/// Indexes the names by key, each with the position of its method config; a name given twice
/// is an error at its second place.
pub(crate) fn index_names<'a>(
    method_configs: impl Iterator<Item = (usize, &'a [MethodName])>,
    errors: &mut Vec<FieldError>,
) -> HashMap<String, usize> {
    let mut index = HashMap::new();
    let mut first_at: HashMap<String, String> = HashMap::new();
    for (position, (i, names)) in method_configs.enumerate() {
        for (j, name) in names.iter().enumerate() {
            let at = format!("methodConfig[{i}].name[{j}]");
            let key = name.key();
            if let Some(first) = first_at.get(&key) {
                errors.push(FieldError::new(
                    at,
                    format!("duplicate name {name}: already given at {first}; a name may appear once in a service config"),
                ));
            } else {
                first_at.insert(key.clone(), at);
                index.insert(key, position);
            }
        }
    }
    index
}

impl FromStr for ServiceConfig {
    type Err = ConfigError;

    fn from_str(json: &str) -> Result<Self, ConfigError> {
        Self::from_json(json)
    }
}

impl<'de> serde::Deserialize<'de> for ServiceConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (value, duplicates) = strict::read(deserializer)?;
        if !duplicates.is_empty() {
            return Err(strict::refuse(duplicates));
        }
        Self::from_value(&value).map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for ServiceConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

/// Which calls a method config applies to: one method, every method of a service, or every call
/// (the default).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MethodName {
    /// `{}` (or `{"service": ""}`): every call that no other name matches.
    Default,
    /// `{"service": "pkg.Echo"}`: every method of the service that no exact name matches.
    Service(String),
    /// `{"service": "pkg.Echo", "method": "Say"}`: one method.
    Method {
        /// The fully qualified service, `pkg.Echo`.
        service: String,
        /// The method, `Say`.
        method: String,
    },
}

impl MethodName {
    /// Every method of `service` (an empty `service` is the default name).
    pub fn service(service: impl Into<String>) -> Self {
        let service = service.into();
        if service.is_empty() {
            MethodName::Default
        } else {
            MethodName::Service(service)
        }
    }

    /// One method (an empty `method` names the whole service, an empty `service` too the
    /// default, as in the JSON).
    pub fn method(service: impl Into<String>, method: impl Into<String>) -> Self {
        let method = method.into();
        match Self::service(service) {
            MethodName::Service(service) if !method.is_empty() => {
                MethodName::Method { service, method }
            }
            name => name,
        }
    }

    /// The key of the name in grpc-go's form: `""`, `"/pkg.Echo/"`, `"/pkg.Echo/Say"`.
    pub fn key(&self) -> String {
        match self {
            MethodName::Default => String::new(),
            MethodName::Service(service) => format!("/{service}/"),
            MethodName::Method { service, method } => format!("/{service}/{method}"),
        }
    }
}

impl fmt::Display for MethodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MethodName::Default => f.write_str("{} (the default)"),
            MethodName::Service(service) => write!(f, "{{\"service\": {service:?}}}"),
            MethodName::Method { service, method } => {
                write!(f, "{{\"service\": {service:?}, \"method\": {method:?}}}")
            }
        }
    }
}

/// A method config: the names it applies to, its retry or hedging policy, its timeout.
#[derive(Clone, Debug, PartialEq)]
pub struct MethodConfig {
    pub(crate) names: Vec<MethodName>,
    pub(crate) policy: Option<CallPolicy>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) wait_for_ready: Option<bool>,
    pub(crate) max_request_message_bytes: Option<u64>,
    pub(crate) max_response_message_bytes: Option<u64>,
}

impl MethodConfig {
    /// A builder.
    pub fn builder() -> MethodConfigBuilder {
        MethodConfigBuilder::default()
    }

    /// The names it applies to.
    pub fn names(&self) -> &[MethodName] {
        &self.names
    }

    /// The retry or hedging policy; `None`: calls are neither retried nor hedged.
    pub fn policy(&self) -> Option<&CallPolicy> {
        self.policy.as_ref()
    }

    /// The retry policy, if that is the policy.
    pub fn retry_policy(&self) -> Option<&RetryPolicy> {
        match &self.policy {
            Some(CallPolicy::Retry(policy)) => Some(policy),
            _ => None,
        }
    }

    /// The hedging policy, if that is the policy.
    pub fn hedging_policy(&self) -> Option<&HedgingPolicy> {
        match &self.policy {
            Some(CallPolicy::Hedging(policy)) => Some(policy),
            _ => None,
        }
    }

    /// `timeout`: the deadline of the whole call, every attempt and pause included (A6), unless
    /// the call sets a shorter one.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// `waitForReady`.
    pub fn wait_for_ready(&self) -> Option<bool> {
        self.wait_for_ready
    }

    /// `maxRequestMessageBytes`.
    pub fn max_request_message_bytes(&self) -> Option<u64> {
        self.max_request_message_bytes
    }

    /// `maxResponseMessageBytes`.
    pub fn max_response_message_bytes(&self) -> Option<u64> {
        self.max_response_message_bytes
    }
}

/// The policy of a method config: retries or hedging, never both (A6).
#[derive(Clone, Debug, PartialEq)]
pub enum CallPolicy {
    /// `retryPolicy`.
    Retry(RetryPolicy),
    /// `hedgingPolicy`.
    Hedging(HedgingPolicy),
}

/// `retryPolicy`: up to `maxAttempts` attempts, with exponential backoff between them, after a
/// status in `retryableStatusCodes`.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    pub(crate) max_attempts: u32,
    pub(crate) requested_max_attempts: u32,
    pub(crate) initial_backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) backoff_multiplier: f64,
    pub(crate) retryable_status_codes: CodeSet,
}

impl RetryPolicy {
    /// A builder; [`RetryPolicyBuilder::build`] checks the same rules as the JSON.
    pub fn builder() -> RetryPolicyBuilder {
        RetryPolicyBuilder::default()
    }

    /// The attempts, the first included, after the cap ([`MAX_ATTEMPTS_LIMIT`]).
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// `maxAttempts` as written, before the cap.
    pub fn requested_max_attempts(&self) -> u32 {
        self.requested_max_attempts
    }

    /// `initialBackoff`.
    pub fn initial_backoff(&self) -> Duration {
        self.initial_backoff
    }

    /// `maxBackoff`.
    pub fn max_backoff(&self) -> Duration {
        self.max_backoff
    }

    /// `backoffMultiplier`.
    pub fn backoff_multiplier(&self) -> f64 {
        self.backoff_multiplier
    }

    /// `retryableStatusCodes`.
    pub fn retryable_status_codes(&self) -> CodeSet {
        self.retryable_status_codes
    }

    /// The same retries as a [`retry_runtime::Policy`], for `#[retry]`, `retry_block!` or a
    /// `Retrier` around one call: `maxAttempts − 1` retries, exponential from `initialBackoff`
    /// by `backoffMultiplier` up to `maxBackoff`, with full jitter (`U[0, d]`), which is A6's
    /// `random(0, min(initialBackoff·backoffMultiplier^(n−1), maxBackoff))`. The codes, the
    /// pushback and the throttling are not in a `Policy`; classify with the codes
    /// ([`retryable_status_codes`](Self::retryable_status_codes)).
    ///
    /// Always `Some`: a `backoffMultiplier` below 1 (A6 allows pauses that shrink) is kept
    /// ([`Policy::factor_unclamped`](retry_runtime::Policy::factor_unclamped)); it was `None`
    /// before the runtime's policy could keep it, and stays an `Option` for the callers written
    /// then. The door's [`RetryBackoff`](crate::backoff::RetryBackoff) draws its pauses from
    /// this policy.
    ///
    /// ```
    /// use retry_grpc::RetryPolicy;
    /// use retry_runtime::Jitter;
    /// use std::time::Duration;
    /// use tonic::Code;
    ///
    /// let policy = RetryPolicy::builder()
    ///     .max_attempts(4)
    ///     .initial_backoff(Duration::from_millis(100))
    ///     .max_backoff(Duration::from_secs(1))
    ///     .backoff_multiplier(2.0)
    ///     .retryable_status_codes([Code::Unavailable])
    ///     .build()?
    ///     .to_runtime_policy()
    ///     .expect("always a policy");
    /// assert_eq!(policy.get_max(), 3);
    /// assert_eq!(policy.get_jitter(), Jitter::Full);
    /// assert_eq!(policy.nominal_delay(3), Duration::from_millis(400));
    /// # Ok::<(), retry_grpc::ConfigError>(())
    /// ```
    pub fn to_runtime_policy(&self) -> Option<retry_runtime::Policy> {
        Some(self.runtime_policy())
    }

    /// [`to_runtime_policy`](Self::to_runtime_policy), unwrapped.
    pub(crate) fn runtime_policy(&self) -> retry_runtime::Policy {
        retry_runtime::Policy::new()
            .max(self.max_attempts.saturating_sub(1))
            .base(self.initial_backoff)
            .factor_unclamped(self.backoff_multiplier)
            .backoff(retry_runtime::Backoff::Exponential)
            .max_delay(self.max_backoff)
            .jitter(retry_runtime::Jitter::Full)
    }
}

/// `hedgingPolicy`: up to `maxAttempts` copies of a call, one every `hedgingDelay`, the next at
/// once after a status in `nonFatalStatusCodes`.
#[derive(Clone, Debug, PartialEq)]
pub struct HedgingPolicy {
    pub(crate) max_attempts: u32,
    pub(crate) requested_max_attempts: u32,
    pub(crate) hedging_delay: Duration,
    pub(crate) non_fatal_status_codes: CodeSet,
}

impl HedgingPolicy {
    /// A builder; [`HedgingPolicyBuilder::build`] checks the same rules as the JSON.
    pub fn builder() -> HedgingPolicyBuilder {
        HedgingPolicyBuilder::default()
    }

    /// The copies, the first included, after the cap ([`MAX_ATTEMPTS_LIMIT`]).
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// `maxAttempts` as written, before the cap.
    pub fn requested_max_attempts(&self) -> u32 {
        self.requested_max_attempts
    }

    /// `hedgingDelay` (0 when absent: every copy at once).
    pub fn hedging_delay(&self) -> Duration {
        self.hedging_delay
    }

    /// `nonFatalStatusCodes`.
    pub fn non_fatal_status_codes(&self) -> CodeSet {
        self.non_fatal_status_codes
    }
}

/// `retryThrottling`: the token bucket of a server name (see [`RetryThrottle`](crate::RetryThrottle)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RetryThrottling {
    max_tokens: u32,
    token_ratio_milli: u32,
}

impl RetryThrottling {
    /// `maxTokens` in (0, 1000] and `tokenRatio` > 0, read to 3 decimals.
    ///
    /// ```
    /// use retry_grpc::RetryThrottling;
    ///
    /// let throttling = RetryThrottling::new(10, 0.1)?;
    /// assert_eq!(throttling.token_ratio_milli(), 100);
    /// assert_eq!(
    ///     RetryThrottling::new(10, 0.0001).unwrap_err().to_string(),
    ///     "retryThrottling.tokenRatio: must be greater than 0 at 3 decimals, got 0.0001"
    /// );
    /// # Ok::<(), retry_grpc::ConfigError>(())
    /// ```
    pub fn new(max_tokens: u32, token_ratio: f64) -> Result<Self, ConfigError> {
        let mut errors = Vec::new();
        let max = parse::check_max_tokens(
            u64::from(max_tokens),
            "retryThrottling.maxTokens",
            &mut errors,
        );
        let ratio =
            parse::token_ratio_milli_of_f64(token_ratio, "retryThrottling.tokenRatio", &mut errors);
        match (max, ratio) {
            (Some(max_tokens), Some(token_ratio_milli)) if errors.is_empty() => {
                Ok(RetryThrottling {
                    max_tokens,
                    token_ratio_milli,
                })
            }
            _ => Err(ConfigError::new(errors)),
        }
    }

    pub(crate) fn from_checked(max_tokens: u32, token_ratio_milli: u32) -> Self {
        RetryThrottling {
            max_tokens,
            token_ratio_milli,
        }
    }

    /// `maxTokens`.
    pub fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// `tokenRatio` in thousandths of a token (`0.1` is 100): the exact value the arithmetic
    /// uses.
    pub fn token_ratio_milli(&self) -> u32 {
        self.token_ratio_milli
    }

    /// `tokenRatio` as a number.
    pub fn token_ratio(&self) -> f64 {
        f64::from(self.token_ratio_milli) / 1000.0
    }
}

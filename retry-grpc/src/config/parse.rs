//! Reading the JSON: each field's type, then the rules of `mod.rs`'s table, every problem
//! recorded with its path. Nothing here panics on any input (`tests/it/config_fuzz.rs`).

use super::{
    CallPolicy, ConfigError, FieldError, HedgingPolicy, MAX_TOKENS_LIMIT, MethodConfig, MethodName,
    RetryPolicy, RetryThrottling, ServiceConfig,
};
use crate::CodeSet;
use crate::code::{code_from_name, code_from_number};
use serde_json::{Map, Value};
use std::time::Duration;
use tonic::Code;

type Errors = Vec<FieldError>;

/// A field's value once read: absent (or `null`), or its problem already recorded, or the value.
pub(crate) enum Read<T> {
    Absent,
    Bad,
    Ok(T),
}

impl<T> Read<T> {
    fn is_present(&self) -> bool {
        !matches!(self, Read::Absent)
    }
}

impl<T> From<Option<T>> for Read<T> {
    fn from(value: Option<T>) -> Self {
        value.map_or(Read::Absent, Read::Ok)
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The field's value, `None` when absent or `null` (the same in proto3 JSON).
fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    object.get(key).filter(|value| !value.is_null())
}

fn object<'a>(value: &'a Value, path: &str, errors: &mut Errors) -> Option<&'a Map<String, Value>> {
    let object = value.as_object();
    if object.is_none() {
        errors.push(FieldError::new(
            path,
            format!("must be an object, got {}", kind(value)),
        ));
    }
    object
}

fn array<'a>(value: &'a Value, path: &str, errors: &mut Errors) -> Option<&'a Vec<Value>> {
    let array = value.as_array();
    if array.is_none() {
        errors.push(FieldError::new(
            path,
            format!("must be an array, got {}", kind(value)),
        ));
    }
    array
}

fn string<'a>(value: &'a Value, path: &str, errors: &mut Errors) -> Option<&'a str> {
    let string = value.as_str();
    if string.is_none() {
        errors.push(FieldError::new(
            path,
            format!("must be a string, got {}", kind(value)),
        ));
    }
    string
}

/// An integer: a JSON number without a fraction, or a string of one (proto3 JSON).
fn integer(value: &Value, path: &str, errors: &mut Errors) -> Option<i128> {
    let parsed = match value {
        Value::Number(number) => {
            if let Some(n) = number.as_i64() {
                Ok(i128::from(n))
            } else if let Some(n) = number.as_u64() {
                Ok(i128::from(n))
            } else {
                let f = number.as_f64().unwrap_or(f64::NAN);
                if f.fract() == 0.0 && f.abs() < 1e30 {
                    // Integral and far inside i128: the conversion is exact.
                    Ok(f as i128)
                } else {
                    Err(format!("must be an integer, got {number}"))
                }
            }
        }
        Value::String(text) => text
            .parse::<i128>()
            .map_err(|_| format!("must be an integer, got the string {text:?}")),
        other => Err(format!("must be an integer, got {}", kind(other))),
    };
    parsed
        .map_err(|rule| errors.push(FieldError::new(path, rule)))
        .ok()
}

/// A finite number: a JSON number, or a string of one (proto3 JSON).
fn number(value: &Value, path: &str, errors: &mut Errors) -> Option<f64> {
    let parsed = match value {
        Value::Number(number) => number
            .as_f64()
            .ok_or_else(|| format!("must be a number, got {number}")),
        Value::String(text) => text
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .ok_or_else(|| format!("must be a number, got the string {text:?}")),
        other => Err(format!("must be a number, got {}", kind(other))),
    };
    parsed
        .map_err(|rule| errors.push(FieldError::new(path, rule)))
        .ok()
}

fn duration(value: &Value, path: &str, errors: &mut Errors) -> Option<Duration> {
    match value {
        Value::String(text) => crate::duration::parse(text)
            .map_err(|rule| errors.push(FieldError::new(path, rule)))
            .ok(),
        other => {
            errors.push(FieldError::new(
                path,
                format!(
                    "must be a duration string like \"0.1s\", got {}",
                    kind(other)
                ),
            ));
            None
        }
    }
}

fn boolean(value: &Value, path: &str, errors: &mut Errors) -> Option<bool> {
    let boolean = value.as_bool();
    if boolean.is_none() {
        errors.push(FieldError::new(
            path,
            format!("must be true or false, got {}", kind(value)),
        ));
    }
    boolean
}

/// Reads `object[key]` with `read`, at `path.key`.
fn read<'a, T>(
    object: &'a Map<String, Value>,
    key: &str,
    path: &str,
    errors: &mut Errors,
    read: impl FnOnce(&'a Value, &str, &mut Errors) -> Option<T>,
) -> Read<T> {
    match field(object, key) {
        None => Read::Absent,
        Some(value) => match read(value, &join(path, key), errors) {
            Some(value) => Read::Ok(value),
            None => Read::Bad,
        },
    }
}

fn code(value: &Value, path: &str, errors: &mut Errors) -> Option<Code> {
    let result = match value {
        Value::String(name) => code_from_name(name).ok_or_else(|| {
            let upper = name.to_ascii_uppercase().replace([' ', '-'], "_");
            match code_from_name(&upper) {
                Some(_) => format!("unknown status code {name:?}; did you mean {upper:?}? (names are upper case)"),
                None => format!(
                    "unknown status code {name:?}; codes are names like \"UNAVAILABLE\" or numbers 0 to 16"
                ),
            }
        }),
        Value::Number(number) => match number.as_u64() {
            Some(n) => code_from_number(n)
                .ok_or_else(|| format!("unknown status code {n}; codes are numbers 0 to 16 or names like \"UNAVAILABLE\"")),
            None => Err(format!("a status code number must be an integer from 0 to 16, got {number}")),
        },
        other => Err(format!("a status code must be a name like \"UNAVAILABLE\" or a number, got {}", kind(other))),
    };
    result
        .map_err(|rule| errors.push(FieldError::new(path, rule)))
        .ok()
}

fn codes(value: &Value, path: &str, errors: &mut Errors) -> Option<CodeSet> {
    let items = array(value, path, errors)?;
    let before = errors.len();
    let mut set = CodeSet::EMPTY;
    for (i, item) in items.iter().enumerate() {
        if let Some(code) = code(item, &format!("{path}[{i}]"), errors) {
            set = set.with(code);
        }
    }
    (errors.len() == before).then_some(set)
}

pub(crate) fn service_config(value: &Value, limit: u32) -> Result<ServiceConfig, ConfigError> {
    let mut errors = Errors::new();
    let Some(top) = value.as_object() else {
        return Err(ConfigError::new(vec![FieldError::new(
            "",
            format!(
                "a service config must be a JSON object, got {}",
                kind(value)
            ),
        )]));
    };
    let mut method_configs = Vec::new();
    if let Some(list) = field(top, "methodConfig") {
        if let Some(items) = array(list, "methodConfig", &mut errors) {
            for (i, item) in items.iter().enumerate() {
                method_configs.push(method_config(
                    item,
                    &format!("methodConfig[{i}]"),
                    limit,
                    &mut errors,
                ));
            }
        }
    }
    let throttling = match field(top, "retryThrottling") {
        None => None,
        Some(value) => retry_throttling(value, "retryThrottling", &mut errors),
    };
    // Duplicate names are checked across the method configs that could be read, by their
    // position in the document.
    let names = method_configs
        .iter()
        .enumerate()
        .filter_map(|(i, config)| config.as_ref().map(|config| (i, config.names.as_slice())));
    let index = super::index_names(names, &mut errors);
    if !errors.is_empty() {
        return Err(ConfigError::new(errors));
    }
    let method_configs = method_configs.into_iter().flatten().collect();
    Ok(ServiceConfig {
        method_configs,
        retry_throttling: throttling,
        index,
    })
}

fn method_config(
    value: &Value,
    path: &str,
    limit: u32,
    errors: &mut Errors,
) -> Option<MethodConfig> {
    let object = object(value, path, errors)?;
    let before = errors.len();
    let names = match read(object, "name", path, errors, array) {
        Read::Ok(items) => items
            .iter()
            .enumerate()
            .filter_map(|(j, item)| method_name(item, &format!("{path}.name[{j}]"), errors))
            .collect(),
        _ => Vec::new(),
    };
    let retry = read(object, "retryPolicy", path, errors, |v, p, e| {
        retry_policy(v, p, limit, e)
    });
    let hedging = read(object, "hedgingPolicy", path, errors, |v, p, e| {
        hedging_policy(v, p, limit, e)
    });
    let timeout = read(object, "timeout", path, errors, duration);
    let wait_for_ready = read(object, "waitForReady", path, errors, boolean);
    let max_request = read(object, "maxRequestMessageBytes", path, errors, byte_limit);
    let max_response = read(object, "maxResponseMessageBytes", path, errors, byte_limit);
    let policy = match (retry, hedging) {
        (retry, hedging) if retry.is_present() && hedging.is_present() => {
            errors.push(FieldError::new(path, both_policies_rule()));
            None
        }
        (Read::Ok(policy), _) => Some(CallPolicy::Retry(policy)),
        (_, Read::Ok(policy)) => Some(CallPolicy::Hedging(policy)),
        _ => None,
    };
    if errors.len() > before {
        return None;
    }
    Some(MethodConfig {
        names,
        policy,
        timeout: option(timeout),
        wait_for_ready: option(wait_for_ready),
        max_request_message_bytes: option(max_request),
        max_response_message_bytes: option(max_response),
    })
}

fn option<T>(read: Read<T>) -> Option<T> {
    match read {
        Read::Ok(value) => Some(value),
        _ => None,
    }
}

pub(crate) fn both_policies_rule() -> &'static str {
    "has both `retryPolicy` and `hedgingPolicy`; a method config may have one of them (gRFC A6)"
}

fn byte_limit(value: &Value, path: &str, errors: &mut Errors) -> Option<u64> {
    let n = integer(value, path, errors)?;
    match u64::try_from(n) {
        Ok(n) => Some(n),
        Err(_) if n < 0 => {
            errors.push(FieldError::new(
                path,
                format!("must not be negative, got {n}"),
            ));
            None
        }
        // Larger than any message: the same as no limit in effect (grpc-go caps it likewise).
        Err(_) => Some(u64::MAX),
    }
}

fn method_name(value: &Value, path: &str, errors: &mut Errors) -> Option<MethodName> {
    let object = object(value, path, errors)?;
    let service = option(read(object, "service", path, errors, string)).unwrap_or("");
    let method = option(read(object, "method", path, errors, string)).unwrap_or("");
    if service.is_empty() && !method.is_empty() {
        errors.push(FieldError::new(
            join(path, "method"),
            format!("{method:?} is given without a `service`; a method name needs its service (only the default name, `{{}}`, has no service)"),
        ));
        return None;
    }
    Some(MethodName::method(service, method))
}

fn retry_policy(value: &Value, path: &str, limit: u32, errors: &mut Errors) -> Option<RetryPolicy> {
    let object = object(value, path, errors)?;
    let raw = RawRetry {
        max_attempts: read(object, "maxAttempts", path, errors, integer),
        initial_backoff: read(object, "initialBackoff", path, errors, duration),
        max_backoff: read(object, "maxBackoff", path, errors, duration),
        backoff_multiplier: read(object, "backoffMultiplier", path, errors, number),
        retryable_status_codes: read(object, "retryableStatusCodes", path, errors, codes),
    };
    check_retry(raw, path, limit, errors)
}

fn hedging_policy(
    value: &Value,
    path: &str,
    limit: u32,
    errors: &mut Errors,
) -> Option<HedgingPolicy> {
    let object = object(value, path, errors)?;
    let raw = RawHedging {
        max_attempts: read(object, "maxAttempts", path, errors, integer),
        hedging_delay: read(object, "hedgingDelay", path, errors, duration),
        non_fatal_status_codes: read(object, "nonFatalStatusCodes", path, errors, codes),
    };
    check_hedging(raw, path, limit, errors)
}

fn retry_throttling(value: &Value, path: &str, errors: &mut Errors) -> Option<RetryThrottling> {
    let object = object(value, path, errors)?;
    let max_tokens = match read(object, "maxTokens", path, errors, integer) {
        Read::Ok(n) => check_max_tokens_wide(n, &join(path, "maxTokens"), errors),
        Read::Absent => required(
            &join(path, "maxTokens"),
            "an integer in (0, 1000], like 10",
            errors,
        ),
        Read::Bad => None,
    };
    let ratio_path = join(path, "tokenRatio");
    let ratio = match field(object, "tokenRatio") {
        None => required(&ratio_path, "a number greater than 0, like 0.1", errors),
        Some(Value::Number(number)) => match number.as_f64() {
            Some(f) => token_ratio_milli_of_f64(f, &ratio_path, errors),
            None => {
                errors.push(FieldError::new(
                    &ratio_path,
                    format!("must be a number, got {number}"),
                ));
                None
            }
        },
        Some(Value::String(text)) => token_ratio_milli_of_text(text, text, &ratio_path, errors),
        Some(other) => {
            errors.push(FieldError::new(
                &ratio_path,
                format!("must be a number, got {}", kind(other)),
            ));
            None
        }
    };
    Some(RetryThrottling::from_checked(max_tokens?, ratio?))
}

fn required<T>(path: &str, what: &str, errors: &mut Errors) -> Option<T> {
    errors.push(FieldError::new(path, format!("is required: {what}")));
    None
}

pub(crate) fn check_max_tokens(n: u64, path: &str, errors: &mut Errors) -> Option<u32> {
    check_max_tokens_wide(i128::from(n), path, errors)
}

fn check_max_tokens_wide(n: i128, path: &str, errors: &mut Errors) -> Option<u32> {
    if n <= 0 {
        errors.push(FieldError::new(
            path,
            format!("must be greater than 0, got {n}"),
        ));
        None
    } else if n > i128::from(MAX_TOKENS_LIMIT) {
        errors.push(FieldError::new(
            path,
            format!("must be at most {MAX_TOKENS_LIMIT}, got {n}"),
        ));
        None
    } else {
        u32::try_from(n).ok()
    }
}

/// `tokenRatio` in thousandths, from a number: its shortest decimal form (Rust's `Display`
/// of an `f64`, which never uses an exponent and is the form the JSON most likely had), read
/// as C-core reads the text.
pub(crate) fn token_ratio_milli_of_f64(ratio: f64, path: &str, errors: &mut Errors) -> Option<u32> {
    if !ratio.is_finite() {
        errors.push(FieldError::new(
            path,
            format!("must be a finite number greater than 0, got {ratio}"),
        ));
        return None;
    }
    token_ratio_milli_of_text(&format!("{ratio}"), &format!("{ratio}"), path, errors)
}

/// C-core's reading: the whole part, and at most 3 digits of the fraction (the rest dropped).
fn token_ratio_milli_of_text(
    text: &str,
    shown: &str,
    path: &str,
    errors: &mut Errors,
) -> Option<u32> {
    if text.starts_with('-') && text.len() > 1 {
        errors.push(FieldError::new(
            path,
            format!("must be greater than 0, got {shown}"),
        ));
        return None;
    }
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !digits(whole) || !digits(fraction) {
        errors.push(FieldError::new(
            path,
            format!("must be a number, got {shown:?}"),
        ));
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().unwrap_or(u64::MAX)
    };
    let mut milli: u64 = 0;
    for (i, digit) in fraction.bytes().take(3).enumerate() {
        milli += u64::from(digit - b'0') * 10u64.pow(2 - i as u32);
    }
    let total = whole.saturating_mul(1000).saturating_add(milli);
    if total == 0 {
        errors.push(FieldError::new(
            path,
            format!("must be greater than 0 at 3 decimals, got {shown}"),
        ));
        return None;
    }
    match u32::try_from(total) {
        Ok(total) => Some(total),
        Err(_) => {
            errors.push(FieldError::new(
                path,
                format!("must be at most {} (a token ratio is a fraction of a token, like 0.1), got {shown}", u32::MAX / 1000),
            ));
            None
        }
    }
}

/// A retry policy's fields as read (from JSON or a builder), before the rules.
pub(crate) struct RawRetry {
    pub(crate) max_attempts: Read<i128>,
    pub(crate) initial_backoff: Read<Duration>,
    pub(crate) max_backoff: Read<Duration>,
    pub(crate) backoff_multiplier: Read<f64>,
    pub(crate) retryable_status_codes: Read<CodeSet>,
}

pub(crate) fn check_retry(
    raw: RawRetry,
    path: &str,
    limit: u32,
    errors: &mut Errors,
) -> Option<RetryPolicy> {
    let before = errors.len();
    let attempts = check_max_attempts(raw.max_attempts, &join(path, "maxAttempts"), limit, errors);
    let initial = positive_duration(raw.initial_backoff, &join(path, "initialBackoff"), errors);
    let max = positive_duration(raw.max_backoff, &join(path, "maxBackoff"), errors);
    let multiplier_path = join(path, "backoffMultiplier");
    let multiplier = match raw.backoff_multiplier {
        Read::Ok(m) if m.is_finite() && m > 0.0 => Some(m),
        Read::Ok(m) => {
            errors.push(FieldError::new(
                &multiplier_path,
                format!("must be greater than 0, got {m}"),
            ));
            None
        }
        Read::Absent => required(&multiplier_path, "a number greater than 0, like 2", errors),
        Read::Bad => None,
    };
    let codes_path = join(path, "retryableStatusCodes");
    let codes = match raw.retryable_status_codes {
        Read::Ok(codes) if codes.is_empty() => {
            errors.push(FieldError::new(
                &codes_path,
                "must not be empty: list the codes to retry, like [\"UNAVAILABLE\"]",
            ));
            None
        }
        Read::Ok(codes) => no_ok(codes, &codes_path, errors),
        Read::Absent => required(
            &codes_path,
            "the codes to retry, like [\"UNAVAILABLE\"]",
            errors,
        ),
        Read::Bad => None,
    };
    if errors.len() > before {
        return None;
    }
    let (max_attempts, requested_max_attempts) = attempts?;
    Some(RetryPolicy {
        max_attempts,
        requested_max_attempts,
        initial_backoff: initial?,
        max_backoff: max?,
        backoff_multiplier: multiplier?,
        retryable_status_codes: codes?,
    })
}

/// A hedging policy's fields as read, before the rules.
pub(crate) struct RawHedging {
    pub(crate) max_attempts: Read<i128>,
    pub(crate) hedging_delay: Read<Duration>,
    pub(crate) non_fatal_status_codes: Read<CodeSet>,
}

pub(crate) fn check_hedging(
    raw: RawHedging,
    path: &str,
    limit: u32,
    errors: &mut Errors,
) -> Option<HedgingPolicy> {
    let before = errors.len();
    let attempts = check_max_attempts(raw.max_attempts, &join(path, "maxAttempts"), limit, errors);
    let delay = match raw.hedging_delay {
        Read::Ok(delay) => Some(delay),
        Read::Absent => Some(Duration::ZERO),
        Read::Bad => None,
    };
    let codes = match raw.non_fatal_status_codes {
        Read::Ok(codes) => no_ok(codes, &join(path, "nonFatalStatusCodes"), errors),
        Read::Absent => Some(CodeSet::EMPTY),
        Read::Bad => None,
    };
    if errors.len() > before {
        return None;
    }
    let (max_attempts, requested_max_attempts) = attempts?;
    Some(HedgingPolicy {
        max_attempts,
        requested_max_attempts,
        hedging_delay: delay?,
        non_fatal_status_codes: codes?,
    })
}

fn no_ok(codes: CodeSet, path: &str, errors: &mut Errors) -> Option<CodeSet> {
    if codes.contains(Code::Ok) {
        errors.push(FieldError::new(
            path,
            "must not contain OK: a call that succeeded is never retried",
        ));
        None
    } else {
        Some(codes)
    }
}

/// `maxAttempts`: at least 2; capped at `limit`. Returns (capped, as written).
fn check_max_attempts(
    read: Read<i128>,
    path: &str,
    limit: u32,
    errors: &mut Errors,
) -> Option<(u32, u32)> {
    match read {
        Read::Ok(n) if n < 2 => {
            errors.push(FieldError::new(
                path,
                format!("must be at least 2, got {n}"),
            ));
            None
        }
        Read::Ok(n) => {
            let requested = u32::try_from(n).unwrap_or(u32::MAX);
            Some((requested.min(limit), requested))
        }
        Read::Absent => required(path, "an integer of at least 2, like 4", errors),
        Read::Bad => None,
    }
}

fn positive_duration(read: Read<Duration>, path: &str, errors: &mut Errors) -> Option<Duration> {
    match read {
        Read::Ok(d) if d.is_zero() => {
            errors.push(FieldError::new(path, "must be greater than 0, got \"0s\""));
            None
        }
        Read::Ok(d) => Some(d),
        Read::Absent => required(path, "a duration like \"0.1s\"", errors),
        Read::Bad => None,
    }
}

/// For the builders: a value they were given.
pub(crate) fn given<T>(value: Option<T>) -> Read<T> {
    value.into()
}

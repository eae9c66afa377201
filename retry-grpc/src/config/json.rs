//! A config back to its standard JSON.

use super::{CallPolicy, MethodConfig, MethodName, ServiceConfig};
use crate::CodeSet;
use crate::code::code_name;
use crate::duration::format;
use serde_json::{Map, Value, json};

pub(super) fn service_config(config: &ServiceConfig) -> Value {
    let mut top = Map::new();
    if !config.method_configs.is_empty() {
        top.insert(
            "methodConfig".into(),
            config.method_configs.iter().map(method_config).collect(),
        );
    }
    if let Some(throttling) = config.retry_throttling {
        let ratio = f64::from(throttling.token_ratio_milli()) / 1000.0;
        top.insert(
            "retryThrottling".into(),
            json!({"maxTokens": throttling.max_tokens(), "tokenRatio": ratio}),
        );
    }
    Value::Object(top)
}

fn codes(codes: CodeSet) -> Value {
    codes
        .iter()
        .map(|code| Value::from(code_name(code)))
        .collect()
}

fn method_config(config: &MethodConfig) -> Value {
    let mut object = Map::new();
    let names = config.names.iter().map(|name| match name {
        MethodName::Default => json!({}),
        MethodName::Service(service) => json!({"service": service}),
        MethodName::Method { service, method } => json!({"service": service, "method": method}),
    });
    object.insert("name".into(), names.collect());
    match &config.policy {
        Some(CallPolicy::Retry(policy)) => {
            object.insert(
                "retryPolicy".into(),
                json!({
                    "maxAttempts": policy.requested_max_attempts,
                    "initialBackoff": format(policy.initial_backoff),
                    "maxBackoff": format(policy.max_backoff),
                    "backoffMultiplier": policy.backoff_multiplier,
                    "retryableStatusCodes": codes(policy.retryable_status_codes),
                }),
            );
        }
        Some(CallPolicy::Hedging(policy)) => {
            object.insert(
                "hedgingPolicy".into(),
                json!({
                    "maxAttempts": policy.requested_max_attempts,
                    "hedgingDelay": format(policy.hedging_delay),
                    "nonFatalStatusCodes": codes(policy.non_fatal_status_codes),
                }),
            );
        }
        None => {}
    }
    if let Some(timeout) = config.timeout {
        object.insert("timeout".into(), format(timeout).into());
    }
    if let Some(wait) = config.wait_for_ready {
        object.insert("waitForReady".into(), wait.into());
    }
    if let Some(bytes) = config.max_request_message_bytes {
        object.insert("maxRequestMessageBytes".into(), bytes.into());
    }
    if let Some(bytes) = config.max_response_message_bytes {
        object.insert("maxResponseMessageBytes".into(), bytes.into());
    }
    Value::Object(object)
}

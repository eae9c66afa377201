//! The service config's rules, each with the exact error a user reads.

use retry_grpc::{CallPolicy, CodeSet, MethodName, ServiceConfig};
use serde_json::{Value, json};
use std::time::Duration;
use tonic::Code;

fn retry_policy() -> Value {
    json!({
        "maxAttempts": 4,
        "initialBackoff": "0.1s",
        "maxBackoff": "1s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"]
    })
}

/// A config with one method config for `pkg.Echo` whose retry policy has `field` set to `value`
/// (or removed, for `Value::Null`... which is the same as absent).
fn with_retry_field(field: &str, value: Value) -> Value {
    let mut policy = retry_policy();
    policy[field] = value;
    json!({"methodConfig": [{"name": [{"service": "pkg.Echo"}], "retryPolicy": policy}]})
}

fn error(config: Value) -> String {
    match ServiceConfig::from_value(&config) {
        Ok(config) => panic!("accepted: {config:?}"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn a_complete_config_reads_as_written() {
    let config = ServiceConfig::from_json(
        r#"{
          "loadBalancingConfig": [{"round_robin": {}}],
          "methodConfig": [
            {"name": [{"service": "pkg.Echo", "method": "Say"}, {"service": "pkg.Echo", "method": "Shout"}],
             "timeout": "1.5s", "waitForReady": true,
             "maxRequestMessageBytes": 1024, "maxResponseMessageBytes": "2048",
             "retryPolicy": {"maxAttempts": 9, "initialBackoff": ".01s", "maxBackoff": "0.3s",
                             "backoffMultiplier": 1.5, "retryableStatusCodes": ["UNAVAILABLE", 8]}},
            {"name": [{"service": "pkg.Hedged"}],
             "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.05s", "nonFatalStatusCodes": ["INTERNAL"]}}
          ],
          "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
        }"#,
    )
    .expect("valid");
    let say = config
        .lookup("pkg.Echo", "Shout")
        .expect("by its exact name");
    assert_eq!(say.names().len(), 2);
    assert_eq!(say.timeout(), Some(Duration::from_millis(1500)));
    assert_eq!(say.wait_for_ready(), Some(true));
    assert_eq!(say.max_request_message_bytes(), Some(1024));
    assert_eq!(say.max_response_message_bytes(), Some(2048));
    let retry = say.retry_policy().expect("a retry policy");
    assert_eq!(retry.max_attempts(), 5, "capped");
    assert_eq!(retry.requested_max_attempts(), 9);
    assert_eq!(retry.initial_backoff(), Duration::from_millis(10));
    assert_eq!(retry.max_backoff(), Duration::from_millis(300));
    assert_eq!(retry.backoff_multiplier(), 1.5);
    assert_eq!(
        retry.retryable_status_codes(),
        CodeSet::from_codes([Code::Unavailable, Code::ResourceExhausted])
    );
    assert!(config.lookup("pkg.Echo", "Whisper").is_none());

    let Some(CallPolicy::Hedging(hedging)) =
        config.lookup("pkg.Hedged", "Any").and_then(|m| m.policy())
    else {
        panic!("a hedging policy")
    };
    assert_eq!(hedging.max_attempts(), 3);
    assert_eq!(hedging.hedging_delay(), Duration::from_millis(50));
    assert_eq!(
        hedging.non_fatal_status_codes(),
        CodeSet::from_codes([Code::Internal])
    );

    let throttling = config.retry_throttling().expect("throttling");
    assert_eq!(
        (throttling.max_tokens(), throttling.token_ratio_milli()),
        (10, 100)
    );
}

#[test]
fn lookup_falls_back_from_method_to_service_to_default() {
    let config = ServiceConfig::from_value(&json!({"methodConfig": [
        {"name": [{"service": "", "method": null}], "timeout": "1s"},
        {"name": [{"service": "a.S"}], "timeout": "2s"},
        {"name": [{"service": "a.S", "method": "M"}], "timeout": "3s"},
    ]}))
    .expect("valid");
    let timeout = |path: &str| {
        config
            .method_config(path)
            .and_then(|m| m.timeout())
            .map(|d| d.as_secs())
    };
    assert_eq!(timeout("/a.S/M"), Some(3));
    assert_eq!(timeout("a.S/M"), Some(3), "without the leading slash");
    assert_eq!(timeout("/a.S/N"), Some(2));
    assert_eq!(timeout("/b.S/M"), Some(1));
    assert_eq!(timeout("nonsense"), Some(1));
    assert_eq!(config.method_configs()[0].names(), [MethodName::Default]);

    let no_default =
        ServiceConfig::from_value(&json!({"methodConfig": [{"name": [{"service": "a.S"}]}]}))
            .expect("valid");
    assert!(no_default.method_config("/b.S/M").is_none());
}

#[test]
fn method_configs_without_names_apply_to_nothing() {
    let config = ServiceConfig::from_value(
        &json!({"methodConfig": [{"timeout": "1s"}, {"name": [], "timeout": "2s"}]}),
    )
    .expect("valid, as in grpc-go and grpc-java");
    assert!(config.method_config("/a.S/M").is_none());
    assert!(
        ServiceConfig::from_json("{}")
            .expect("empty")
            .method_configs()
            .is_empty()
    );
}

#[test]
fn max_attempts_rules() {
    assert_eq!(
        error(with_retry_field("maxAttempts", json!(1))),
        "methodConfig[0].retryPolicy.maxAttempts: must be at least 2, got 1"
    );
    assert_eq!(
        error(with_retry_field("maxAttempts", json!(-3))),
        "methodConfig[0].retryPolicy.maxAttempts: must be at least 2, got -3"
    );
    assert_eq!(
        error(with_retry_field("maxAttempts", json!(2.5))),
        "methodConfig[0].retryPolicy.maxAttempts: must be an integer, got 2.5"
    );
    assert_eq!(
        error(with_retry_field("maxAttempts", json!("four"))),
        "methodConfig[0].retryPolicy.maxAttempts: must be an integer, got the string \"four\""
    );
    let mut policy = retry_policy();
    policy
        .as_object_mut()
        .expect("object")
        .remove("maxAttempts");
    assert_eq!(
        error(json!({"methodConfig": [{"name": [{}], "retryPolicy": policy}]})),
        "methodConfig[0].retryPolicy.maxAttempts: is required: an integer of at least 2, like 4"
    );
    let capped =
        ServiceConfig::from_value_with_limit(&with_retry_field("maxAttempts", json!("7")), 6)
            .expect("valid");
    assert_eq!(
        capped
            .lookup("pkg.Echo", "X")
            .and_then(|m| m.retry_policy())
            .map(|p| p.max_attempts()),
        Some(6)
    );
}

#[test]
fn backoff_rules() {
    assert_eq!(
        error(with_retry_field("initialBackoff", json!("0s"))),
        "methodConfig[0].retryPolicy.initialBackoff: must be greater than 0, got \"0s\""
    );
    assert_eq!(
        error(with_retry_field("maxBackoff", json!("100ms"))),
        "methodConfig[0].retryPolicy.maxBackoff: expected a duration as seconds with an `s`, like \"0.1s\" or \"30s\" (the protobuf JSON form), got \"100ms\""
    );
    assert_eq!(
        error(with_retry_field("maxBackoff", json!(1))),
        "methodConfig[0].retryPolicy.maxBackoff: must be a duration string like \"0.1s\", got a number"
    );
    assert_eq!(
        error(with_retry_field("initialBackoff", json!("-1s"))),
        "methodConfig[0].retryPolicy.initialBackoff: must not be negative, got \"-1s\""
    );
    assert_eq!(
        error(with_retry_field("backoffMultiplier", json!(0))),
        "methodConfig[0].retryPolicy.backoffMultiplier: must be greater than 0, got 0"
    );
    assert_eq!(
        error(with_retry_field("backoffMultiplier", json!(-2))),
        "methodConfig[0].retryPolicy.backoffMultiplier: must be greater than 0, got -2"
    );
    assert_eq!(
        error(with_retry_field("backoffMultiplier", json!(true))),
        "methodConfig[0].retryPolicy.backoffMultiplier: must be a number, got a boolean"
    );
}

#[test]
fn status_code_rules() {
    assert_eq!(
        error(with_retry_field("retryableStatusCodes", json!([]))),
        "methodConfig[0].retryPolicy.retryableStatusCodes: must not be empty: list the codes to retry, like [\"UNAVAILABLE\"]"
    );
    assert_eq!(
        error(with_retry_field(
            "retryableStatusCodes",
            json!(["unavailable"])
        )),
        "methodConfig[0].retryPolicy.retryableStatusCodes[0]: unknown status code \"unavailable\"; did you mean \"UNAVAILABLE\"? (names are upper case)"
    );
    assert_eq!(
        error(with_retry_field(
            "retryableStatusCodes",
            json!(["UNAVAILABLE", "BUSY"])
        )),
        "methodConfig[0].retryPolicy.retryableStatusCodes[1]: unknown status code \"BUSY\"; codes are names like \"UNAVAILABLE\" or numbers 0 to 16"
    );
    assert_eq!(
        error(with_retry_field("retryableStatusCodes", json!([17]))),
        "methodConfig[0].retryPolicy.retryableStatusCodes[0]: unknown status code 17; codes are numbers 0 to 16 or names like \"UNAVAILABLE\""
    );
    assert_eq!(
        error(with_retry_field("retryableStatusCodes", json!([14.5]))),
        "methodConfig[0].retryPolicy.retryableStatusCodes[0]: a status code number must be an integer from 0 to 16, got 14.5"
    );
    assert_eq!(
        error(with_retry_field("retryableStatusCodes", json!(["OK"]))),
        "methodConfig[0].retryPolicy.retryableStatusCodes: must not contain OK: a call that succeeded is never retried"
    );
    assert_eq!(
        error(with_retry_field(
            "retryableStatusCodes",
            json!("UNAVAILABLE")
        )),
        "methodConfig[0].retryPolicy.retryableStatusCodes: must be an array, got a string"
    );
}

#[test]
fn hedging_rules() {
    let hedged = |policy: Value| json!({"methodConfig": [{"name": [{"service": "s"}], "hedgingPolicy": policy}]});
    let config = ServiceConfig::from_value(&hedged(json!({"maxAttempts": 2})))
        .expect("delay and codes are optional");
    let policy = config
        .lookup("s", "m")
        .and_then(|m| m.hedging_policy())
        .expect("hedging");
    assert_eq!(
        (policy.hedging_delay(), policy.non_fatal_status_codes()),
        (Duration::ZERO, CodeSet::EMPTY)
    );
    assert_eq!(
        error(hedged(json!({"maxAttempts": 1}))),
        "methodConfig[0].hedgingPolicy.maxAttempts: must be at least 2, got 1"
    );
    assert_eq!(
        error(hedged(json!({"maxAttempts": 3, "hedgingDelay": "-0.5s"}))),
        "methodConfig[0].hedgingPolicy.hedgingDelay: must not be negative, got \"-0.5s\""
    );
    assert_eq!(
        error(hedged(
            json!({"maxAttempts": 3, "nonFatalStatusCodes": [0]})
        )),
        "methodConfig[0].hedgingPolicy.nonFatalStatusCodes: must not contain OK: a call that succeeded is never retried"
    );
}

#[test]
fn both_policies_are_refused() {
    assert_eq!(
        error(
            json!({"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": retry_policy(), "hedgingPolicy": {"maxAttempts": 2}}]})
        ),
        "methodConfig[0]: has both `retryPolicy` and `hedgingPolicy`; a method config may have one of them (gRFC A6)"
    );
    // `null` is the same as absent.
    assert!(
        ServiceConfig::from_value(&json!({"methodConfig": [{"name": [{"service": "s"}], "retryPolicy": retry_policy(), "hedgingPolicy": null}]}))
            .is_ok()
    );
}

#[test]
fn name_rules() {
    assert_eq!(
        error(json!({"methodConfig": [{"name": [{"method": "Say"}]}]})),
        "methodConfig[0].name[0].method: \"Say\" is given without a `service`; a method name needs its service (only the default name, `{}`, has no service)"
    );
    assert_eq!(
        error(json!({"methodConfig": [
            {"name": [{"service": "s", "method": "m"}]},
            {"name": [{"service": "t"}, {"service": "s", "method": "m"}]}
        ]})),
        "methodConfig[1].name[1]: duplicate name {\"service\": \"s\", \"method\": \"m\"}: already given at methodConfig[0].name[0]; a name may appear once in a service config"
    );
    assert_eq!(
        error(json!({"methodConfig": [{"name": [{}]}, {"name": [{"service": ""}]}]})),
        "methodConfig[1].name[0]: duplicate name {} (the default): already given at methodConfig[0].name[0]; a name may appear once in a service config"
    );
    assert_eq!(
        error(json!({"methodConfig": [{"name": [{"service": 7}]}]})),
        "methodConfig[0].name[0].service: must be a string, got a number"
    );
}

#[test]
fn throttling_rules() {
    let throttling = |value: Value| json!({"retryThrottling": value});
    assert_eq!(
        error(throttling(json!({"maxTokens": 0, "tokenRatio": 0.1}))),
        "retryThrottling.maxTokens: must be greater than 0, got 0"
    );
    assert_eq!(
        error(throttling(json!({"maxTokens": 1001, "tokenRatio": 0.1}))),
        "retryThrottling.maxTokens: must be at most 1000, got 1001"
    );
    assert_eq!(
        error(throttling(json!({"maxTokens": 10, "tokenRatio": 0}))),
        "retryThrottling.tokenRatio: must be greater than 0 at 3 decimals, got 0"
    );
    assert_eq!(
        error(throttling(json!({"maxTokens": 10, "tokenRatio": -0.5}))),
        "retryThrottling.tokenRatio: must be greater than 0, got -0.5"
    );
    assert_eq!(
        error(throttling(json!({"tokenRatio": 0.1}))),
        "retryThrottling.maxTokens: is required: an integer in (0, 1000], like 10"
    );
    assert_eq!(
        error(throttling(json!({"maxTokens": 10}))),
        "retryThrottling.tokenRatio: is required: a number greater than 0, like 0.1"
    );
    // Three decimals, the rest dropped (C-core); strings are numbers too.
    let milli = |ratio: Value| {
        ServiceConfig::from_value(&throttling(json!({"maxTokens": 10, "tokenRatio": ratio})))
            .expect("valid")
            .retry_throttling()
            .map(|t| t.token_ratio_milli())
    };
    assert_eq!(milli(json!(0.1)), Some(100));
    assert_eq!(milli(json!(0.29)), Some(290));
    assert_eq!(milli(json!(0.1239)), Some(123));
    assert_eq!(milli(json!(2)), Some(2000));
    assert_eq!(milli(json!("0.5")), Some(500));
}

#[test]
fn every_error_is_reported_at_once() {
    let config = json!({
        "methodConfig": [{"name": [{"service": "s"}],
            "retryPolicy": {"maxAttempts": 0, "initialBackoff": "1", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": []}}],
        "retryThrottling": {"maxTokens": 10, "tokenRatio": 0}
    });
    let error = ServiceConfig::from_value(&config).expect_err("invalid");
    let paths: Vec<&str> = error.errors().iter().map(|e| e.path()).collect();
    assert_eq!(
        paths,
        [
            "methodConfig[0].retryPolicy.initialBackoff",
            "methodConfig[0].retryPolicy.maxAttempts",
            "methodConfig[0].retryPolicy.retryableStatusCodes",
            "retryThrottling.tokenRatio",
        ]
    );
}

#[test]
fn documents_that_are_not_configs() {
    assert_eq!(
        error(json!([1])),
        "a service config must be a JSON object, got an array"
    );
    assert!(
        ServiceConfig::from_json("{")
            .expect_err("not JSON")
            .to_string()
            .starts_with("not valid JSON: EOF")
    );
    assert_eq!(
        error(json!({"methodConfig": {}})),
        "methodConfig: must be an array, got an object"
    );
    assert_eq!(
        error(json!({"methodConfig": [3]})),
        "methodConfig[0]: must be an object, got a number"
    );
}

#[test]
fn json_round_trips() {
    let text = r#"{
      "methodConfig": [
        {"name": [{}, {"service": "a.S"}, {"service": "a.T", "method": "M"}], "timeout": "0.25s",
         "retryPolicy": {"maxAttempts": 7, "initialBackoff": "0.01s", "maxBackoff": "0.000001500s",
                         "backoffMultiplier": 1.5, "retryableStatusCodes": ["UNAVAILABLE", 4]}},
        {"name": [{"service": "h.S"}], "waitForReady": false, "maxRequestMessageBytes": 7,
         "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "1s"}}
      ],
      "retryThrottling": {"maxTokens": 1000, "tokenRatio": 0.001}
    }"#;
    let config = ServiceConfig::from_json(text).expect("valid");
    let again = ServiceConfig::from_value(&config.to_json()).expect("its own JSON is valid");
    assert_eq!(config, again);
    let serialized = serde_json::to_string(&config).expect("serializes");
    let deserialized: ServiceConfig = serde_json::from_str(&serialized).expect("deserializes");
    assert_eq!(config, deserialized);
    assert!(
        serde_json::from_str::<ServiceConfig>(r#"{"methodConfig": 1}"#)
            .expect_err("invalid")
            .to_string()
            .contains("methodConfig: must be an array, got a number")
    );
}

#[test]
fn the_runtime_policy_has_a6s_nominal_pauses() {
    use retry_grpc::RetryPolicy;
    use retry_grpc::backoff::{Jitter, RetryBackoff};
    for (initial, max, multiplier) in [
        (100, 1000, 2.0),
        (100, 1000, 0.5),
        (500, 200, 2.0),
        (10, 10, 1.0),
        (30, 5000, 3.5),
    ] {
        let policy = RetryPolicy::builder()
            .max_attempts(5)
            .initial_backoff(Duration::from_millis(initial))
            .max_backoff(Duration::from_millis(max))
            .backoff_multiplier(multiplier)
            .retryable_status_codes([Code::Unavailable])
            .build()
            .expect("valid");
        // Every policy has one, a shrinking backoff included.
        let runtime = policy.to_runtime_policy().expect("always a runtime policy");
        let backoff = RetryBackoff::new(&policy, Jitter::A6);
        assert_eq!(runtime.get_max(), 4);
        for n in 1..=6 {
            let ours = backoff.nominal(n).as_secs_f64();
            let theirs = runtime.nominal_delay(n).as_secs_f64();
            assert!(
                (ours - theirs).abs() < 1e-6,
                "{initial} {max} {multiplier} retry {n}: {ours} vs {theirs}"
            );
        }
    }
}

/// The rule of a duplicate key, as a user reads it after the key's path.
const DUPLICATE: &str = "duplicate key: its object gives it more than once; keep one (C-core \
    refuses such a config, and a reader that kept the last would drop the others without a word)";

#[test]
fn a_key_given_twice_is_refused_with_its_path() {
    // An operator's two `methodConfig` blocks: with the last one winning, Echo's retries would
    // vanish without a word.
    let two_blocks = r#"{
      "methodConfig": [{"name": [{"service": "pkg.Echo"}],
        "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
                        "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}],
      "methodConfig": [{"name": [{"service": "pkg.Search"}], "timeout": "1s"}]
    }"#;
    let error = ServiceConfig::from_json(two_blocks).expect_err("refused");
    assert_eq!(error.to_string(), format!("methodConfig: {DUPLICATE}"));
    assert_eq!(error.errors()[0].path(), "methodConfig");
    // The same through `FromStr` and serde's `Deserialize`.
    let error = two_blocks.parse::<ServiceConfig>().expect_err("refused");
    assert_eq!(error.to_string(), format!("methodConfig: {DUPLICATE}"));
    let error = serde_json::from_str::<ServiceConfig>(two_blocks).expect_err("refused");
    assert_eq!(error.to_string(), format!("methodConfig: {DUPLICATE}"));

    // Anywhere: inside a policy, inside a name, in a field this crate ignores; every duplicate
    // at once, each once, in document order; the same key in two objects is no duplicate.
    let nested = r#"{
      "loadBalancingConfig": [{"round_robin": {}, "round_robin": {}}],
      "methodConfig": [
        {"name": [{"service": "a.S"}], "timeout": "1s"},
        {"name": [{"service": "b.S", "service": "c.S"}],
         "retryPolicy": {"maxAttempts": 2, "maxAttempts": 5, "maxAttempts": 3,
                         "initialBackoff": "0.1s", "maxBackoff": "1s",
                         "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}
      ]
    }"#;
    let error = ServiceConfig::from_json(nested).expect_err("refused");
    let paths: Vec<&str> = error.errors().iter().map(|e| e.path()).collect();
    assert_eq!(
        paths,
        [
            "loadBalancingConfig[0].round_robin",
            "methodConfig[1].name[0].service",
            "methodConfig[1].retryPolicy.maxAttempts",
        ]
    );
    assert!(error.errors().iter().all(|e| e.rule() == DUPLICATE));
}

#[test]
fn max_attempts_beyond_any_integer_is_capped_at_the_limit() {
    // C-core refuses `1e20` (it reads a 32-bit integer); A6 lets a client treat any value above
    // its limit as the limit, and so does this crate.
    for written in [json!(1e20), json!(4_294_967_296_u64), json!("100000000000")] {
        let config = ServiceConfig::from_value(&with_retry_field("maxAttempts", written.clone()))
            .unwrap_or_else(|error| panic!("{written}: {error}"));
        let policy = config
            .lookup("pkg.Echo", "Say")
            .and_then(|m| m.retry_policy())
            .expect("a retry policy");
        assert_eq!(policy.max_attempts(), 5, "{written}");
        assert_eq!(policy.requested_max_attempts(), u32::MAX, "{written}");
    }
    let config = ServiceConfig::from_json(
        r#"{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 1e20}}]}"#,
    )
    .expect("valid");
    let hedging = config
        .lookup("any.S", "M")
        .and_then(|m| m.hedging_policy())
        .expect("a hedging policy");
    assert_eq!(hedging.max_attempts(), 5);
    let raised =
        ServiceConfig::from_value_with_limit(&with_retry_field("maxAttempts", json!(1e20)), 8)
            .expect("valid");
    assert_eq!(
        raised
            .lookup("pkg.Echo", "Say")
            .and_then(|m| m.retry_policy())
            .map(|p| p.max_attempts()),
        Some(8)
    );
}

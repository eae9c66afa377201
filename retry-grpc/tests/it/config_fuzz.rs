//! No input makes the service config reader panic: arbitrary JSON, and configs shaped like
//! real ones with arbitrary values in every field.

use proptest::prelude::*;
use retry_grpc::ServiceConfig;
use serde_json::{Map, Value, json};

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".*".prop_map(Value::from),
        // Values that look like what the fields want.
        prop_oneof![
            Just("UNAVAILABLE"),
            Just("0.1s"),
            Just("-1s"),
            Just(".5s"),
            Just("1.s"),
            Just("0.0001"),
            Just("315576000001s"),
            Just("4"),
            Just("1e3"),
            Just("")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((field_name(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("methodConfig"),
        Just("name"),
        Just("service"),
        Just("method"),
        Just("retryPolicy"),
        Just("hedgingPolicy"),
        Just("timeout"),
        Just("maxAttempts"),
        Just("initialBackoff"),
        Just("maxBackoff"),
        Just("backoffMultiplier"),
        Just("retryableStatusCodes"),
        Just("hedgingDelay"),
        Just("nonFatalStatusCodes"),
        Just("retryThrottling"),
        Just("maxTokens"),
        Just("tokenRatio"),
        Just("waitForReady"),
        Just("maxRequestMessageBytes"),
        Just("other")
    ]
    .prop_map(str::to_owned)
}

fn check(value: &Value) {
    match ServiceConfig::from_value(value) {
        Ok(config) => {
            // What was accepted writes JSON that reads back to the same config.
            let again = ServiceConfig::from_value(&config.to_json()).expect("its own JSON");
            assert_eq!(config, again);
            let _ = config.method_config("/a.S/M");
        }
        Err(error) => {
            assert!(!error.errors().is_empty());
            assert!(!error.to_string().is_empty());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_documents(value in arbitrary_json()) {
        check(&value);
        check(&json!({"methodConfig": [value.clone()]}));
        check(&json!({"retryThrottling": value}));
    }

    #[test]
    fn real_shapes_with_arbitrary_values(
        values in prop::collection::vec(arbitrary_json(), 12),
    ) {
        let config = json!({
            "methodConfig": [{
                "name": [{"service": values[0], "method": values[1]}],
                "timeout": values[2],
                "retryPolicy": {
                    "maxAttempts": values[3], "initialBackoff": values[4], "maxBackoff": values[5],
                    "backoffMultiplier": values[6], "retryableStatusCodes": values[7]
                }
            }, {
                "name": [{"service": "h"}],
                "hedgingPolicy": {"maxAttempts": values[8], "hedgingDelay": values[9], "nonFatalStatusCodes": values[7]}
            }],
            "retryThrottling": {"maxTokens": values[10], "tokenRatio": values[11]}
        });
        check(&config);
    }

    #[test]
    fn arbitrary_text(text in ".*") {
        let _ = ServiceConfig::from_json(&text);
    }
}

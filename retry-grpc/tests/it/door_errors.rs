//! The door refuses a malformed config with the config's error (the field and the rule), never
//! a panic; the whole rule table is tested in `config.rs`.

use retry_grpc::channel::GrpcRetryLayer;

fn error_of(json: &str) -> String {
    GrpcRetryLayer::from_service_config(json)
        .expect_err("a malformed config")
        .to_string()
}

#[test]
fn a_malformed_config_is_an_error_naming_the_field_and_the_rule() {
    let retry = r#""retryPolicy": {"maxAttempts": 1, "initialBackoff": "0.1s", "maxBackoff": "1s",
                   "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}"#;
    assert_eq!(
        error_of(&format!(
            r#"{{"methodConfig": [{{"name": [{{"service": "pkg.Echo"}}], {retry}}}]}}"#
        )),
        "methodConfig[0].retryPolicy.maxAttempts: must be at least 2, got 1"
    );
    let both = error_of(
        r#"{"methodConfig": [{"name": [{"service": "pkg.Echo"}],
            "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.1s", "maxBackoff": "1s",
                            "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]},
            "hedgingPolicy": {"maxAttempts": 2}}]}"#,
    );
    assert!(both.contains("methodConfig[0]"), "{both}");
    assert!(both.contains("hedgingPolicy"), "{both}");
    let not_json = error_of("{\"methodConfig\": [");
    assert!(!not_json.is_empty());
    // A key given twice: refused, not the first dropped.
    let twice = error_of(
        r#"{"methodConfig": [{"name": [{"service": "pkg.Echo"}], "timeout": "1s"}],
            "methodConfig": [{"name": [{"service": "pkg.Search"}], "timeout": "2s"}]}"#,
    );
    assert!(twice.starts_with("methodConfig: duplicate key"), "{twice}");
}

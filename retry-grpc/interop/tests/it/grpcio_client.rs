//! grpcio's client (C-core 1.85.x, through Python) against the scripted tonic server, with
//! standard service configs: the behaviour gRFC A6 makes normative, as the official
//! implementation shows it. Each test starts its own server and client processes on loopback.
//!
//! Pauses are measured between the arrivals of a call's attempts at the server. C-core's pause
//! before retry `n` is `min(initialBackoff·2^(n−1), maxBackoff)·U[0.8, 1.2)` (`RetryBackoff`
//! with `Jitter::CCore`); a timer never fires early, so the lower bound is checked to the
//! millisecond; the upper bound allows 80 ms of scheduling (measured up to 38 ms over on the
//! first retry, `bench/RESULTS.md` §10).

use crate::common::*;
use retry_grpc::backoff::{Jitter, RetryBackoff};
use retry_grpc::{Decision, Pushback, RetryCall, RetryThrottle, RetryThrottling};
use retry_grpc_interop::harness::{
    self, ClientRun, ServerProcess, closed_port, of_call, pauses_ms, previous_attempts,
};
use std::sync::Arc;
use tonic::Code;

const SLACK_MS: f64 = 80.0;

fn headers(values: &[Option<&str>]) -> Vec<Option<String>> {
    values.iter().map(|v| v.map(str::to_owned)).collect()
}

#[test]
fn unavailable_is_retried_with_previous_attempts_and_c_cores_pauses() {
    let Some(python) = python() else { return };
    let server = tonic_server();
    let policy = retry(5, ms(100), ms(1000), &[Code::Unavailable]);
    let scenario = "unavailable_then_ok:3";
    let report = ClientRun::unary(scenario, retry_config(policy.clone(), None))
        .calls(3)
        .run(&python, server.address())
        .expect("the client ran");
    let attempts = server.attempts_of(scenario);
    let backoff = RetryBackoff::new(&policy, Jitter::CCore);
    for call in &report.calls {
        assert_eq!(call.code, "OK", "{call:?}");
        assert_eq!(call.replies.len(), 1);
        assert_eq!(call.replies[0].attempt, 4, "the fourth attempt answered");
        let seen = of_call(&attempts, call.call);
        assert_eq!(seen.len(), 4);
        assert_eq!(
            previous_attempts(&seen),
            headers(&[None, Some("1"), Some("2"), Some("3")])
        );
        for (i, pause) in pauses_ms(&seen).into_iter().enumerate() {
            let (low, high) = backoff.bounds(i as u32 + 1);
            let (low, high) = (low.as_secs_f64() * 1000.0, high.as_secs_f64() * 1000.0);
            assert!(
                pause >= low - 1.0 && pause <= high + SLACK_MS,
                "call {} pause {}: {pause:.1} ms, C-core's band is [{low}, {high}) ms",
                call.call,
                i + 1
            );
        }
    }
}

#[test]
fn max_attempts_counts_the_first_and_is_capped_at_five() {
    let Some(python) = python() else { return };
    let server = tonic_server();
    for (max_attempts, expected) in [(3, 3), (9, 5)] {
        let scenario = format!("always_unavailable:{max_attempts}");
        // A retry config whose maxAttempts is written as is (9), for grpcio to cap.
        let mut config = retry_config(
            retry(max_attempts, ms(10), ms(10), &[Code::Unavailable]),
            None,
        );
        config["methodConfig"][0]["retryPolicy"]["maxAttempts"] = max_attempts.into();
        let report = ClientRun::unary(&scenario, config)
            .run(&python, server.address())
            .expect("the client ran");
        assert_eq!(report.calls[0].code, "UNAVAILABLE");
        assert_eq!(
            server.attempts_of(&scenario).len(),
            expected,
            "maxAttempts {max_attempts}"
        );
    }
}

#[test]
fn pushback_replaces_the_pause_exactly_even_above_max_backoff_and_resets_the_backoff() {
    let Some(python) = python() else { return };
    let server = tonic_server();
    // maxBackoff 200 ms, pushback 250 ms: A6 waits the pushback, whatever the backoff's cap.
    let policy = retry(
        4,
        ms(100),
        ms(200),
        &[Code::Unavailable, Code::ResourceExhausted],
    );
    let scenario = "pushback:250";
    let report = ClientRun::unary(scenario, retry_config(policy.clone(), None))
        .run(&python, server.address())
        .expect("the client ran");
    assert_eq!(report.calls[0].code, "OK");
    let seen = server.attempts_of(scenario);
    assert_eq!(seen.len(), 3);
    assert_eq!(
        previous_attempts(&seen),
        headers(&[None, Some("1"), Some("2")])
    );
    let pauses = pauses_ms(&seen);
    assert!(
        (250.0..250.0 + SLACK_MS).contains(&pauses[0]),
        "the pushback's pause: {:.1} ms",
        pauses[0]
    );
    // After the pushback, the backoff starts again from initialBackoff: C-core's first band.
    let (low, high) = RetryBackoff::new(&policy, Jitter::CCore).bounds(1);
    let (low, high) = (low.as_secs_f64() * 1000.0, high.as_secs_f64() * 1000.0);
    assert!(
        pauses[1] >= low - 1.0 && pauses[1] <= high + SLACK_MS,
        "the pause after it: {:.1} ms",
        pauses[1]
    );
}

#[test]
fn a_negative_pushback_and_a_code_not_in_the_list_are_final() {
    let Some(python) = python() else { return };
    let server = tonic_server();
    let config = retry_config(
        retry(
            4,
            ms(10),
            ms(10),
            &[Code::Unavailable, Code::ResourceExhausted],
        ),
        None,
    );
    for (scenario, code) in [
        ("pushback_stop", "RESOURCE_EXHAUSTED"),
        ("internal", "INTERNAL"),
    ] {
        let report = ClientRun::unary(scenario, config.clone())
            .run(&python, server.address())
            .expect("ran");
        assert_eq!(report.calls[0].code, code);
        assert_eq!(server.attempts_of(scenario).len(), 1, "{scenario}");
    }
}

#[test]
fn throttling_allows_the_attempts_of_a6s_token_arithmetic() {
    let Some(python) = python() else { return };
    let server = tonic_server();
    let policy = retry(4, ms(5), ms(5), &[Code::Unavailable]);
    let throttling = RetryThrottling::new(10, 0.1).expect("valid");
    let scenario = "always_unavailable";
    let report = ClientRun::unary(scenario, retry_config(policy.clone(), Some(throttling)))
        .calls(20)
        .run(&python, server.address())
        .expect("the client ran");
    assert!(report.calls.iter().all(|call| call.code == "UNAVAILABLE"));
    let seen = server.attempts_of(scenario);

    // The same 20 calls through retry-grpc's decision and throttle.
    let throttle = Arc::new(RetryThrottle::new(throttling));
    let mut expected = Vec::new();
    for _ in 0..20 {
        let mut call = RetryCall::new(&policy, Jitter::A6, Some(Arc::clone(&throttle)));
        let mut attempts = 1;
        while let Decision::Retry { .. } = call.on_status(Code::Unavailable, Pushback::Absent) {
            attempts += 1;
        }
        expected.push(attempts);
    }
    let per_call: Vec<usize> = (0..20).map(|call| of_call(&seen, call).len()).collect();
    assert_eq!(
        per_call,
        expected.iter().map(|n| *n as usize).collect::<Vec<_>>()
    );
    assert_eq!(seen.len(), 23, "4 attempts, then 19 calls of 1");
}

#[test]
fn a_stream_that_delivered_a_message_or_sent_headers_is_never_rerun() {
    let Some(python) = python() else { return };
    let server = tonic_server();
    let config = retry_config(retry(4, ms(10), ms(10), &[Code::Unavailable]), None);
    let run = |scenario: &str| {
        ClientRun::unary(scenario, config.clone())
            .method("server_stream")
            .run(&python, server.address())
            .expect("ran")
    };

    // Two messages, then UNAVAILABLE in the trailers: committed by the headers and messages.
    let report = run("stream_fails_after:2");
    let call = &report.calls[0];
    assert_eq!(call.code, "UNAVAILABLE");
    assert_eq!(
        call.replies
            .iter()
            .map(|r| (r.attempt, r.index))
            .collect::<Vec<_>>(),
        [(1, 0), (1, 1)]
    );
    assert_eq!(server.attempts_of("stream_fails_after:2").len(), 1);

    // Headers, then UNAVAILABLE without a message: committed by the headers alone.
    let report = run("stream_headers_then_error");
    assert_eq!(report.calls[0].code, "UNAVAILABLE");
    assert!(report.calls[0].replies.is_empty());
    assert_eq!(server.attempts_of("stream_headers_then_error").len(), 1);

    // A trailers-only UNAVAILABLE commits nothing: retried, and only the second attempt's
    // messages reach the application.
    let report = run("stream_unavailable_then_ok:1");
    assert_eq!(report.calls[0].code, "OK");
    assert_eq!(
        report.calls[0]
            .replies
            .iter()
            .map(|r| (r.attempt, r.index))
            .collect::<Vec<_>>(),
        [(2, 0), (2, 1), (2, 2)]
    );
    assert_eq!(server.attempts_of("stream_unavailable_then_ok:1").len(), 2);
}

#[test]
fn a_client_stream_is_replayed_whole() {
    let Some(python) = python() else { return };
    let server = tonic_server();
    let config = retry_config(retry(4, ms(10), ms(10), &[Code::Unavailable]), None);
    let scenario = "unavailable_then_ok:2";
    let report = ClientRun::unary(scenario, config)
        .method("client_stream")
        .run(&python, server.address())
        .expect("ran");
    assert_eq!(report.calls[0].code, "OK");
    let seen = server.attempts_of(scenario);
    assert_eq!(
        seen.iter().map(|r| r.received).collect::<Vec<_>>(),
        [3, 3, 3],
        "every attempt got all 3 requests"
    );
    assert_eq!(
        previous_attempts(&seen),
        headers(&[None, Some("1"), Some("2")])
    );
}

#[test]
fn a_closed_port_fails_as_unavailable_and_the_policy_retries_it() {
    let Some(python) = python() else { return };
    let target = format!("127.0.0.1:{}", closed_port().expect("a free port"));
    let policy = retry(4, ms(100), ms(1000), &[Code::Unavailable]);

    // With the policy: UNAVAILABLE after three of C-core's pauses (at least 0.8 × 700 ms).
    let report = ClientRun::unary("ok", retry_config(policy, None))
        .run(&python, &target)
        .expect("ran");
    let call = &report.calls[0];
    assert_eq!(call.code, "UNAVAILABLE");
    assert!(
        call.details.contains("Connection refused"),
        "{}",
        call.details
    );
    assert!(
        call.elapsed_ms >= 0.8 * 700.0 - 1.0,
        "{:.1} ms: the policy's pauses",
        call.elapsed_ms
    );

    // Without a policy: at once (no pause of even 0.8 × initialBackoff).
    let report = ClientRun::unary("ok", serde_json::json!({}))
        .run(&python, &target)
        .expect("ran");
    assert_eq!(report.calls[0].code, "UNAVAILABLE");
    assert!(
        report.calls[0].elapsed_ms < 80.0,
        "{:.1} ms",
        report.calls[0].elapsed_ms
    );

    // waitForReady: the call waits for a connection until its deadline.
    let report = ClientRun::unary("ok", serde_json::json!({}))
        .timeout(ms(300))
        .wait_for_ready()
        .run(&python, &target)
        .expect("ran");
    assert_eq!(report.calls[0].code, "DEADLINE_EXCEEDED");
    assert!(report.calls[0].elapsed_ms >= 299.0);
}

#[test]
fn c_core_ignores_the_hedging_policy() {
    let Some(python) = python() else { return };
    let server = tonic_server();
    let scenario = "slow_first:300";
    let config = hedging_config(3, ms(50), &[Code::Unavailable]);
    let report = ClientRun::unary(scenario, config)
        .run(&python, server.address())
        .expect("ran");
    assert_eq!(report.calls[0].code, "OK");
    // A6 would have sent copies at 50 and 100 ms; C-core sends one (grpc/proposal#287).
    assert_eq!(server.attempts_of(scenario).len(), 1);
    assert!(report.calls[0].elapsed_ms >= 300.0);
}

#[test]
fn the_server_saw_grpcio() {
    let Some(python) = python() else { return };
    let server: ServerProcess = tonic_server();
    let report = ClientRun::unary("ok", serde_json::json!({}))
        .run(&python, server.address())
        .expect("ran");
    // The grpcio the harness found (the pinned one in `.ci/grpcio.sh`'s virtual environment, or
    // any 1.85.x a Python already has) is the one that ran, and the server saw its user agent.
    let (_, found) = harness::python().expect("found above");
    assert_eq!(report.grpcio, found);
    assert!(
        harness::grpcio_in_range(&report.grpcio),
        "{}",
        report.grpcio
    );
    let seen = server.attempts_of("ok");
    let agent = seen[0].user_agent.as_deref().unwrap_or("");
    let expected = format!("grpc-python/{} grpc-c/", report.grpcio);
    assert!(agent.starts_with(&expected), "{agent}");
}

#[test]
fn the_range_is_the_pinned_release_line_at_any_patch() {
    for version in ["1.85.0", "1.85.1", "1.85.4", "1.85.12"] {
        assert!(harness::grpcio_in_range(version), "{version}");
    }
    for version in [
        "1.84.2",
        "1.86.0",
        "2.85.1",
        "11.85.1",
        "1.85",
        "1.85.",
        "1.85.0rc1",
        "",
    ] {
        assert!(!harness::grpcio_in_range(version), "{version}");
    }
}

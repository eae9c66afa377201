//! The door against real servers in other processes, on the real clock: the scripted tonic
//! server (`scripted-server`) and grpcio's scripted server (C-core, an implementation nobody
//! here wrote). The door reads the same JSON service config grpcio's client reads, and each
//! scenario's attempts are what the server saw.
//!
//! A timer never fires early, so lower bounds of pauses are checked to the millisecond; upper
//! bounds allow `SLACK_MS` of scheduling on a loaded machine.

use crate::common::*;
use retry_grpc::RetryThrottling;
use retry_grpc_interop::harness::{
    ClientRun, ServerProcess, of_call, pauses_ms, previous_attempts, run_door,
};
use tonic::Code;

const SLACK_MS: f64 = 80.0;

fn headers(values: &[Option<&str>]) -> Vec<Option<String>> {
    values.iter().map(|v| v.map(str::to_owned)).collect()
}

/// Every check, against one server.
async fn the_door_behaves_as_a6_against(server: &ServerProcess) {
    let codes = &[Code::Unavailable, Code::ResourceExhausted];

    // UNAVAILABLE ×3, then OK: 4 attempts, the header 1, 2, 3, A6's pauses.
    let scenario = "unavailable_then_ok:3";
    let run = ClientRun::unary(
        scenario,
        retry_config(retry(5, ms(20), ms(200), codes), None),
    )
    .calls(2);
    let (report, counters) = run_door(&run, server.address()).await.expect("ran");
    let attempts = server.attempts_of(scenario);
    for call in &report.calls {
        assert_eq!(call.code, "OK", "{call:?}");
        assert_eq!(call.replies[0].attempt, 4);
        let seen = of_call(&attempts, call.call);
        assert_eq!(
            previous_attempts(&seen),
            headers(&[None, Some("1"), Some("2"), Some("3")])
        );
        for (i, pause) in pauses_ms(&seen).into_iter().enumerate() {
            let high = 20.0 * 2f64.powi(i as i32);
            assert!(pause <= high + SLACK_MS, "pause {}: {pause:.1} ms", i + 1);
        }
    }
    assert_eq!(counters.retries(), 6);

    // Pushback 250 ms (above maxBackoff 20 ms): waited whole, then the backoff restarts.
    let scenario = "pushback:250";
    let run = ClientRun::unary(
        scenario,
        retry_config(retry(4, ms(10), ms(20), codes), None),
    );
    let (report, _) = run_door(&run, server.address()).await.expect("ran");
    assert_eq!(report.calls[0].code, "OK");
    let seen = server.attempts_of(scenario);
    assert_eq!(
        previous_attempts(&seen),
        headers(&[None, Some("1"), Some("2")])
    );
    let pauses = pauses_ms(&seen);
    assert!(
        pauses[0] >= 249.0 && pauses[0] <= 250.0 + SLACK_MS,
        "the pushback: {:.1} ms",
        pauses[0]
    );
    assert!(
        pauses[1] <= 10.0 + SLACK_MS,
        "from initialBackoff: {:.1}",
        pauses[1]
    );

    // Pushback −1 and INTERNAL: one attempt each.
    for (scenario, code) in [
        ("pushback_stop", "RESOURCE_EXHAUSTED"),
        ("internal", "INTERNAL"),
    ] {
        let run = ClientRun::unary(
            scenario,
            retry_config(retry(4, ms(10), ms(10), codes), None),
        );
        let (report, _) = run_door(&run, server.address()).await.expect("ran");
        assert_eq!(report.calls[0].code, code);
        assert_eq!(server.attempts_of(scenario).len(), 1, "{scenario}");
    }

    // A stream that delivered two messages is never re-run; a trailers-only failure is retried.
    let run = ClientRun::unary(
        "stream_fails_after:2",
        retry_config(retry(4, ms(10), ms(10), codes), None),
    )
    .method("server_stream");
    let (report, _) = run_door(&run, server.address()).await.expect("ran");
    assert_eq!(report.calls[0].code, "UNAVAILABLE");
    assert_eq!(
        report.calls[0]
            .replies
            .iter()
            .map(|r| (r.attempt, r.index))
            .collect::<Vec<_>>(),
        [(1, 0), (1, 1)]
    );
    assert_eq!(server.attempts_of("stream_fails_after:2").len(), 1);
    let run = ClientRun::unary(
        "stream_unavailable_then_ok:1",
        retry_config(retry(4, ms(10), ms(10), codes), None),
    )
    .method("server_stream");
    let (report, _) = run_door(&run, server.address()).await.expect("ran");
    assert_eq!(report.calls[0].code, "OK");
    assert_eq!(report.calls[0].replies.len(), 3);
    assert!(report.calls[0].replies.iter().all(|r| r.attempt == 2));

    // A client stream is replayed whole.
    let run = ClientRun::unary(
        "unavailable_then_ok:2",
        retry_config(retry(4, ms(10), ms(10), codes), None),
    )
    .method("client_stream");
    let (report, _) = run_door(&run, server.address()).await.expect("ran");
    assert_eq!(report.calls[0].code, "OK");
    let received: Vec<u32> = server
        .attempts_of("unavailable_then_ok:2")
        .iter()
        .map(|r| r.received)
        .collect();
    assert_eq!(received, [3, 3, 3]);

    // Throttling: 20 failing calls, 4 + 19 × 1 attempts.
    let throttling = RetryThrottling::new(10, 0.1).expect("valid");
    let run = ClientRun::unary(
        "always_unavailable",
        retry_config(retry(4, ms(5), ms(5), codes), Some(throttling)),
    )
    .calls(20);
    let (report, counters) = run_door(&run, server.address()).await.expect("ran");
    assert!(report.calls.iter().all(|c| c.code == "UNAVAILABLE"));
    let attempts = server.attempts_of("always_unavailable");
    let per_call: Vec<usize> = (0..20).map(|c| of_call(&attempts, c).len()).collect();
    let mut expected = vec![1; 20];
    expected[0] = 4;
    assert_eq!(per_call, expected);
    assert_eq!(counters.throttled(), 19);

    // Hedging: the first attempt answers after 300 ms, the copy sent at 50 ms wins.
    let run = ClientRun::unary(
        "slow_first:300",
        hedging_config(3, ms(50), &[Code::Unavailable]),
    );
    let (report, counters) = run_door(&run, server.address()).await.expect("ran");
    let call = &report.calls[0];
    assert_eq!(call.code, "OK");
    assert!(call.replies[0].attempt >= 2, "a copy's answer: {call:?}");
    assert!(
        call.elapsed_ms < 300.0,
        "not the slow attempt's: {:.0} ms",
        call.elapsed_ms
    );
    let seen = server.attempts_of("slow_first:300");
    // (The copy's delay is measured on the paused clock in tests/door.rs: here the first
    // attempt's arrival also waits for the connection.)
    assert_eq!(seen[1].previous_rpc_attempts.as_deref(), Some("1"));
    assert!(counters.hedged_copies() >= 1);
}

#[tokio::test]
async fn the_door_against_the_scripted_tonic_server() {
    let server = tonic_server();
    the_door_behaves_as_a6_against(&server).await;
}

#[tokio::test]
async fn the_door_against_grpcios_server() {
    let Some(python) = python() else { return };
    let server = ServerProcess::grpcio(&python).expect("grpcio's server starts");
    the_door_behaves_as_a6_against(&server).await;
}

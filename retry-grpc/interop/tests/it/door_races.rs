//! The door against real servers in other processes (the scripted tonic server and grpcio's),
//! on the real clock, in the races where issue 39 lost calls:
//!
//! 1. a hedged client stream whose later copy failed while the application was still sending:
//!    the survivor was never woken again;
//! 2. calls that raced a server's `GOAWAY`: failed `CANCELLED`, though never sent;
//! 3. a method timeout whose end tonic's own `grpc-timeout` timer reached first: `CANCELLED`,
//!    not `DEADLINE_EXCEEDED`.

use crate::common::*;
use futures_util::future::join_all;
use retry_grpc::channel::{Counters, GrpcRetry, GrpcRetryLayer};
use retry_grpc::{HedgingPolicy, MethodConfig, MethodName, ServiceConfig};
use retry_grpc_interop::harness::{ServerProcess, of_call, previous_attempts, python_dir};
use retry_grpc_interop::proto::Request as Message;
use retry_grpc_interop::proto::scripted_client::ScriptedClient;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;
use tonic::transport::Channel;

type Client = ScriptedClient<GrpcRetry<Channel>>;

/// A lazy channel to `address`.
fn channel_to(address: &str) -> Channel {
    Channel::from_shared(format!("http://{address}"))
        .expect("a valid URI")
        .connect_lazy()
}

/// A generated client over the door with `config`, over `channel`.
fn door_on(channel: Channel, config: &Value) -> (Client, Arc<Counters>) {
    let layer = GrpcRetryLayer::from_service_config(&config.to_string()).expect("a valid config");
    let counters = layer.counters();
    (
        ScriptedClient::new(tower::Layer::layer(&layer, channel)),
        counters,
    )
}

/// [`door_on`] a new channel to `address`.
fn door_to(address: &str, config: &Value) -> (Client, Arc<Counters>) {
    door_on(channel_to(address), config)
}

fn message(scenario: &str, call: u32) -> Message {
    Message {
        scenario: scenario.to_owned(),
        call,
        payload: Vec::new(),
    }
}

/// The tonic scripted server with `args`.
fn tonic_server_with(args: &[&str]) -> ServerProcess {
    let mut command = Command::new(Path::new(env!("CARGO_BIN_EXE_scripted-server")));
    command.args(args);
    ServerProcess::start(command).expect("the scripted server starts")
}

/// grpcio's scripted server with `args`, or `None` after skipping (failing under CI).
fn grpcio_server_with(args: &[&str]) -> Option<ServerProcess> {
    let python = python()?;
    let mut command = Command::new(python);
    command
        .arg(python_dir().join("scripted_server.py"))
        .args(args)
        .current_dir(python_dir());
    Some(ServerProcess::start(command).expect("grpcio's server starts"))
}

// 1. A hedged client stream whose later copy fails early.

/// Two copies 50 ms apart; the application sends three messages 150 ms apart; the server fails
/// the second copy (UNAVAILABLE, trailers-only) on its first message, while the first copy
/// waits for the application's second. The first copy must go on sending and answer.
async fn the_survivor_of_a_hedged_client_stream_answers(server: &ServerProcess) {
    // Connected first (without the door), so that the first copy reaches the server well
    // before the second.
    let channel = channel_to(server.address());
    ScriptedClient::new(channel.clone())
        .unary(message("ok", 0))
        .await
        .expect("OK");
    let (mut client, counters) = door_on(channel, &hedging_config(2, ms(50), &[Code::Unavailable]));
    let paced = futures_util::stream::unfold(0, |sent| async move {
        if sent == 3 {
            return None;
        }
        if sent > 0 {
            tokio::time::sleep(ms(150)).await;
        }
        Some((message("later_copy_fails", 0), sent + 1))
    });
    let mut request = tonic::Request::new(paced);
    // Before the fix the call hung here until this deadline.
    request.set_timeout(Duration::from_secs(5));
    let reply = client
        .client_stream(request)
        .await
        .expect("the first copy answers")
        .into_inner();
    assert_eq!((reply.attempt, reply.received), (1, 3), "{reply:?}");
    let seen = server.attempts_of("later_copy_fails");
    assert_eq!(
        previous_attempts(&seen),
        [None, Some("1".to_owned())],
        "{seen:?}"
    );
    assert_eq!(counters.hedged_copies(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedged_client_stream_whose_later_copy_fails_is_answered_by_the_survivor_tonic() {
    the_survivor_of_a_hedged_client_stream_answers(&tonic_server_with(&[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedged_client_stream_whose_later_copy_fails_is_answered_by_the_survivor_grpcio() {
    let Some(server) = grpcio_server_with(&[]) else {
        return;
    };
    the_survivor_of_a_hedged_client_stream_answers(&server).await;
}

// 2. Calls that raced a GOAWAY.

/// 1,000 calls, 10 at a time, each answered after 10 ms: about 1.1 s of calls, so that calls
/// are being sent whenever one of the server's eleven or so GOAWAYs comes.
const CALLS: u32 = 1_000;
const WORKERS: u32 = 10;
const SLOW: &str = "slow:10";

/// `CALLS` calls numbered from `first`, `WORKERS` at a time; the statuses of those that failed.
async fn calls_ten_at_a_time(client: &Client, first: u32) -> Vec<tonic::Status> {
    let workers = (0..WORKERS).map(|worker| {
        let mut client = client.clone();
        async move {
            let mut failed = Vec::new();
            for call in (worker..CALLS).step_by(WORKERS as usize) {
                if let Err(status) = client.unary(message(SLOW, first + call)).await {
                    failed.push(status);
                }
            }
            failed
        }
    });
    join_all(workers).await.into_iter().flatten().collect()
}

/// Against a server that closes each connection with a GOAWAY at 100 ms old: every call
/// answered, each seen by the server once and without `grpc-previous-rpc-attempts`, and every
/// attempt beyond the calls a transparent retry; with no policy, then with a retry policy.
async fn no_call_that_raced_a_goaway_is_lost(server: &ServerProcess) {
    let configs = [
        ("no policy", serde_json::json!({})),
        (
            "a retry policy",
            retry_config(retry(4, ms(10), ms(100), &[Code::Unavailable]), None),
        ),
    ];
    for (run, (what, config)) in configs.iter().enumerate() {
        let first = run as u32 * CALLS;
        let (client, counters) = door_to(server.address(), config);
        let failed = calls_ten_at_a_time(&client, first).await;
        assert!(
            failed.is_empty(),
            "{what}: {} of {CALLS} calls failed, the first: {:?}",
            failed.len(),
            failed[0]
        );
        let seen = server.attempts_of(SLOW);
        for call in first..first + CALLS {
            let attempts = of_call(&seen, call);
            assert_eq!(
                previous_attempts(&attempts),
                [None],
                "{what}: call {call} reached the server once, as a first attempt"
            );
        }
        assert_eq!(counters.retries(), 0, "{what}");
        assert_eq!(
            counters.attempts() - u64::from(CALLS),
            counters.transparent_retries(),
            "{what}: every attempt beyond the calls is a transparent retry"
        );
        // The race happened (before the fix, 11 to 33 of the 1,000 calls without a policy
        // were lost to it, in three runs against each server).
        assert!(
            counters.transparent_retries() > 0,
            "{what}: no call raced a GOAWAY"
        );
        eprintln!(
            "{what}: {CALLS} calls, {} transparent retries",
            counters.transparent_retries()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_raced_a_goaway_are_retried_transparently_tonic() {
    no_call_that_raced_a_goaway_is_lost(&tonic_server_with(&["--max-connection-age-ms", "100"]))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_raced_a_goaway_are_retried_transparently_grpcio() {
    let Some(server) = grpcio_server_with(&["--max-connection-age-ms", "100"]) else {
        return;
    };
    no_call_that_raced_a_goaway_is_lost(&server).await;
}

// 3. A method timeout ends as DEADLINE_EXCEEDED.

/// A method `timeout` of 0.3 s against a server that answers after 1 s: 100 concurrent calls
/// with no policy, 100 under a retry policy, 100 hedged; each ends `DEADLINE_EXCEEDED`.
async fn a_method_timeout_is_deadline_exceeded_every_time(server: &ServerProcess) {
    let timeout = ms(300);
    let method = || {
        MethodConfig::builder()
            .name(MethodName::service(SERVICE))
            .timeout(timeout)
    };
    let hedging = HedgingPolicy::builder()
        .max_attempts(2)
        .hedging_delay(ms(100))
        .non_fatal_status_codes([Code::Unavailable])
        .build()
        .expect("valid");
    let methods = [
        ("no policy", method()),
        (
            "a retry policy",
            method().retry_policy(retry(4, ms(10), ms(100), &[Code::Unavailable])),
        ),
        ("hedged", method().hedging_policy(hedging)),
    ];
    for (run, (what, method)) in methods.into_iter().enumerate() {
        let config = ServiceConfig::builder()
            .method_config(method.build().expect("valid"))
            .build()
            .expect("valid")
            .to_json();
        let (client, counters) = door_to(server.address(), &config);
        let calls = (0..100).map(|call| {
            let mut client = client.clone();
            async move {
                match client
                    .unary(message("slow:1000", run as u32 * 100 + call))
                    .await
                {
                    Ok(_) => (Code::Ok, String::new()),
                    Err(status) => (status.code(), status.message().to_owned()),
                }
            }
        });
        let statuses = join_all(calls).await;
        let other: Vec<_> = statuses
            .iter()
            .filter(|(code, _)| *code != Code::DeadlineExceeded)
            .collect();
        assert!(
            other.is_empty(),
            "{what}: {} of 100 calls ended otherwise: {other:?}",
            other.len()
        );
        assert_eq!(counters.deadline_exceeded(), 100, "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_timeout_ends_every_call_deadline_exceeded_tonic() {
    a_method_timeout_is_deadline_exceeded_every_time(&tonic_server_with(&[])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_timeout_ends_every_call_deadline_exceeded_grpcio() {
    let Some(server) = grpcio_server_with(&[]) else {
        return;
    };
    a_method_timeout_is_deadline_exceeded_every_time(&server).await;
}

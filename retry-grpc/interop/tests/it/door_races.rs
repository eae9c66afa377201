//! The door against real servers in other processes (the scripted tonic server and grpcio's),
//! on the real clock, in the races where issue 39 lost calls:
//!
//! 1. a hedged client stream whose later copy failed while the application was still sending:
//!    the survivor was never woken again.

use crate::common::*;
use retry_grpc::channel::{Counters, GrpcRetry, GrpcRetryLayer};
use retry_grpc_interop::harness::{ServerProcess, previous_attempts, python_dir};
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

/// A generated client over the door with `config`, over a lazy channel to `address`.
fn door_to(address: &str, config: &Value) -> (Client, Arc<Counters>) {
    let layer = GrpcRetryLayer::from_service_config(&config.to_string()).expect("a valid config");
    let counters = layer.counters();
    let channel = Channel::from_shared(format!("http://{address}"))
        .expect("a valid URI")
        .connect_lazy();
    (
        ScriptedClient::new(tower::Layer::layer(&layer, channel)),
        counters,
    )
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
    let (mut client, counters) = door_to(
        server.address(),
        &hedging_config(2, ms(50), &[Code::Unavailable]),
    );
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

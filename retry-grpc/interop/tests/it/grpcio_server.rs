//! The reverse direction's server: grpcio's scripted server (C-core, through Python), driven
//! here by a plain tonic client without retries, so that each call is one attempt. It checks
//! that the server plays the same scripts as the tonic one and that what it answers reads as
//! retry-grpc expects (pushback in the trailers, trailers-only errors, headers before an error),
//! ready for the door to be run against it.

use crate::common::*;
use retry_grpc::{AttemptStatus, Pushback};
use retry_grpc_interop::harness::{ServerProcess, previous_attempts};
use retry_grpc_interop::proto::Request;
use retry_grpc_interop::proto::scripted_client::ScriptedClient;
use tonic::Code;
use tonic::transport::Channel;

async fn client(server: &ServerProcess) -> ScriptedClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", server.address()))
        .expect("a valid URI")
        .connect()
        .await
        .expect("connects to grpcio's server");
    ScriptedClient::new(channel)
}

fn request(scenario: &str, call: u32) -> Request {
    Request {
        scenario: scenario.to_owned(),
        call,
        payload: Vec::new(),
    }
}

#[tokio::test]
async fn grpcio_plays_the_scripts() {
    let Some(python) = python() else { return };
    let server = ServerProcess::grpcio(&python).expect("grpcio's server starts");
    let mut client = client(&server).await;

    // UNAVAILABLE twice, then OK: one attempt per call, as a client without retries makes them.
    let mut codes = Vec::new();
    for _ in 0..3 {
        let code = match client.unary(request("unavailable_then_ok:2", 0)).await {
            Ok(reply) => {
                assert_eq!(reply.get_ref().attempt, 3);
                Code::Ok
            }
            Err(status) => status.code(),
        };
        codes.push(code);
    }
    assert_eq!(codes, [Code::Unavailable, Code::Unavailable, Code::Ok]);
    let seen = server.attempts_of("unavailable_then_ok:2");
    assert_eq!(
        seen.iter().map(|r| r.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(
        previous_attempts(&seen),
        [None, None, None],
        "no retry header from a plain client"
    );
    assert!(
        seen[0]
            .user_agent
            .as_deref()
            .unwrap_or("")
            .contains("tonic"),
        "{:?}",
        seen[0].user_agent
    );

    // The pushback arrives in the trailers, and reads as the pause.
    let status = client
        .unary(request("pushback:250", 0))
        .await
        .expect_err("RESOURCE_EXHAUSTED");
    assert_eq!(
        AttemptStatus::from_status(&status),
        AttemptStatus {
            code: Code::ResourceExhausted,
            pushback: Pushback::RetryAfter(ms(250))
        }
    );
    let status = client
        .unary(request("pushback_stop", 0))
        .await
        .expect_err("RESOURCE_EXHAUSTED");
    assert_eq!(Pushback::from_status(&status), Pushback::DoNotRetry);

    // A client stream: all of its messages reach the server.
    let requests = stream_of(vec![request("ok", 0), request("ok", 0), request("ok", 0)]);
    let reply = client.client_stream(requests).await.expect("OK");
    assert_eq!(reply.get_ref().received, 3);
}

fn stream_of(requests: Vec<Request>) -> impl futures_util::Stream<Item = Request> + Send + 'static {
    futures_util::stream::iter(requests)
}

#[tokio::test]
async fn grpcio_streams_fail_after_messages_or_headers() {
    let Some(python) = python() else { return };
    let server = ServerProcess::grpcio(&python).expect("grpcio's server starts");
    let mut client = client(&server).await;

    let mut stream = client
        .server_stream(request("stream_fails_after:2", 0))
        .await
        .expect("headers")
        .into_inner();
    let mut indexes = Vec::new();
    let status = loop {
        match stream.message().await {
            Ok(Some(reply)) => indexes.push(reply.index),
            Ok(None) => panic!("the stream ended without its error"),
            Err(status) => break status,
        }
    };
    assert_eq!(indexes, [0, 1]);
    assert_eq!(status.code(), Code::Unavailable);

    // Headers first, then the error: the call has response headers (committed).
    let response = client
        .server_stream(request("stream_headers_then_error", 0))
        .await
        .expect("headers arrive");
    assert!(response.metadata().get("x-server-attempt").is_some());
    let mut stream = response.into_inner();
    assert_eq!(
        stream.message().await.expect_err("the error").code(),
        Code::Unavailable
    );

    // A trailers-only error: tonic reports it as the call's status, without a stream.
    let status = client
        .server_stream(request("stream_unavailable_then_ok:1", 0))
        .await
        .expect_err("trailers-only");
    assert_eq!(status.code(), Code::Unavailable);
}

//! The door (`retry_grpc::channel::GrpcRetryLayer`) under a real tonic `Channel`, against the
//! scripted tonic server in the same process, on tokio's paused clock: the generated client is
//! used as is (no per-method code, no adapter), and a recording service between the door and
//! the channel sees every attempt the door sends, at its exact virtual time.

use crate::common::{SERVICE, hedging_config, ms, retry, retry_config};
use http::{Request, Response};
use retry_grpc::backoff::{Jitter, RetryBackoff};
use retry_grpc::channel::{Counters, GrpcRetry, GrpcRetryLayer};
use retry_grpc::{
    MethodConfig, MethodName, RetryPolicy, RetryThrottling, ServiceConfig, ThrottleRegistry,
};
use retry_grpc_interop::proto::scripted_client::ScriptedClient;
use retry_grpc_interop::proto::{Reply, Request as Message};
use retry_grpc_interop::server::{AttemptRecord, ScriptedService, bind, serve};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tonic::Code;
use tonic::body::Body;
use tonic::transport::Channel;
use tower::ServiceExt;
use tower::util::BoxCloneService;

/// One attempt as the door sent it.
#[derive(Clone, Debug)]
struct Sent {
    /// Virtual time since the rig started.
    at: Duration,
    previous: Option<String>,
    timeout: Option<String>,
}

type Recorder = BoxCloneService<Request<Body>, Response<Body>, tonic::transport::Error>;

struct Rig {
    client: ScriptedClient<GrpcRetry<Recorder>>,
    sent: Arc<Mutex<Vec<Sent>>>,
    server: Arc<Mutex<Vec<AttemptRecord>>>,
    counters: Arc<Counters>,
}

impl Rig {
    fn sent(&self) -> Vec<Sent> {
        self.sent.lock().expect("not poisoned").clone()
    }

    fn pauses(&self) -> Vec<Duration> {
        self.sent()
            .windows(2)
            .map(|pair| pair[1].at - pair[0].at)
            .collect()
    }

    fn previous(&self) -> Vec<Option<String>> {
        self.sent().into_iter().map(|s| s.previous).collect()
    }

    fn server_attempts(&self) -> usize {
        self.server.lock().expect("not poisoned").len()
    }
}

/// A scripted tonic server on loopback, a channel to it, the recorder and the door on top.
async fn start_rig(layer: GrpcRetryLayer) -> Rig {
    let (listener, addr) = bind().await.expect("binds");
    let server = Arc::new(Mutex::new(Vec::new()));
    let records = Arc::clone(&server);
    let service = ScriptedService::new(move |record| {
        records.lock().expect("not poisoned").push(record.clone())
    });
    tokio::spawn(serve(service, listener));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_lazy();
    rig_on(layer, channel, server)
}

fn rig_on(layer: GrpcRetryLayer, channel: Channel, server: Arc<Mutex<Vec<AttemptRecord>>>) -> Rig {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&sent);
    let start = Instant::now();
    let recorder = tower::service_fn(move |request: Request<Body>| {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        log.lock().expect("not poisoned").push(Sent {
            at: start.elapsed(),
            previous: header("grpc-previous-rpc-attempts"),
            timeout: header("grpc-timeout"),
        });
        channel.clone().oneshot(request)
    });
    let counters = layer.counters();
    let service = tower::ServiceBuilder::new()
        .layer(layer)
        .service(BoxCloneService::new(recorder));
    Rig {
        client: ScriptedClient::new(service),
        sent,
        server,
        counters,
    }
}

/// The config of `common`'s JSON, read back as the door reads it.
fn config(policy: RetryPolicy, throttling: Option<RetryThrottling>) -> ServiceConfig {
    ServiceConfig::from_value(&retry_config(policy, throttling)).expect("valid")
}

fn hedging(max_attempts: u32, delay: Duration, codes: &[Code]) -> ServiceConfig {
    ServiceConfig::from_value(&hedging_config(max_attempts, delay, codes)).expect("valid")
}

fn message(scenario: &str, call: u32) -> Message {
    Message {
        scenario: scenario.to_owned(),
        call,
        payload: Vec::new(),
    }
}

/// A drawn pause in `[low, high)`, as tokio's paused clock shows it: its timer has a resolution
/// of 1 ms and never fires early, so a pause is rounded up to the next whole millisecond.
fn within(pause: Duration, low: Duration, high: Duration) -> bool {
    pause >= low && pause <= high.max(low + ms(1))
}

fn some(values: &[&str]) -> Vec<Option<String>> {
    std::iter::once(None)
        .chain(values.iter().map(|v| Some((*v).to_owned())))
        .collect()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn unary_calls_are_retried_as_the_config_says_with_a6_pauses() {
    let policy = retry(5, ms(100), ms(1000), &[Code::Unavailable]);
    let mut rig = start_rig(GrpcRetryLayer::new(config(policy.clone(), None))).await;
    let reply = rig
        .client
        .unary(message("unavailable_then_ok:3", 0))
        .await
        .expect("the fourth attempt answers");
    assert_eq!(reply.get_ref().attempt, 4);
    assert_eq!(rig.server_attempts(), 4);
    assert_eq!(rig.previous(), some(&["1", "2", "3"]));
    // A6's pauses: U[0, 100·2^(n−1)) ms, on the paused clock (the loopback takes no virtual
    // time).
    let backoff = RetryBackoff::new(&policy, Jitter::A6);
    for (i, pause) in rig.pauses().into_iter().enumerate() {
        let (low, high) = backoff.bounds(i as u32 + 1);
        assert!(within(pause, low, high), "pause {}: {pause:?}", i + 1);
    }
    assert_eq!(rig.counters.retries(), 3);
    assert_eq!(rig.counters.attempts(), 4);
    assert_eq!(rig.counters.transparent_retries(), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn c_cores_jitter_keeps_pauses_within_twenty_percent() {
    let policy = retry(5, ms(100), ms(1000), &[Code::Unavailable]);
    let layer = GrpcRetryLayer::new(config(policy.clone(), None)).jitter(Jitter::CCore);
    let mut rig = start_rig(layer).await;
    for call in 0..10 {
        let reply = rig
            .client
            .unary(message("unavailable_then_ok:4", call))
            .await
            .expect("the fifth attempt answers");
        assert_eq!(reply.get_ref().attempt, 5);
    }
    let sent = rig.sent();
    let backoff = RetryBackoff::new(&policy, Jitter::CCore);
    for call in sent.chunks(5) {
        for (i, pair) in call.windows(2).enumerate() {
            let pause = pair[1].at - pair[0].at;
            let (low, high) = backoff.bounds(i as u32 + 1);
            assert!(within(pause, low, high), "pause {}: {pause:?}", i + 1);
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn pushback_replaces_the_pause_exactly_and_resets_the_backoff() {
    let policy = retry(
        4,
        ms(100),
        ms(1000),
        &[Code::Unavailable, Code::ResourceExhausted],
    );
    let mut rig = start_rig(GrpcRetryLayer::new(config(policy, None))).await;
    let reply = rig
        .client
        .unary(message("pushback:700", 0))
        .await
        .expect("the third attempt answers");
    assert_eq!(reply.get_ref().attempt, 3);
    let pauses = rig.pauses();
    assert_eq!(pauses[0], ms(700), "the server's pushback, exactly");
    // A draw of full jitter below initialBackoff, which tokio's timer rounds up to the
    // millisecond: a draw above 99 ms is waited 100 ms (about one run in a hundred failed on
    // `< 100 ms`).
    assert!(
        pauses[1] <= ms(100),
        "the backoff starts again from initialBackoff: {:?}",
        pauses[1]
    );
    assert_eq!(rig.previous(), some(&["1", "2"]));

    // A pushback longer than maxBackoff is still waited out whole.
    let mut rig2 = start_rig(GrpcRetryLayer::new(config(
        retry(2, ms(10), ms(20), &[Code::ResourceExhausted]),
        None,
    )))
    .await;
    let status = rig2
        .client
        .unary(message("pushback:5000", 0))
        .await
        .expect_err("UNAVAILABLE is not retryable here");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(rig2.pauses(), [ms(5000)]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_negative_pushback_and_a_code_not_in_the_config_stop_at_once() {
    let policy = retry(
        5,
        ms(100),
        ms(1000),
        &[Code::Unavailable, Code::ResourceExhausted],
    );
    let mut rig = start_rig(GrpcRetryLayer::new(config(policy, None))).await;
    let status = rig
        .client
        .unary(message("pushback_stop", 0))
        .await
        .expect_err("RESOURCE_EXHAUSTED");
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(
        status
            .metadata()
            .get("x-server-attempt")
            .map(|v| v.to_str().ok()),
        Some(Some("1")),
        "the server's own status, with its metadata"
    );
    let status = rig
        .client
        .unary(message("internal", 0))
        .await
        .expect_err("INTERNAL");
    assert_eq!(status.code(), Code::Internal);
    assert_eq!(rig.server_attempts(), 2, "one attempt each");
    assert_eq!(rig.counters.retries(), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_server_stream_is_committed_by_its_headers_and_never_rerun() {
    let policy = retry(5, ms(100), ms(1000), &[Code::Unavailable]);
    let mut rig = start_rig(GrpcRetryLayer::new(config(policy, None))).await;

    // Two messages, then UNAVAILABLE: delivered once, never re-run.
    let mut stream = rig
        .client
        .server_stream(message("stream_fails_after:2", 0))
        .await
        .expect("headers")
        .into_inner();
    let mut delivered = Vec::new();
    let status = loop {
        match stream.message().await {
            Ok(Some(reply)) => delivered.push((reply.attempt, reply.index)),
            Ok(None) => panic!("the stream ended without its error"),
            Err(status) => break status,
        }
    };
    assert_eq!(delivered, [(1, 0), (1, 1)]);
    assert_eq!(status.code(), Code::Unavailable);

    // Headers, then UNAVAILABLE without a message: committed by the headers.
    let mut stream = rig
        .client
        .server_stream(message("stream_headers_then_error", 0))
        .await
        .expect("headers")
        .into_inner();
    assert_eq!(
        stream.message().await.expect_err("the error").code(),
        Code::Unavailable
    );
    assert_eq!(rig.server_attempts(), 2, "neither stream was re-run");

    // A trailers-only failure commits nothing: retried until the stream opens.
    let mut stream = rig
        .client
        .server_stream(message("stream_unavailable_then_ok:2", 0))
        .await
        .expect("the third attempt opens")
        .into_inner();
    let mut delivered = Vec::new();
    while let Some(reply) = stream.message().await.expect("OK") {
        delivered.push((reply.attempt, reply.index));
    }
    assert_eq!(delivered, [(3, 0), (3, 1), (3, 2)]);
    assert_eq!(rig.server_attempts(), 5);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_client_stream_is_replayed_whole_and_one_above_the_limit_is_sent_once() {
    let policy = retry(5, ms(100), ms(1000), &[Code::Unavailable]);
    let mut rig = start_rig(GrpcRetryLayer::new(config(policy.clone(), None))).await;
    let messages = vec![message("unavailable_then_ok:2", 0); 3];
    let reply = rig
        .client
        .client_stream(futures_util::stream::iter(messages))
        .await
        .expect("the third attempt answers");
    assert_eq!(reply.get_ref().attempt, 3);
    let received: Vec<u32> = rig
        .server
        .lock()
        .expect("not poisoned")
        .iter()
        .map(|r| r.received)
        .collect();
    assert_eq!(
        received,
        [3, 3, 3],
        "every attempt carried the three messages"
    );

    // 3 messages of 1 KiB over a 2 KiB buffer: sent once, its status returned.
    let layer = GrpcRetryLayer::new(config(policy, None)).buffer_limit(2048);
    let mut rig = start_rig(layer).await;
    let mut big = message("unavailable_then_ok:2", 1);
    big.payload = vec![7; 1024];
    let status = rig
        .client
        .client_stream(futures_util::stream::iter(vec![big; 3]))
        .await
        .expect_err("UNAVAILABLE, not retried");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(rig.server_attempts(), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn throttling_follows_a6s_token_arithmetic() {
    // maxTokens 10, tokenRatio 0.1, maxAttempts 4, 20 failing calls. Tokens start at 10; a
    // failure takes 1, a retry needs more than 5 left. Call 1: fails (9), retry, fails (8),
    // retry, fails (7), retry, fails (6): 4 attempts, maxAttempts reached. Call 2: fails (5):
    // not above 5, throttled; so is every later call, down to 0. 4 + 19 = 23 attempts.
    let policy = retry(4, ms(10), ms(10), &[Code::Unavailable]);
    let throttling = RetryThrottling::new(10, 0.1).expect("valid");
    let registry = ThrottleRegistry::new();
    let layer = GrpcRetryLayer::new(config(policy, Some(throttling)))
        .throttle_registry(&registry, "scripted");
    let throttle = Arc::clone(layer.throttle().expect("a throttle"));
    let mut rig = start_rig(layer).await;
    for call in 0..20 {
        let status = rig
            .client
            .unary(message("always_unavailable", call))
            .await
            .expect_err("UNAVAILABLE");
        assert_eq!(status.code(), Code::Unavailable);
    }
    assert_eq!(rig.server_attempts(), 23);
    assert_eq!(rig.counters.throttled(), 19);
    assert_eq!(throttle.milli_tokens(), 0);
    // Successes give tokenRatio each: 51 of them lift the count above 5 again.
    for call in 0..51 {
        rig.client.unary(message("ok", call)).await.expect("OK");
    }
    assert_eq!(throttle.milli_tokens(), 5100);
    assert!(throttle.allows_retry());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_method_timeout_is_the_deadline_of_the_whole_call() {
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .retry_policy(retry(5, ms(1000), ms(1000), &[Code::Unavailable]))
        .timeout(ms(300))
        .build()
        .expect("valid");
    let config = ServiceConfig::builder()
        .method_config(method)
        .build()
        .expect("valid");
    let mut rig = start_rig(GrpcRetryLayer::new(config)).await;
    let start = Instant::now();
    let status = rig
        .client
        .unary(message("always_unavailable", 0))
        .await
        .expect_err("the deadline");
    assert_eq!(status.code(), Code::DeadlineExceeded);
    // Not after the pause (up to 1 s): at the deadline.
    assert!(start.elapsed() <= ms(300), "{:?}", start.elapsed());
    assert_eq!(rig.counters.deadline_exceeded(), 1);
    // The first attempt told the server the time left.
    let sent = rig.sent();
    assert_eq!(sent[0].timeout.as_deref(), Some("300000u"));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn hedging_sends_a_copy_after_the_delay_and_the_first_answer_wins() {
    let mut rig = start_rig(GrpcRetryLayer::new(hedging(
        3,
        ms(100),
        &[Code::Unavailable],
    )))
    .await;
    // The first attempt answers after 500 ms; the copy sent at 100 ms answers at once.
    let reply = rig
        .client
        .unary(message("slow_first:500", 0))
        .await
        .expect("OK");
    assert_eq!(reply.get_ref().attempt, 2, "the copy's answer");
    let sent = rig.sent();
    assert_eq!(sent.len(), 2, "the third copy was never needed: {sent:?}");
    assert_eq!(sent[1].at - sent[0].at, ms(100));
    assert_eq!(rig.previous(), some(&["1"]));
    assert_eq!(rig.counters.hedged_copies(), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn hedging_sends_the_next_copy_at_once_after_a_non_fatal_status() {
    let mut rig = start_rig(GrpcRetryLayer::new(hedging(
        3,
        ms(1000),
        &[Code::Unavailable],
    )))
    .await;
    let status = rig
        .client
        .unary(message("always_unavailable", 0))
        .await
        .expect_err("UNAVAILABLE");
    assert_eq!(status.code(), Code::Unavailable);
    let sent = rig.sent();
    assert_eq!(sent.len(), 3);
    assert!(
        sent.iter().all(|s| s.at == Duration::ZERO),
        "each copy at once after the one before failed, not 1 s apart: {sent:?}"
    );
    assert_eq!(rig.previous(), some(&["1", "2"]));
    // A fatal status ends the call at once.
    let status = rig
        .client
        .unary(message("internal", 0))
        .await
        .expect_err("INTERNAL");
    assert_eq!(status.code(), Code::Internal);
    assert_eq!(rig.server_attempts(), 4);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_copys_pushback_delays_the_next_copy_exactly() {
    let mut rig = start_rig(GrpcRetryLayer::new(hedging(
        3,
        ms(1000),
        &[Code::ResourceExhausted, Code::Unavailable],
    )))
    .await;
    // Copy 1: RESOURCE_EXHAUSTED with a pushback of 300 ms; copy 2: UNAVAILABLE; copy 3: OK.
    let reply = rig
        .client
        .unary(message("pushback:300", 0))
        .await
        .expect("OK");
    assert_eq!(reply.get_ref().attempt, 3);
    let at: Vec<Duration> = rig.sent().iter().map(|s| s.at).collect();
    // The pushback's 300 ms, not the hedging delay's 1 s; then at once after a non-fatal status.
    assert_eq!(at, [ms(0), ms(300), ms(300)]);
    assert_eq!(rig.previous(), some(&["1", "2"]));
    assert_eq!(rig.counters.hedged_copies(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_refused_connection_is_retried_at_once_then_by_the_policy() {
    let port = retry_grpc_interop::harness::closed_port().expect("a free port");
    let channel = Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .expect("a valid URI")
        .connect_lazy();
    let policy = retry(3, ms(100), ms(1000), &[Code::Unavailable]);
    let mut rig = rig_on(
        GrpcRetryLayer::new(config(policy, None)),
        channel,
        Arc::default(),
    );
    let status = rig
        .client
        .unary(message("ok", 0))
        .await
        .expect_err("nothing listens");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    // 3 attempts of the policy, the first sent twice (the transparent retry, the same header).
    assert_eq!(
        rig.previous(),
        [None, None, Some("1".into()), Some("2".into())]
    );
    assert_eq!(rig.counters.transparent_retries(), 1);
    assert_eq!(rig.counters.retries(), 2);
    let pauses = rig.pauses();
    assert_eq!(
        pauses[0],
        Duration::ZERO,
        "the transparent retry goes at once"
    );
}

/// A hand-written gRPC answer: `Reply { attempt, index: 0, received: 1 }` and `grpc-status: 0`.
fn ok_reply(attempt: u32) -> (Response<()>, bytes::Bytes, http::HeaderMap) {
    use prost::Message as _;
    let reply = Reply {
        attempt,
        index: 0,
        received: 1,
    };
    let message = reply.encode_to_vec();
    let mut frame = vec![0u8];
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(&message);
    let response = Response::builder()
        .header("content-type", "application/grpc")
        .body(())
        .expect("valid");
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    (response, frame.into(), trailers)
}

/// An HTTP/2 server that refuses the first stream (REFUSED_STREAM: not processed) and answers
/// the next; each stream's `grpc-previous-rpc-attempts` kept.
pub(crate) async fn refusing_the_first_stream()
-> (std::net::SocketAddr, Arc<Mutex<Vec<Option<String>>>>) {
    let (listener, addr) = bind().await.expect("binds");
    let headers = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&headers);
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.expect("a connection");
        let mut connection = h2::server::handshake(socket).await.expect("h2");
        let mut n = 0;
        while let Some(Ok((request, mut respond))) = connection.accept().await {
            n += 1;
            seen.lock().expect("not poisoned").push(
                request
                    .headers()
                    .get("grpc-previous-rpc-attempts")
                    .map(|v| v.to_str().unwrap_or("?").to_owned()),
            );
            if n == 1 {
                respond.send_reset(h2::Reason::REFUSED_STREAM);
                continue;
            }
            let (response, body, trailers) = ok_reply(n);
            let mut stream = respond.send_response(response, false).expect("sends");
            stream.send_data(body, false).expect("sends");
            stream.send_trailers(trailers).expect("sends");
        }
    });
    (addr, headers)
}

/// An HTTP/2 server for a hedged call: the first stream (the first copy) answers after 10 s,
/// the second (the hedged copy) is refused (REFUSED_STREAM: not processed), the others answered
/// at once; each stream's `grpc-previous-rpc-attempts` kept.
pub(crate) async fn refusing_the_hedged_copy()
-> (std::net::SocketAddr, Arc<Mutex<Vec<Option<String>>>>) {
    let (listener, addr) = bind().await.expect("binds");
    let headers = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&headers);
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.expect("a connection");
        let mut connection = h2::server::handshake(socket).await.expect("h2");
        let mut n = 0;
        while let Some(Ok((request, mut respond))) = connection.accept().await {
            n += 1;
            seen.lock().expect("not poisoned").push(
                request
                    .headers()
                    .get("grpc-previous-rpc-attempts")
                    .map(|v| v.to_str().unwrap_or("?").to_owned()),
            );
            if n == 2 {
                respond.send_reset(h2::Reason::REFUSED_STREAM);
                continue;
            }
            let wait = if n == 1 { 10 } else { 0 };
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(wait)).await;
                let (response, body, trailers) = ok_reply(n);
                // The call may have ended (the first copy dropped): nothing to answer.
                if let Ok(mut stream) = respond.send_response(response, false) {
                    let _ = stream.send_data(body, false);
                    let _ = stream.send_trailers(trailers);
                }
            });
        }
    });
    (addr, headers)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_transparent_retry_takes_nothing_from_the_layers_budget_and_deposits_once() {
    // One token per call's first attempt, none in reserve: the call deposits 1, and a retry
    // would take it back.
    let budget = Arc::new(
        retry_runtime::RetryBudget::new()
            .ratio(1.0)
            .min_per_second(0),
    );
    let (addr, headers) = refusing_the_first_stream().await;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_lazy();
    let policy = retry(3, ms(100), ms(1000), &[Code::Unavailable]);
    let layer = GrpcRetryLayer::new(config(policy, None)).budget(Arc::clone(&budget));
    let mut rig = rig_on(layer, channel, Arc::default());
    let reply = rig.client.unary(message("ok", 0)).await.expect("OK");
    assert_eq!(reply.get_ref().attempt, 2, "the second stream answered");
    assert_eq!(*headers.lock().expect("not poisoned"), [None, None]);
    assert_eq!(rig.counters.transparent_retries(), 1);
    assert_eq!(rig.counters.retries(), 0);
    // The call's one deposit, no second one for the attempt sent again, and no token taken.
    assert_eq!(budget.available(), 1.0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn wait_for_ready_reconnects_on_c_cores_connection_backoff() {
    let port = retry_grpc_interop::harness::closed_port().expect("a free port");
    let channel = Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .expect("a valid URI")
        .connect_lazy();
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .wait_for_ready(true)
        .timeout(ms(20_000))
        .build()
        .expect("valid");
    let config = ServiceConfig::builder()
        .method_config(method)
        .build()
        .expect("valid");
    let mut rig = rig_on(GrpcRetryLayer::new(config), channel, Arc::default());
    let start = Instant::now();
    let status = rig
        .client
        .unary(message("ok", 0))
        .await
        .expect_err("nothing listens");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(start.elapsed(), ms(20_000), "at the deadline, not before");
    // Reconnect n after min(1 s·1.6^(n−1), 120 s)·U[0.8, 1.2]: at least 1, 1.6, 2.56, 4.096 s
    // apart within ±20 %, so 5 or 6 attempts in 20 s, each the same first attempt.
    let pauses = rig.pauses();
    assert!((4..=5).contains(&pauses.len()), "{pauses:?}");
    for (n, pause) in pauses.iter().enumerate() {
        let nominal = Duration::from_secs(1).mul_f64(1.6f64.powi(n as i32));
        assert!(
            *pause >= nominal.mul_f64(0.8) && *pause <= nominal.mul_f64(1.2),
            "reconnect {}: {pause:?} not within 20 % of {nominal:?}",
            n + 1
        );
    }
    assert!(rig.previous().iter().all(Option::is_none));
    // Counted as decided, as a retry is: the last wait, which the deadline cut, too.
    assert_eq!(rig.counters.transparent_retries(), rig.sent().len() as u64);
    assert_eq!(rig.counters.retries(), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_refused_stream_is_retried_transparently_without_counting() {
    let (addr, headers) = refusing_the_first_stream().await;
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_lazy();
    let policy = retry(3, ms(100), ms(1000), &[Code::Unavailable]);
    let mut rig = rig_on(
        GrpcRetryLayer::new(config(policy, None)),
        channel,
        Arc::default(),
    );
    let reply = rig.client.unary(message("ok", 0)).await.expect("OK");
    assert_eq!(reply.get_ref().attempt, 2, "the second stream answered");
    assert_eq!(
        *headers.lock().expect("not poisoned"),
        [None, None],
        "a transparent retry is not a retry: no grpc-previous-rpc-attempts"
    );
    assert_eq!(rig.counters.transparent_retries(), 1);
    assert_eq!(rig.counters.retries(), 0);
    assert_eq!(rig.pauses(), [Duration::ZERO]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn wait_for_ready_waits_for_the_server_until_the_deadline() {
    let port = retry_grpc_interop::harness::closed_port().expect("a free port");
    let channel = Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .expect("a valid URI")
        .connect_lazy();
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .wait_for_ready(true)
        .timeout(ms(3000))
        .build()
        .expect("valid");
    let config = ServiceConfig::builder()
        .method_config(method)
        .build()
        .expect("valid");
    let mut rig = rig_on(GrpcRetryLayer::new(config), channel, Arc::default());
    let start = Instant::now();
    let status = rig
        .client
        .unary(message("ok", 0))
        .await
        .expect_err("nothing listens");
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(start.elapsed(), ms(3000), "at the deadline, not before");
    // Connection attempts 0.8–1.2 s, then 1.28–1.92 s apart: 2 or 3 in 3 s.
    let sent = rig.sent();
    assert!((2..=3).contains(&sent.len()), "{sent:?}");
    assert!(sent[1].at >= ms(800) && sent[1].at <= ms(1200), "{sent:?}");
}

/// What the layer's async hooks heard: when each `notify` began and ended (from the rig's
/// start) and the pause it announced, and when `on_give_up` ended.
#[derive(Default)]
struct Heard {
    notified: Mutex<Vec<(Duration, Duration, Duration)>>,
    gave_up: Mutex<Option<Duration>>,
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn async_hooks_are_awaited_before_each_pause_and_before_the_call_returns() {
    let policy = retry(3, ms(1000), ms(10_000), &[Code::Unavailable]);
    let (heard, t0) = (Arc::new(Heard::default()), Instant::now());
    let (notified, gave_up) = (Arc::clone(&heard), Arc::clone(&heard));
    let layer = GrpcRetryLayer::new(config(policy, None))
        .notify_async(move |event: &retry_runtime::RetryEvent| {
            let (heard, pause) = (Arc::clone(&notified), event.pause);
            async move {
                let began = t0.elapsed();
                tokio::time::sleep(ms(300)).await;
                let ended = t0.elapsed();
                heard
                    .notified
                    .lock()
                    .expect("not poisoned")
                    .push((began, ended, pause));
            }
        })
        .on_give_up_async(move |_: &retry_runtime::GiveUp| {
            let heard = Arc::clone(&gave_up);
            async move {
                tokio::time::sleep(ms(200)).await;
                *heard.gave_up.lock().expect("not poisoned") = Some(t0.elapsed());
            }
        });
    let mut rig = start_rig(layer).await;
    let status = rig
        .client
        .unary(message("unavailable_then_ok:9", 0))
        .await
        .expect_err("every attempt is unavailable");
    assert_eq!(status.code(), Code::Unavailable);
    let (sent, notified) = (
        rig.sent(),
        heard.notified.lock().expect("not poisoned").clone(),
    );
    assert_eq!((sent.len(), notified.len()), (3, 2));
    for (n, &(began, ended, pause)) in notified.iter().enumerate() {
        // Each hook began as its attempt failed (the loopback takes no virtual time) and ran
        // 300 ms inside the pause it announced; the next attempt came when the rest of the
        // pause (rounded up to tokio's 1 ms tick) ended, or at once if the hook outlasted it.
        assert_eq!(began, sent[n].at);
        assert_eq!(ended, began + ms(300));
        let rest = pause.saturating_sub(ms(300));
        let rest = Duration::from_millis(rest.as_nanos().div_ceil(1_000_000) as u64);
        assert_eq!(sent[n + 1].at, ended + rest, "pause {}: {pause:?}", n + 1);
    }
    assert_eq!(
        *heard.gave_up.lock().expect("not poisoned"),
        Some(sent[2].at + ms(200))
    );
    assert_eq!(t0.elapsed(), sent[2].at + ms(200));
}

/// Counts its drops: a hook's future dropped before it ended.
struct DropGuard(Arc<std::sync::atomic::AtomicU32>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_endless_async_hook_ends_with_the_calls_deadline_and_is_dropped() {
    let policy = retry(3, ms(1000), ms(10_000), &[Code::Unavailable]);
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .retry_policy(policy)
        .timeout(ms(2500));
    let config = ServiceConfig::builder()
        .method_config(method.build().expect("valid"))
        .build()
        .expect("a valid config");
    let dropped = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let guarded = Arc::clone(&dropped);
    let layer = GrpcRetryLayer::new(config).notify_async(move |_: &retry_runtime::RetryEvent| {
        let guard = DropGuard(Arc::clone(&guarded));
        async move {
            let _guard = guard;
            std::future::pending::<()>().await
        }
    });
    let mut rig = start_rig(layer).await;
    let started = Instant::now();
    let status = rig
        .client
        .unary(message("unavailable_then_ok:9", 0))
        .await
        .expect_err("the hook never ends");
    // The call's deadline (the method's `timeout`) ends it, and drops the hook with it.
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(started.elapsed(), ms(2500));
    assert_eq!(rig.server_attempts(), 1);
    assert_eq!(dropped.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_panicking_async_hook_is_contained_and_counted() {
    let policy = retry(3, ms(1000), ms(10_000), &[Code::Unavailable]);
    let layer = GrpcRetryLayer::new(config(policy, None)).notify_async(
        |_: &retry_runtime::RetryEvent| async {
            tokio::time::sleep(ms(1)).await;
            panic!("the hook panicked");
        },
    );
    let mut rig = start_rig(layer).await;
    // The call goes on as if the hook had returned: the second attempt answers.
    let reply = rig
        .client
        .unary(message("unavailable_then_ok:1", 0))
        .await
        .expect("the retry answers");
    assert_eq!(reply.get_ref().attempt, 2);
    assert_eq!(rig.server_attempts(), 2);
    assert_eq!(rig.counters.retries(), 1);
    assert_eq!(rig.counters.hooks_panicked(), 1);
}

//! The door's retry throttle is per server, as gRFC A6 keeps one `retryThrottling` count per
//! server name (issue 39, item 4): one layer cloned over channels to two servers, or one service
//! whose clients name two authorities, throttles each server apart; a layer given the server's
//! name shares one count across channels to it. Real scripted tonic servers on loopback, tonic's
//! generated client, tokio's paused clock.
//!
//! The arithmetic (`maxTokens 10`, `tokenRatio 0.1`, `maxAttempts 4`, in thousandths of a token):
//! a failure takes 1000, an `OK` gives 100, and a retry needs more than 5000 left after its
//! failure. 20 calls that always fail: the first makes 4 attempts (10000 → 6000), each other
//! one (6000 → 5000 is not above 5000, then down to 0): 23 attempts, 19 calls throttled, 0
//! left. 5 calls that fail once, then succeed: call `k` takes the count from
//! `10000 − 900·(k − 1)` to `10000 − 900·k` and is retried as long as `9100 − 900·(k − 1)` is
//! above 5000, which holds for every `k ≤ 5`: 10 attempts, 5 `OK`, 5500 left.

use crate::common::{SERVICE, ms};
use http::{Request, Uri};
use retry_grpc::channel::{GrpcRetry, GrpcRetryLayer};
use retry_grpc::{
    MethodConfig, MethodName, RetryPolicy, RetryThrottle, RetryThrottling, ServiceConfig,
    ThrottleRegistry,
};
use retry_grpc_interop::proto::Request as Message;
use retry_grpc_interop::proto::scripted_client::ScriptedClient;
use retry_grpc_interop::server::{AttemptRecord, ScriptedService, bind, serve};
use std::sync::{Arc, Mutex};
use tonic::Code;
use tonic::body::Body;
use tonic::codegen::{Body as HttpBody, Bytes, StdError};
use tonic::transport::Channel;
use tower::ServiceExt;

/// A scripted server on loopback: a lazy channel to it, and the attempts it saw.
struct Server {
    channel: Channel,
    seen: Arc<Mutex<Vec<AttemptRecord>>>,
}

impl Server {
    async fn start() -> Self {
        let (listener, addr) = bind().await.expect("binds");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let service = ScriptedService::new(move |record| {
            sink.lock().expect("not poisoned").push(record.clone())
        });
        tokio::spawn(serve(service, listener));
        let channel = Channel::from_shared(format!("http://{addr}"))
            .expect("a valid URI")
            .connect_lazy();
        Server { channel, seen }
    }

    fn attempts(&self) -> usize {
        self.seen.lock().expect("not poisoned").len()
    }
}

/// `maxAttempts 4` on `UNAVAILABLE`, 10 ms pauses, `retryThrottling {10, 0.1}`.
fn layer() -> GrpcRetryLayer {
    let policy = RetryPolicy::builder()
        .max_attempts(4)
        .initial_backoff(ms(10))
        .max_backoff(ms(10))
        .backoff_multiplier(2.0)
        .retryable_status_codes([Code::Unavailable])
        .build()
        .expect("a valid policy");
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .retry_policy(policy)
        .build()
        .expect("a valid method config");
    let config = ServiceConfig::builder()
        .method_config(method)
        .retry_throttling(RetryThrottling::new(10, 0.1).expect("valid"))
        .build()
        .expect("a valid config");
    GrpcRetryLayer::new(config)
}

fn message(scenario: &str, call: u32) -> Message {
    Message {
        scenario: scenario.to_owned(),
        call,
        payload: Vec::new(),
    }
}

/// 20 calls that always fail: every one ends `UNAVAILABLE` (the throttle stops 19 of them).
async fn twenty_failing_calls<T>(client: &mut ScriptedClient<T>)
where
    T: tonic::client::GrpcService<Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: HttpBody<Data = Bytes> + Send + 'static,
    <T::ResponseBody as HttpBody>::Error: Into<StdError> + Send,
{
    for call in 0..20 {
        let status = client
            .unary(message("always_unavailable", call))
            .await
            .expect_err("UNAVAILABLE");
        assert_eq!(status.code(), Code::Unavailable, "call {call}");
    }
}

/// 5 calls that fail once, then succeed: every one is retried and answered `OK`.
async fn five_calls_retried_once<T>(client: &mut ScriptedClient<T>)
where
    T: tonic::client::GrpcService<Body>,
    T::Error: Into<StdError>,
    T::ResponseBody: HttpBody<Data = Bytes> + Send + 'static,
    <T::ResponseBody as HttpBody>::Error: Into<StdError> + Send,
{
    for call in 0..5 {
        let reply = client
            .unary(message("unavailable_then_ok:1", call))
            .await
            .unwrap_or_else(|status| panic!("call {call} was not retried: {status:?}"));
        assert_eq!(
            reply.get_ref().attempt,
            2,
            "call {call}: the retry answered"
        );
    }
}

fn throttle_of<S>(service: &GrpcRetry<S>) -> Arc<RetryThrottle> {
    Arc::clone(service.throttle().expect("the config has retryThrottling"))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn one_layer_cloned_over_two_servers_throttles_them_apart() {
    let (a, b) = (Server::start().await, Server::start().await);
    let layer = layer();
    let counters = layer.counters();
    let to_a = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(a.channel.clone());
    let to_b = tower::ServiceBuilder::new()
        .layer(layer)
        .service(b.channel.clone());
    let (throttle_a, throttle_b) = (throttle_of(&to_a), throttle_of(&to_b));

    // Server A fails every call: its count falls to 0.
    twenty_failing_calls(&mut ScriptedClient::new(to_a)).await;
    assert_eq!(a.attempts(), 23);
    assert_eq!(counters.throttled(), 19);
    assert_eq!(throttle_a.milli_tokens(), 0);
    // B's count is untouched, so B's calls are still retried. With one count for both (the
    // defect), B's first failure would have been throttled: 5 attempts, 5 UNAVAILABLE.
    assert_eq!(throttle_b.milli_tokens(), 10_000);
    five_calls_retried_once(&mut ScriptedClient::new(to_b)).await;
    assert_eq!(b.attempts(), 10);
    assert_eq!(throttle_b.milli_tokens(), 5_500);
    assert_eq!(counters.throttled(), 19, "B had no call throttled");
    // B's successes gave A nothing.
    assert_eq!(throttle_a.milli_tokens(), 0);
    assert!(!Arc::ptr_eq(&throttle_a, &throttle_b));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn one_service_counts_each_authority_its_clients_name_apart() {
    // One service under the layer, routing on the authority of the request URI as a proxy or a
    // client with several origins does (tonic's channel then puts its own origin in).
    let (a, b) = (Server::start().await, Server::start().await);
    let (channel_a, channel_b) = (a.channel.clone(), b.channel.clone());
    let route = tower::service_fn(move |request: Request<Body>| {
        let channel = match request.uri().host() {
            Some("a.example") => channel_a.clone(),
            _ => channel_b.clone(),
        };
        channel.oneshot(request)
    });
    let service = tower::ServiceBuilder::new()
        .layer(layer())
        .service(tower::util::BoxCloneService::new(route));
    let origin = |uri: &'static str| Uri::from_static(uri);
    let mut to_a = ScriptedClient::with_origin(service.clone(), origin("http://a.example"));
    let mut to_b = ScriptedClient::with_origin(service, origin("http://b.example:50051"));

    twenty_failing_calls(&mut to_a).await;
    assert_eq!(a.attempts(), 23);
    five_calls_retried_once(&mut to_b).await;
    assert_eq!(b.attempts(), 10);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn layers_given_the_same_server_name_share_one_count() {
    // Two channels (two layers) to one server, named alike: A6's one count per server name.
    let server = Server::start().await;
    let registry = ThrottleRegistry::new();
    let name = "dns:///scripted.example:50051";
    let first = tower::ServiceBuilder::new()
        .layer(layer().throttle_registry(&registry, name))
        .service(server.channel.clone());
    let second = tower::ServiceBuilder::new()
        .layer(layer().throttle_registry(&registry, name))
        .service(server.channel.clone());
    let throttle = throttle_of(&first);
    assert!(Arc::ptr_eq(&throttle, &throttle_of(&second)));

    // 10 failing calls on each, in turn: the arithmetic of 20 calls on one count.
    let (mut first, mut second) = (ScriptedClient::new(first), ScriptedClient::new(second));
    for call in 0..20 {
        let client = if call % 2 == 0 {
            &mut first
        } else {
            &mut second
        };
        let status = client
            .unary(message("always_unavailable", call))
            .await
            .expect_err("UNAVAILABLE");
        assert_eq!(status.code(), Code::Unavailable);
    }
    assert_eq!(server.attempts(), 23);
    assert_eq!(throttle.milli_tokens(), 0);
}

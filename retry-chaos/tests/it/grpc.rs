//! The gRPC door (retry-grpc's `GrpcRetryLayer`) over the chaos layer, over a tonic `Channel`
//! to the scripted tonic server on loopback, on tokio's paused clock: an injected status with
//! `grpc-retry-pushback-ms` is read by the door as the server's.

use crate::common::within_four_sigma;
use retry_chaos::tower::ChaosLayer;
use retry_chaos::{Attempts, GRPC_ABORT_HEADER, Rule, Site};
use retry_grpc::channel::GrpcRetryLayer;
use retry_grpc::{MethodConfig, MethodName, RetryPolicy, ServiceConfig};
use retry_grpc_interop::proto::Request as Message;
use retry_grpc_interop::proto::scripted_client::ScriptedClient;
use retry_grpc_interop::server::{ScriptedService, bind, serve};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tonic::Code;
use tonic::transport::Channel;

const SERVICE: &str = "retry.interop.Scripted";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn config(max_attempts: u32, codes: &[Code]) -> ServiceConfig {
    let policy = RetryPolicy::builder()
        .max_attempts(max_attempts)
        .initial_backoff(ms(100))
        .max_backoff(ms(1_000))
        .backoff_multiplier(2.0)
        .retryable_status_codes(codes.iter().copied())
        .build()
        .expect("a valid retry policy");
    let method = MethodConfig::builder()
        .name(MethodName::service(SERVICE))
        .retry_policy(policy)
        .build()
        .expect("a valid method config");
    ServiceConfig::builder()
        .method_config(method)
        .build()
        .expect("a valid service config")
}

fn message(scenario: &str, call: u32) -> Message {
    Message {
        scenario: scenario.to_owned(),
        call,
        payload: Vec::new(),
    }
}

/// The scripted server, and a channel to it; the attempts the server received.
async fn channel() -> (Channel, Arc<Mutex<usize>>) {
    let (listener, addr) = bind().await.expect("binds");
    let received = Arc::new(Mutex::new(0));
    let count = Arc::clone(&received);
    let service = ScriptedService::new(move |_| *count.lock().expect("not poisoned") += 1);
    tokio::spawn(serve(service, listener));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_lazy();
    (channel, received)
}

/// `RESOURCE_EXHAUSTED` with a pushback of 700 ms injected into the first attempt: the door
/// waits exactly 700 ms, as it waits out the scripted server's own (`pushback:700`), and the
/// server sees only the retry.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_injected_pushback_is_honoured_exactly_as_a_real_one() {
    let codes = [Code::Unavailable, Code::ResourceExhausted];
    // The real one: RESOURCE_EXHAUSTED with 700 ms, then UNAVAILABLE, then OK.
    let (real_channel, _) = channel().await;
    let mut real = ScriptedClient::new(
        tower::ServiceBuilder::new()
            .layer(GrpcRetryLayer::new(config(4, &codes)))
            .service(real_channel),
    );
    let started = Instant::now();
    real.unary(message("pushback:700", 0))
        .await
        .expect("the third attempt answers");
    let real_elapsed = started.elapsed();
    assert!(
        real_elapsed >= ms(700) && real_elapsed <= ms(800),
        "{real_elapsed:?}"
    );

    let site = Site::new("grpc-pushback")
        .seed(31)
        .rule(
            Rule::grpc(Code::ResourceExhausted as u16)
                .pushback(Some(ms(700)))
                .attempts(Attempts::Only(1)),
        )
        .install();
    let door = GrpcRetryLayer::new(config(4, &codes)).name("grpc-pushback");
    let counters = door.counters();
    let (channel, received) = channel().await;
    let mut client = ScriptedClient::new(
        tower::ServiceBuilder::new()
            .layer(door)
            .layer(ChaosLayer::new(site.clone()).sink(counters.clone()))
            .service(channel),
    );
    let started = Instant::now();
    client
        .unary(message("ok", 0))
        .await
        .expect("the retry answers");
    assert_eq!(started.elapsed(), ms(700), "the injected pushback, exactly");
    assert_eq!(*received.lock().expect("not poisoned"), 1);
    assert_eq!((counters.injected(), counters.retries()), (1, 1));
    site.remove();
}

/// 1,000 calls at a rate of 0.3 of `INTERNAL` (not retried): within 4 standard deviations of
/// 300 (±58), each the call's status; a pushback that says "do not retry" stops the call; a
/// header-requested `UNAVAILABLE` only where allowed.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_grpc_rate_a_stopping_pushback_and_header_requests() {
    let site = Site::new("grpc-rate")
        .seed(32)
        .rule(Rule::grpc(Code::Internal as u16).rate(0.3))
        .install();
    let (channel, received) = channel().await;
    let mut client = ScriptedClient::new(
        tower::ServiceBuilder::new()
            .layer(GrpcRetryLayer::new(config(3, &[Code::Unavailable])))
            .layer(ChaosLayer::new(site.clone()))
            .service(channel.clone()),
    );
    let mut injected = 0;
    for call in 0..1_000 {
        match client.unary(message("ok", call)).await {
            Ok(_) => {}
            Err(status) if status.code() == Code::Internal => injected += 1,
            Err(status) => panic!("unexpected {status:?}"),
        }
    }
    site.remove();
    assert!(within_four_sigma(injected, 1_000, 0.3), "{injected}");
    assert_eq!(site.stats().answers, injected);
    assert_eq!(
        *received.lock().expect("not poisoned") as u64,
        1_000 - injected
    );

    // A negative pushback: the door does not retry a retryable code.
    let stop = Site::new("grpc-stop")
        .rule(Rule::grpc(Code::Unavailable as u16).pushback(None))
        .install();
    let mut client = ScriptedClient::new(
        tower::ServiceBuilder::new()
            .layer(GrpcRetryLayer::new(config(3, &[Code::Unavailable])))
            .layer(ChaosLayer::new(stop.clone()))
            .service(channel.clone()),
    );
    let status = client.unary(message("ok", 0)).await.expect_err("stopped");
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(stop.stats().answers, 1, "one attempt, not retried");
    stop.remove();

    // A request header asking for UNAVAILABLE, at a site that allows it and one that does not.
    let allowed = Site::new("grpc-header").allow_header_requests().install();
    let refused = Site::new("grpc-no-header").install();
    for (site, fails) in [(&allowed, true), (&refused, false)] {
        let mut client = ScriptedClient::new(
            tower::ServiceBuilder::new()
                .layer(GrpcRetryLayer::new(config(3, &[Code::Unavailable])))
                .layer(ChaosLayer::new(site.clone()))
                .service(channel.clone()),
        );
        let mut request = tonic::Request::new(message("ok", 0));
        request
            .metadata_mut()
            .insert(GRPC_ABORT_HEADER, "14".parse().expect("a header value"));
        let answer = client.unary(request).await;
        assert_eq!(answer.is_err(), fails, "{}", site.name());
    }
    // Three attempts, each answered UNAVAILABLE at the allowing site.
    assert_eq!(allowed.stats().answers, 3);
    allowed.remove();
    refused.remove();
}

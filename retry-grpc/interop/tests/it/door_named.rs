//! The door with a named policy beside its service config (`GrpcRetryLayer::named`): the name's
//! breaker, from a `retry-config` registry, looked up once per call, shared with the `Retrier`,
//! and replaced by a reload only when its settings change. A real tonic `Channel` to the
//! scripted server, on tokio's paused clock.

use crate::common::{ms, retry, retry_config};
use retry_config::{Config, Registry, retrier_with_breaker};
use retry_grpc::ServiceConfig;
use retry_grpc::channel::{GrpcRetry, GrpcRetryLayer};
use retry_grpc_interop::proto::Request as Message;
use retry_grpc_interop::proto::scripted_client::ScriptedClient;
use retry_grpc_interop::server::{ScriptedService, bind, serve};
use retry_runtime::CircuitOpen;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tonic::Code;
use tonic::transport::Channel;

fn ledger(max: u32, failures: u32) -> String {
    format!(
        "[retry.grpc-ledger]\nmax = {max}\nbreaker = {{ consecutive_failures = {failures}, open_for = \"1h\" }}\n"
    )
}

/// The error of the `Retrier` that shares the name's breaker.
#[derive(Debug)]
enum Failed {
    Busy,
    Open,
}

impl From<CircuitOpen> for Failed {
    fn from(_: CircuitOpen) -> Self {
        Failed::Open
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_named_breaker_is_shared_with_the_retrier_and_kept_across_a_reload_that_keeps_it() {
    let registry = Arc::new(Registry::new(
        Config::from_toml(&ledger(2, 2)).expect("valid"),
    ));
    let config = ServiceConfig::from_value(&retry_config(
        retry(5, ms(10), ms(100), &[Code::Unavailable]),
        None,
    ))
    .expect("valid");
    let lookups = Arc::new(AtomicUsize::new(0));
    let (chooser, counted) = (Arc::clone(&registry), Arc::clone(&lookups));
    let layer = GrpcRetryLayer::new(config).named(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        chooser.get("grpc-ledger")
    });
    let attempts = Arc::new(AtomicUsize::new(0));
    let (listener, addr) = bind().await.expect("binds");
    let seen = Arc::clone(&attempts);
    tokio::spawn(serve(
        ScriptedService::new(move |_| {
            seen.fetch_add(1, Ordering::SeqCst);
        }),
        listener,
    ));
    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("a valid URI")
        .connect_lazy();
    let mut client: ScriptedClient<GrpcRetry<Channel>> =
        ScriptedClient::new(tower_layer::Layer::layer(&layer, channel));
    let message = |call| Message {
        scenario: "always_unavailable".to_owned(),
        call,
        payload: Vec::new(),
    };

    // The service config allows 5 attempts; the name's breaker opens after 2 failures.
    let status = client.unary(message(0)).await.expect_err("UNAVAILABLE");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(lookups.load(Ordering::SeqCst), 1, "one lookup per call");

    // The same breaker for the `Retrier` under the name: open.
    let named = registry.get("grpc-ledger").expect("configured");
    let outcome = retrier_with_breaker::<(), Failed>(&named)
        .on(|failed: &Failed| matches!(failed, Failed::Busy))
        .run(|| Err(Failed::Busy));
    assert!(matches!(outcome, Err(Failed::Open)), "{outcome:?}");

    // A reload of the timings keeps the breaker: still open, the next call never reaches the
    // server.
    registry.reload_toml(&ledger(3, 2)).expect("valid");
    let status = client
        .unary(message(1))
        .await
        .expect_err("the breaker is open");
    assert!(status.message().contains("circuit open"), "{status:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 2);

    // A reload of the breaker's settings: a fresh breaker, closed; the call is sent, and its
    // third failure opens the new breaker.
    registry.reload_toml(&ledger(3, 3)).expect("valid");
    let status = client.unary(message(2)).await.expect_err("UNAVAILABLE");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 5);
    assert_eq!(lookups.load(Ordering::SeqCst), 3);
}

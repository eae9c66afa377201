//! The gRPC door's cost per call on the happy path (issue 26): `cargo bench -p retry-bench
//! --bench grpc_door`.
//!
//! - `grpc/in-memory`: the door over a `service_fn` that reads the request body and answers a
//!   unary gRPC answer at once (headers, one message, trailers with `grpc-status: 0`), drained
//!   to its trailers as tonic's client does; beside the `service_fn` alone. What is measured is
//!   the door: the method's config looked up, the body's tee, the request rebuilt, the engine's
//!   one decision, the answer's body wrapper, the boxed future.
//! - `grpc/loopback`: a generated client's unary call to a tonic server in the same process
//!   over a real `Channel` on loopback: plain, through the door, and through tower's `retry` with
//!   a hand-written policy that clones the request message (the way retries are done per method
//!   today, tower's `Retry` around a `service_fn` that calls the generated client).
//!
//! - `grpc/in-memory`, hedged: the door over the same `service_fn` under a `hedgingPolicy` (3
//!   copies, `hedgingDelay 1s`), whose first copy answers: the engine's hedged attempt, its
//!   schedule's timer and the door's hedging decider, where the retry rows have none.
//!
//! Every other config retries `UNAVAILABLE` up to 4 attempts; every call succeeds on the first.

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use retry_grpc::channel::GrpcRetryLayer;
use retry_grpc_interop::proto::scripted_client::ScriptedClient;
use retry_grpc_interop::proto::{Reply, Request as Message};
use retry_grpc_interop::server::{ScriptedService, bind, serve};
use std::convert::Infallible;
use std::hint::black_box;
use tonic::body::Body;
use tonic::transport::Channel;
use tower::{Service, ServiceExt};

const CONFIG: &str = r#"{
  "methodConfig": [{"name": [{"service": "retry.interop.Scripted"}],
    "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]
}"#;

const HEDGED: &str = r#"{
  "methodConfig": [{"name": [{"service": "retry.interop.Scripted"}],
    "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "1s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]
}"#;

/// A unary request as tonic's client sends it: the path, the headers, one length-prefixed
/// message.
fn grpc_request() -> Request<Body> {
    // `Request { scenario: "ok" }`, length-prefixed.
    const MESSAGE: &[u8] = &[0, 0, 0, 0, 4, 0x0a, 0x02, b'o', b'k'];
    Request::post("/retry.interop.Scripted/Unary")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Body::new(http_body_util::Full::new(Bytes::from_static(
            MESSAGE,
        ))))
        .expect("a request")
}

type Answer =
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// The answer of a unary call: headers, one message, `grpc-status: 0`; after reading the
/// request's body.
async fn answer(request: Request<Body>) -> Result<Response<Answer>, Infallible> {
    let _ = request.into_body().collect().await;
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = vec![
        Ok(Frame::data(Bytes::from_static(&[
            0, 0, 0, 0, 2, 0x08, 0x01,
        ]))),
        Ok(Frame::trailers(trailers)),
    ];
    Ok(Response::builder()
        .header("content-type", "application/grpc")
        .body(StreamBody::new(futures_util::stream::iter(frames)))
        .expect("a response"))
}

async fn drain<B: http_body::Body>(response: Response<B>) -> usize {
    let mut body = std::pin::pin!(response.into_body());
    let mut frames = 0;
    while let Some(frame) = body.frame().await {
        if frame.is_ok() {
            frames += 1;
        }
    }
    frames
}

fn in_memory(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let mut g = c.benchmark_group("grpc/in-memory");
    let plain = tower::service_fn(answer);
    g.bench_function("service_fn alone", |b| {
        b.to_async(&runtime).iter(|| {
            let mut service = plain;
            async move {
                let response = service.call(black_box(grpc_request())).await;
                black_box(drain(response.expect("OK")).await)
            }
        })
    });
    let door = tower::ServiceBuilder::new()
        .layer(GrpcRetryLayer::from_service_config(CONFIG).expect("valid"))
        .service(tower::service_fn(answer));
    g.bench_function("the door over the service_fn", |b| {
        b.to_async(&runtime).iter(|| {
            let service = door.clone();
            async move {
                let response = service.oneshot(black_box(grpc_request())).await;
                black_box(drain(response.expect("OK")).await)
            }
        })
    });
    let hedged = tower::ServiceBuilder::new()
        .layer(GrpcRetryLayer::from_service_config(HEDGED).expect("valid"))
        .service(tower::service_fn(answer));
    g.bench_function("the door over the service_fn, hedged", |b| {
        b.to_async(&runtime).iter(|| {
            let service = hedged.clone();
            async move {
                let response = service.oneshot(black_box(grpc_request())).await;
                black_box(drain(response.expect("OK")).await)
            }
        })
    });
    g.finish();
}

/// tower's `retry` per method: the request message cloned, `UNAVAILABLE` retried at once up to
/// 3 times.
#[derive(Clone)]
struct Attempts(u32);

impl tower::retry::Policy<Message, Reply, tonic::Status> for Attempts {
    type Future = std::future::Ready<()>;

    fn retry(
        &mut self,
        _: &mut Message,
        result: &mut Result<Reply, tonic::Status>,
    ) -> Option<Self::Future> {
        let failed = result
            .as_ref()
            .is_err_and(|status| status.code() == tonic::Code::Unavailable);
        if !failed || self.0 == 0 {
            return None;
        }
        self.0 -= 1;
        Some(std::future::ready(()))
    }

    fn clone_request(&mut self, request: &Message) -> Option<Message> {
        Some(request.clone())
    }
}

fn message() -> Message {
    Message {
        scenario: "ok".into(),
        call: 0,
        payload: Vec::new(),
    }
}

fn loopback(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let channel = runtime.block_on(async {
        let (listener, addr) = bind().await.expect("binds");
        tokio::spawn(serve(ScriptedService::new(|_| {}), listener));
        Channel::from_shared(format!("http://{addr}"))
            .expect("a URI")
            .connect()
            .await
            .expect("connects")
    });
    let mut g = c.benchmark_group("grpc/loopback");
    let plain = ScriptedClient::new(channel.clone());
    g.bench_function("tonic, plain Channel", |b| {
        b.to_async(&runtime).iter(|| {
            let mut client = plain.clone();
            async move { black_box(client.unary(message()).await.expect("OK")) }
        })
    });
    let door = ScriptedClient::new(
        tower::ServiceBuilder::new()
            .layer(GrpcRetryLayer::from_service_config(CONFIG).expect("valid"))
            .service(channel.clone()),
    );
    g.bench_function("tonic, the door over the Channel", |b| {
        b.to_async(&runtime).iter(|| {
            let mut client = door.clone();
            async move { black_box(client.unary(message()).await.expect("OK")) }
        })
    });
    let per_method = tower::ServiceBuilder::new()
        .retry(Attempts(3))
        .service(tower::service_fn(move |message: Message| {
            let mut client = plain.clone();
            async move { client.unary(message).await.map(tonic::Response::into_inner) }
        }));
    g.bench_function("tonic, tower retry cloning the message", |b| {
        b.to_async(&runtime).iter(|| {
            let service = per_method.clone();
            async move { black_box(service.oneshot(message()).await.expect("OK")) }
        })
    });
    g.finish();
}

criterion_group!(benches, in_memory, loopback);
criterion_main!(benches);

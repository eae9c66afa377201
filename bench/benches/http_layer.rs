//! The tower layer's cost per request on the happy path, against tower's own `retry` and
//! tower-resilience's `RetryLayer`: `cargo bench -p retry-bench --bench http_layer`. The service
//! below answers 200 at once (a `service_fn`), so what is measured is the layer alone: the
//! request taken apart and put together, the body (empty, known length) buffered, the method
//! and key checked, the first attempt (sent before the loop, which is made only if it fails)
//! and the judgement of its answer; `CloneRetryLayer` clones the request instead, as tower's
//! `retry` does. tower-resilience's row needs `--features tower-resilience`. With
//! `HTTP_LAYER_COUNT=n` the binary sends `n` requests of one row instead ([`counted`]), for
//! `valgrind --tool=callgrind` (`bench/RESULTS.md` §7).

use bytes::Bytes;
use criterion::{Criterion, criterion_group};
use http::{Request, Response};
use http_body_util::Full;
use retry_http::tower::{CloneRetryLayer, RetryLayer};
use retry_http::{HttpRetry, ReplayBody};
use retry_runtime::{Jitter, Policy};
use std::convert::Infallible;
use std::hint::black_box;
use std::time::Duration;
use tower::{Service, ServiceExt};

fn request() -> Request<Full<Bytes>> {
    Request::get("http://payments/quote")
        .body(Full::new(Bytes::new()))
        .expect("a request")
}

/// tower's `retry` with the smallest useful policy: three attempts, every error or 5xx retried
/// at once, the request cloned.
#[derive(Clone)]
struct Attempts(u32);

impl<B: Clone, E> tower::retry::Policy<Request<B>, Response<()>, E> for Attempts {
    type Future = std::future::Ready<()>;

    fn retry(
        &mut self,
        _: &mut Request<B>,
        result: &mut Result<Response<()>, E>,
    ) -> Option<Self::Future> {
        let failed = result
            .as_ref()
            .map_or(true, |r| r.status().is_server_error());
        if !failed || self.0 == 0 {
            return None;
        }
        self.0 -= 1;
        Some(std::future::ready(()))
    }

    fn clone_request(&mut self, request: &Request<B>) -> Option<Request<B>> {
        Some(request.clone())
    }
}

async fn ok<B>(_: Request<B>) -> Result<Response<()>, Infallible> {
    Ok(Response::new(()))
}

fn policy() -> Policy {
    Policy::new()
        .max(3)
        .base(Duration::from_millis(10))
        .jitter(Jitter::None)
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Our `RetryLayer` over the service.
fn ours() -> impl Service<Request<Full<Bytes>>, Response = Response<()>, Error = BoxError> + Clone {
    tower::ServiceBuilder::new()
        .layer(RetryLayer::new(HttpRetry::new(policy())))
        .service_fn(ok::<ReplayBody<Full<Bytes>>>)
}

/// The same request, through the layer for any `Clone` request (no method, key or body
/// rules): what the loop costs beside tower's `retry` on equal terms.
fn cloned() -> impl Service<Request<Full<Bytes>>, Response = Response<()>, Error = BoxError> + Clone
{
    tower::ServiceBuilder::new()
        .layer(
            CloneRetryLayer::new(HttpRetry::new(policy()))
                .classify(|_: &Infallible| false)
                .on_response(|response: &Response<()>| response.status().is_server_error()),
        )
        .service_fn(ok::<Full<Bytes>>)
}

fn tower_retry()
-> impl Service<Request<Full<Bytes>>, Response = Response<()>, Error = Infallible> + Clone {
    tower::ServiceBuilder::new()
        .retry(Attempts(3))
        .service_fn(ok::<Full<Bytes>>)
}

#[cfg(feature = "tower-resilience")]
fn resilience() -> impl Service<Request<Full<Bytes>>, Response = Response<()>> + Clone {
    type Req = Request<Full<Bytes>>;
    tower::ServiceBuilder::new()
        .layer(
            tower_resilience_retry::RetryLayer::<Req, Response<()>, Infallible>::builder()
                .max_attempts(4)
                .exponential_backoff(Duration::from_millis(10))
                .build(),
        )
        .service_fn(ok::<Full<Bytes>>)
}

/// One request through a clone of `service`, as each row's iteration sends it.
async fn send<S>(service: &S)
where
    S: Service<Request<Full<Bytes>>> + Clone,
{
    let _ = black_box(service.clone().oneshot(black_box(request())).await);
}

/// The service alone, called without a layer.
async fn alone() {
    let mut service = tower::service_fn(ok::<Full<Bytes>>);
    let _ = black_box(service.call(black_box(request())).await);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

fn happy_path(c: &mut Criterion) {
    let runtime = runtime();
    let mut g = c.benchmark_group("http/happy");
    g.bench_function("service_fn alone", |b| b.to_async(&runtime).iter(alone));
    let service = ours();
    g.bench_function("retry-runtime RetryLayer", |b| {
        b.to_async(&runtime).iter(|| send(&service))
    });
    let service = cloned();
    g.bench_function("retry-runtime CloneRetryLayer", |b| {
        b.to_async(&runtime).iter(|| send(&service))
    });
    let service = tower_retry();
    g.bench_function("tower retry", |b| {
        b.to_async(&runtime).iter(|| send(&service))
    });
    #[cfg(feature = "tower-resilience")]
    {
        let service = resilience();
        g.bench_function("tower-resilience RetryLayer", |b| {
            b.to_async(&runtime).iter(|| send(&service))
        });
    }
    g.finish();
}

/// `HTTP_LAYER_COUNT=n <bench binary> <row>`: sends `n` requests of one row (`alone`, `ours`,
/// `cloned`, `tower`, `resilience`) outside criterion, for a count of instructions that does
/// not depend on the machine's load: run it under `valgrind --tool=callgrind` with `n` and
/// `2n`, and the difference divided by `n` is one request's.
fn counted(row: &str, n: u64) {
    let runtime = runtime();
    runtime.block_on(async {
        match row {
            "alone" => {
                for _ in 0..n {
                    alone().await;
                }
            }
            "ours" => {
                let service = ours();
                for _ in 0..n {
                    send(&service).await;
                }
            }
            "cloned" => {
                let service = cloned();
                for _ in 0..n {
                    send(&service).await;
                }
            }
            "tower" => {
                let service = tower_retry();
                for _ in 0..n {
                    send(&service).await;
                }
            }
            #[cfg(feature = "tower-resilience")]
            "resilience" => {
                let service = resilience();
                for _ in 0..n {
                    send(&service).await;
                }
            }
            other => panic!("no row {other:?}: alone, ours, cloned, tower, resilience"),
        }
    });
}

criterion_group!(benches, happy_path);

fn main() {
    if let Ok(n) = std::env::var("HTTP_LAYER_COUNT") {
        let n = n.parse().expect("HTTP_LAYER_COUNT: a number of requests");
        let row = std::env::args()
            .nth(1)
            .expect("a row: alone, ours, cloned, tower, resilience");
        counted(&row, n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

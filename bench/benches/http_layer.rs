//! The tower layer's cost per request on the happy path, against tower's own `retry` and
//! tower-resilience's `RetryLayer`: `cargo bench -p retry-bench --bench http_layer`. The service
//! below answers 200 at once (a `service_fn`), so what is measured is the layer alone: the
//! request taken apart and put together, the body (empty, known length) buffered, the method
//! and key checked, the loop's one decision, and the boxed future; `CloneRetryLayer` clones the
//! request instead, as tower's `retry` does. tower-resilience's row needs
//! `--features tower-resilience`.

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
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

fn happy_path(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let mut g = c.benchmark_group("http/happy");

    let plain = tower::service_fn(ok::<Full<Bytes>>);
    g.bench_function("service_fn alone", |b| {
        b.to_async(&runtime).iter(|| {
            let mut service = plain;
            async move { black_box(service.call(black_box(request())).await) }
        })
    });

    let ours = tower::ServiceBuilder::new()
        .layer(RetryLayer::new(HttpRetry::new(
            Policy::new()
                .max(3)
                .base(Duration::from_millis(10))
                .jitter(Jitter::None),
        )))
        .service_fn(ok::<ReplayBody<Full<Bytes>>>);
    g.bench_function("retry-runtime RetryLayer", |b| {
        b.to_async(&runtime).iter(|| {
            let service = ours.clone();
            async move { black_box(service.oneshot(black_box(request())).await) }
        })
    });

    // The same request, through the layer for any `Clone` request (no method, key or body
    // rules): what the loop costs beside tower's `retry` on equal terms.
    let cloned = tower::ServiceBuilder::new()
        .layer(
            CloneRetryLayer::new(HttpRetry::new(
                Policy::new()
                    .max(3)
                    .base(Duration::from_millis(10))
                    .jitter(Jitter::None),
            ))
            .classify(|_: &Infallible| false)
            .on_response(|response: &Response<()>| response.status().is_server_error()),
        )
        .service_fn(ok::<Full<Bytes>>);
    g.bench_function("retry-runtime CloneRetryLayer", |b| {
        b.to_async(&runtime).iter(|| {
            let service = cloned.clone();
            async move { black_box(service.oneshot(black_box(request())).await) }
        })
    });

    let tower_retry = tower::ServiceBuilder::new()
        .retry(Attempts(3))
        .service_fn(ok::<Full<Bytes>>);
    g.bench_function("tower retry", |b| {
        b.to_async(&runtime).iter(|| {
            let service = tower_retry.clone();
            async move { black_box(service.oneshot(black_box(request())).await) }
        })
    });

    #[cfg(feature = "tower-resilience")]
    {
        type Req = Request<Full<Bytes>>;
        let resilience = tower::ServiceBuilder::new()
            .layer(
                tower_resilience_retry::RetryLayer::<Req, Response<()>, Infallible>::builder()
                    .max_attempts(4)
                    .exponential_backoff(Duration::from_millis(10))
                    .build(),
            )
            .service_fn(ok::<Full<Bytes>>);
        g.bench_function("tower-resilience RetryLayer", |b| {
            b.to_async(&runtime).iter(|| {
                let service = resilience.clone();
                async move { black_box(service.oneshot(black_box(request())).await) }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, happy_path);
criterion_main!(benches);

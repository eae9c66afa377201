//! The HTTP doors: retry-http's tower layer over the chaos layer, and its reqwest middleware over
//! the chaos middleware. The injected answers are read by the door as the server's.

use crate::common::within_four_sigma;
use axum::Router;
use axum::http::HeaderMap;
use axum::routing::get;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use retry_chaos::reqwest::ChaosMiddleware;
use retry_chaos::tower::ChaosLayer;
use retry_chaos::{ABORT_HEADER, Attempts, Rule, Site};
use retry_http::reqwest::RetryMiddleware;
use retry_http::tower::RetryLayer;
use retry_http::{HttpRetry, ReplayBody};
use retry_runtime::{Jitter, Policy, testing};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

const S: Duration = Duration::from_secs(1);

fn policy() -> Policy {
    Policy::new().max(3).base(S).jitter(Jitter::None)
}

type Body = Empty<Bytes>;

fn get_request(headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::builder().uri("http://quotes/quote");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Empty::new()).expect("a valid request")
}

/// The service under the chaos layer: the n-th request gets the n-th status of `script` (the
/// last again once they run out), with `Retry-After: 2` on a 503; counts its requests.
fn server(
    script: &'static [u16],
) -> (
    impl Service<
        Request<ReplayBody<Body>>,
        Response = Response<()>,
        Error = std::io::Error,
        Future: Send,
    > + Clone
    + Send
    + 'static,
    Arc<AtomicUsize>,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let service = tower::service_fn(move |_: Request<ReplayBody<Body>>| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        let status = script[n.min(script.len() - 1)];
        let mut answer = Response::builder().status(status);
        if status == 503 {
            answer = answer.header("retry-after", "2");
        }
        std::future::ready(Ok(answer.body(()).expect("a response")))
    });
    (service, calls)
}

/// A `503` with `Retry-After: 2` injected into the first attempt is waited out exactly as the
/// same answer from the server: 2 s (the policy's own pause would be 1 s), then the retry; the
/// door's counters hear the injected answer.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_injected_retry_after_is_honoured_exactly_as_a_real_one_by_the_tower_door() {
    // The real one.
    let (real, real_calls) = server(&[503, 200]);
    let door = ServiceBuilder::new()
        .layer(RetryLayer::new(
            HttpRetry::new(policy()).name("quotes-tower"),
        ))
        .service(real);
    let started = Instant::now();
    let answer = door.oneshot(get_request(&[])).await.expect("an answer");
    assert_eq!(answer.status(), StatusCode::OK);
    let real_pause = started.elapsed();
    assert_eq!(real_calls.load(Ordering::SeqCst), 2);

    // The injected one, over a server that always answers 200.
    let site = Site::new("quotes-tower")
        .seed(21)
        .rule(
            Rule::status(503)
                .header("retry-after", "2")
                .attempts(Attempts::Only(1)),
        )
        .install();
    let layer = RetryLayer::new(HttpRetry::new(policy()).name("quotes-tower"));
    let counters = layer.counters();
    let (inner, calls) = server(&[200]);
    let door = ServiceBuilder::new()
        .layer(layer)
        .layer(ChaosLayer::new(site.clone()).sink(counters.clone()))
        .service(inner);
    let started = Instant::now();
    let answer = door.oneshot(get_request(&[])).await.expect("an answer");
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(started.elapsed(), real_pause);
    assert_eq!(real_pause, 2 * S);
    // The first attempt never reached the server.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!((counters.injected(), counters.retries()), (1, 1));
    site.remove();
}

/// 10,000 requests through the tower door (no retries) at a rate of 0.3 of `500`: within 4
/// standard deviations of 3,000 (±183), each counted by the site, and the rest answered by the
/// server.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_tower_layers_rate_holds_over_ten_thousand_requests() {
    let site = Site::new("tower-rate")
        .seed(22)
        .rule(Rule::status(500).rate(0.3))
        .install();
    let (inner, calls) = server(&[200]);
    let mut door = ServiceBuilder::new()
        .layer(RetryLayer::new(HttpRetry::new(Policy::new().max(0))))
        .layer(ChaosLayer::new(site.clone()))
        .service(inner);
    let mut injected = 0;
    for _ in 0..10_000 {
        let answer = door
            .ready()
            .await
            .expect("ready")
            .call(get_request(&[]))
            .await
            .expect("an answer");
        if answer.status() == StatusCode::INTERNAL_SERVER_ERROR {
            injected += 1;
        }
    }
    site.remove();
    assert!(within_four_sigma(injected, 10_000, 0.3), "{injected}");
    assert_eq!(site.stats().answers, injected);
    assert_eq!(calls.load(Ordering::SeqCst) as u64, 10_000 - injected);
}

/// A request that asks for a `503` with `x-retry-chaos-abort` gets it on every attempt, at a
/// site that allowed it; the same request at a site that did not is answered by the server.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_header_requested_fault_is_injected_only_where_the_site_allows_it() {
    let allowed = Site::new("header-allowed")
        .allow_header_requests()
        .install();
    let refused = Site::new("header-refused").install();
    for (site, expected, reached) in [(&allowed, 503, 0), (&refused, 200, 1)] {
        let (inner, calls) = server(&[200]);
        let door = ServiceBuilder::new()
            .layer(RetryLayer::new(HttpRetry::new(policy().max(2))))
            .layer(ChaosLayer::new(site.clone()))
            .service(inner);
        let answer = door
            .oneshot(get_request(&[(ABORT_HEADER, "503")]))
            .await
            .expect("an answer");
        assert_eq!(answer.status(), expected, "{}", site.name());
        assert_eq!(calls.load(Ordering::SeqCst), reached, "{}", site.name());
    }
    // The door retried the requested fault as a real 503: three attempts, all injected.
    assert_eq!(allowed.stats().answers, 3);
    assert_eq!(refused.stats().answers, 0);
    // Without a header, the allowing site (no rules) injects nothing.
    let (inner, calls) = server(&[200]);
    let door = ServiceBuilder::new()
        .layer(RetryLayer::new(HttpRetry::new(policy())))
        .layer(ChaosLayer::new(allowed.clone()))
        .service(inner);
    let answer = door.oneshot(get_request(&[])).await.expect("an answer");
    assert_eq!(
        (answer.status(), calls.load(Ordering::SeqCst)),
        (StatusCode::OK, 1)
    );
    allowed.remove();
    refused.remove();
}

/// An axum server on loopback: `/ok` answers 200, `/busy-once` 503 with `Retry-After: 2` on its
/// first request and 200 after; counts the requests.
async fn loopback() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let (ok_hits, busy_hits) = (Arc::clone(&hits), Arc::new(AtomicUsize::new(0)));
    let router = Router::new()
        .route(
            "/ok",
            get(move || {
                ok_hits.fetch_add(1, Ordering::SeqCst);
                async { "ok" }
            }),
        )
        .route(
            "/busy-once",
            get(move || {
                let n = busy_hits.fetch_add(1, Ordering::SeqCst);
                async move {
                    let mut headers = HeaderMap::new();
                    if n == 0 {
                        headers.insert("retry-after", "2".parse().expect("a header value"));
                        (StatusCode::SERVICE_UNAVAILABLE, headers, "busy")
                    } else {
                        (StatusCode::OK, headers, "ok")
                    }
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://{addr}"), hits)
}

fn client(site: Option<&retry_chaos::Installed>, retry: RetryMiddleware) -> ClientWithMiddleware {
    let builder = ClientBuilder::new(reqwest::Client::new()).with(retry);
    match site {
        Some(site) => builder.with(ChaosMiddleware::new(site.clone())).build(),
        None => builder.build(),
    }
}

/// The reqwest middleware: a `503` with `Retry-After: 2` injected into the first attempt gives
/// the same pauses as the real one from the server (recorded, not slept): `[2 s]`.
#[tokio::test]
async fn an_injected_retry_after_is_honoured_exactly_as_a_real_one_by_the_middleware() {
    let (url, hits) = loopback().await;
    let real = client(None, RetryMiddleware::new(HttpRetry::new(policy())));
    let (answer, real_pauses) =
        testing::record_async(real.get(format!("{url}/busy-once")).send()).await;
    assert_eq!(answer.expect("an answer").status(), StatusCode::OK);
    assert_eq!(real_pauses, [2 * S]);

    let site = Site::new("quotes-reqwest")
        .seed(23)
        .rule(
            Rule::status(503)
                .header("retry-after", "2")
                .attempts(Attempts::Only(1)),
        )
        .install();
    let retry = RetryMiddleware::new(HttpRetry::new(policy()).name("quotes-reqwest"));
    let counters = retry.counters();
    let injected = ClientBuilder::new(reqwest::Client::new())
        .with(retry)
        .with(ChaosMiddleware::new(site.clone()).sink(counters.clone()))
        .build();
    let (answer, pauses) = testing::record_async(injected.get(format!("{url}/ok")).send()).await;
    assert_eq!(answer.expect("an answer").status(), StatusCode::OK);
    assert_eq!(pauses, real_pauses);
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "the injected attempt never left"
    );
    assert_eq!(counters.injected(), 1);
    site.remove();
}

/// 2,000 requests through the middleware (no retries) at 0.3: within 4 standard deviations of
/// 600 (±82); the server got the rest. A header-requested fault only where allowed.
#[tokio::test]
async fn the_middlewares_rate_and_header_requests() {
    let (url, hits) = loopback().await;
    let site = Site::new("reqwest-rate")
        .seed(24)
        .rule(Rule::status(500).rate(0.3))
        .install();
    let once = client(
        Some(&site),
        RetryMiddleware::new(HttpRetry::new(Policy::new().max(0))),
    );
    let mut injected = 0;
    for _ in 0..2_000 {
        let answer = once
            .get(format!("{url}/ok"))
            .send()
            .await
            .expect("an answer");
        if answer.status() == StatusCode::INTERNAL_SERVER_ERROR {
            injected += 1;
        }
    }
    site.remove();
    assert!(within_four_sigma(injected, 2_000, 0.3), "{injected}");
    assert_eq!(site.stats().answers, injected);
    assert_eq!(hits.load(Ordering::SeqCst) as u64, 2_000 - injected);

    let allowed = Site::new("reqwest-header")
        .allow_header_requests()
        .install();
    let refused = Site::new("reqwest-no-header").install();
    for (site, expected) in [(&allowed, 503), (&refused, 200)] {
        let client = client(
            Some(site),
            RetryMiddleware::new(HttpRetry::new(Policy::new().max(0))),
        );
        let answer = client
            .get(format!("{url}/ok"))
            .header(ABORT_HEADER, "503")
            .send()
            .await
            .expect("an answer");
        assert_eq!(answer.status(), expected, "{}", site.name());
    }
    allowed.remove();
    refused.remove();
}

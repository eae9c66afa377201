//! The tower layer (`retry_http::tower`) in a `ServiceBuilder` stack over
//! hyper's client, against a scripted HTTP/1 server on loopback: what the server received (how
//! many requests, their keys and whole bodies), the exact virtual times on tokio's paused clock,
//! and the counters.

use crate::common::HOUR;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use retry_http::tower::{CloneRetryLayer, RetryLayer};
use retry_http::{BoxError, HttpRetry, ReplayBody, Resend, SendOnce};
use retry_runtime::{
    CircuitBreaker, CircuitOpen, Elapsed, GiveUp, GiveUpReason, IdempotencyKey, Jitter, Policy,
    RetryBudget,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

/// What the server received in one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    pub method: String,
    pub key: Option<String>,
    pub body: Vec<u8>,
}

/// The scripted answers: a whole HTTP/1.1 response, or `CLOSE` to close the connection after
/// reading the request, without an answer.
pub const CLOSE: &str = "";
pub const BUSY_2S: &str =
    "HTTP/1.1 503 Service Unavailable\r\nretry-after: 2\r\ncontent-length: 0\r\n\r\n";
pub const UNAVAILABLE: &str = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n";
pub const PAID: &str = "HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\npaid";

/// A loopback HTTP/1 server that reads each request whole (by `content-length` or chunked),
/// records it, and gives the n-th the n-th of `answers` (the last again once they run out),
/// one request per connection. Returns its address and what it received.
pub async fn scripted(answers: &'static [&'static str]) -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let address = listener.local_addr().expect("a bound address");
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&received);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let Some(request) = read_request(&mut socket).await else {
                continue;
            };
            let n = {
                let mut log = log.lock().expect("the log");
                log.push(request);
                log.len() - 1
            };
            let answer = answers[n.min(answers.len() - 1)];
            if answer != CLOSE {
                // One request per connection, so that the client never reuses a closed one.
                let answer = answer.replacen("\r\n", "\r\nconnection: close\r\n", 1);
                let _ = socket.write_all(answer.as_bytes()).await;
            }
            let _ = socket.shutdown().await;
        }
    });
    (format!("http://{address}/pay"), received)
}

async fn read_request(socket: &mut TcpStream) -> Option<Received> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = socket.read(&mut buffer).await.ok().filter(|&n| n > 0)?;
        data.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_string();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let method = head.split(' ').next().unwrap_or_default().to_string();
    let key = header("idempotency-key");
    let mut rest = data[head_end..].to_vec();
    let body = if let Some(length) = header("content-length") {
        let length: usize = length.parse().ok()?;
        while rest.len() < length {
            let n = socket.read(&mut buffer).await.ok().filter(|&n| n > 0)?;
            rest.extend_from_slice(&buffer[..n]);
        }
        rest[..length].to_vec()
    } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        while !rest.ends_with(b"0\r\n\r\n") {
            let n = socket.read(&mut buffer).await.ok().filter(|&n| n > 0)?;
            rest.extend_from_slice(&buffer[..n]);
        }
        dechunk(&rest)
    } else {
        Vec::new()
    };
    Some(Received { method, key, body })
}

/// A chunked body's data.
fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(line_end) = chunked.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(&String::from_utf8_lossy(&chunked[..line_end]), 16)
            .unwrap_or_default();
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        body.extend_from_slice(&chunked[start..start + size]);
        chunked = &chunked[start + size + 2..];
    }
    body
}

pub type TestBody = BoxBody<Bytes, std::io::Error>;

/// A body of known length.
pub fn full(text: &'static str) -> TestBody {
    Full::new(Bytes::from_static(text.as_bytes()))
        .map_err(|never| match never {})
        .boxed()
}

/// A body of unknown length: a stream of chunks.
pub fn stream(chunks: &'static [&'static str]) -> TestBody {
    let frames = chunks
        .iter()
        .map(|chunk| Ok(http_body::Frame::data(Bytes::from_static(chunk.as_bytes()))));
    StreamBody::new(futures_util::stream::iter(frames)).boxed()
}

/// The layer over hyper's client, with a count of the attempts the client was asked to send
/// (refused connections included, which the server never sees).
pub(crate) fn stack(
    layer: RetryLayer,
) -> (
    impl Service<
        Request<TestBody>,
        Response = Response<hyper::body::Incoming>,
        Error = BoxError,
        Future: Send,
    > + Clone,
    Arc<AtomicUsize>,
) {
    let client: Client<HttpConnector, ReplayBody<TestBody>> =
        Client::builder(TokioExecutor::new()).build_http();
    let attempts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&attempts);
    let service = ServiceBuilder::new().layer(layer).service_fn(
        move |request: Request<ReplayBody<TestBody>>| {
            counted.fetch_add(1, Ordering::SeqCst);
            client.request(request)
        },
    );
    (service, attempts)
}

pub(crate) fn request(method: Method, url: &str, body: TestBody) -> Request<TestBody> {
    Request::builder()
        .method(method)
        .uri(url)
        .body(body)
        .expect("a valid request")
}

async fn text(response: Response<hyper::body::Incoming>) -> String {
    let body = response.into_body().collect().await.expect("a body");
    String::from_utf8_lossy(&body.to_bytes()).to_string()
}

fn policy() -> Policy {
    Policy::new()
        .max(3)
        .base(Duration::from_secs(1))
        .jitter(Jitter::None)
}

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_is_retried_after_the_pause_it_asks_for() {
    let (url, received) = scripted(&[BUSY_2S, UNAVAILABLE, PAID]).await;
    let (service, attempts) = stack(RetryLayer::new(HttpRetry::new(policy())));
    let started = Instant::now();
    let response = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(text(response).await, "paid");
    // Retry-After 2 s is a floor above the policy's 1 s; then the policy's 2 s.
    assert_eq!(started.elapsed(), Duration::from_secs(4));
    assert_eq!(received.lock().unwrap().len(), 3);
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_a_floor_that_the_jitter_spreads_above() {
    let (url, _) = scripted(&[BUSY_2S, PAID]).await;
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    let config = HttpRetry::new(
        Policy::new()
            .max(3)
            .base(Duration::from_millis(100))
            .jitter(Jitter::Proportional(0.5)),
    )
    .notify(move |resend: &Resend| log.lock().unwrap().push(resend.event.pause));
    let (service, _) = stack(RetryLayer::new(config));
    let started = Instant::now();
    let response = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    let pause = heard.lock().unwrap()[0];
    assert!(
        pause >= Duration::from_secs(2) && pause < Duration::from_secs(3),
        "{pause:?}"
    );
    // tokio's timer rounds a pause up to its 1 ms tick.
    let slept = Duration::from_millis(pause.as_nanos().div_ceil(1_000_000) as u64);
    assert_eq!(started.elapsed(), slept);
}

#[tokio::test(start_paused = true)]
async fn a_post_with_an_added_key_is_resent_with_the_same_key_and_the_whole_body() {
    let (url, received) = scripted(&[CLOSE, UNAVAILABLE, PAID]).await;
    let layer = RetryLayer::new(HttpRetry::new(policy()).add_idempotency_key());
    let counters = layer.counters();
    let (service, _) = stack(layer);
    let started = Instant::now();
    let response = service
        .oneshot(request(Method::POST, &url, full("amount=100&to=4711")))
        .await
        .expect("an answer");
    assert_eq!(text(response).await, "paid");
    assert_eq!(started.elapsed(), Duration::from_secs(1 + 2));
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 3);
    let key = received[0].key.clone().expect("a key on the first attempt");
    // A quoted UUID v4: `"xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"`.
    assert_eq!((key.len(), key.as_bytes()[15]), (38, b'4'), "{key}");
    for attempt in &received {
        assert_eq!(attempt.method, "POST");
        assert_eq!(attempt.key.as_deref(), Some(key.as_str()));
        assert_eq!(attempt.body, b"amount=100&to=4711");
    }
    assert_eq!((counters.requests(), counters.retries()), (1, 2));
    assert_eq!(counters.never_sent_retries(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_post_with_its_own_key_keeps_it() {
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let (service, _) = stack(RetryLayer::new(
        HttpRetry::new(policy()).add_idempotency_key(),
    ));
    let mut post = request(Method::POST, &url, full("x"));
    post.headers_mut()
        .insert(IdempotencyKey::HEADER, "\"payout-4711\"".parse().unwrap());
    let response = service.oneshot(post).await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    let keys: Vec<_> = received
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.key.clone())
        .collect();
    assert_eq!(
        keys,
        [
            Some("\"payout-4711\"".into()),
            Some("\"payout-4711\"".into())
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_post_without_a_key_is_sent_once() {
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let layer = RetryLayer::new(HttpRetry::new(policy()));
    let counters = layer.counters();
    let (service, _) = stack(layer);
    let started = Instant::now();
    let response = service
        .oneshot(request(Method::POST, &url, full("amount=100")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(started.elapsed(), Duration::ZERO);
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].key, None);
    assert_eq!((counters.without_key(), counters.retries()), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_connection_closed_under_a_post_without_a_key_is_not_resent() {
    let (url, received) = scripted(&[CLOSE, PAID]).await;
    let (service, _) = stack(RetryLayer::new(HttpRetry::new(policy())));
    let error = service
        .oneshot(request(Method::PATCH, &url, full("x")))
        .await
        .expect_err("the connection closed");
    assert!(
        error
            .downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some(),
        "{error:?}"
    );
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_resent_even_without_a_key() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    let layer = RetryLayer::new(
        HttpRetry::new(policy().max(2)).notify(move |r: &Resend| log.lock().unwrap().push(*r)),
    );
    let counters = layer.counters();
    let (service, attempts) = stack(layer);
    let started = Instant::now();
    let error = service
        .oneshot(request(
            Method::POST,
            &format!("http://127.0.0.1:{port}/pay"),
            full("amount=100"),
        ))
        .await
        .expect_err("nothing listens");
    let refused = error
        .downcast_ref::<hyper_util::client::legacy::Error>()
        .is_some_and(|e| e.is_connect());
    assert!(refused, "{error:?}");
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(started.elapsed(), Duration::from_secs(1 + 2));
    assert_eq!(
        (
            counters.retries(),
            counters.never_sent_retries(),
            counters.without_key()
        ),
        (2, 2, 1)
    );
    let heard = heard.lock().unwrap();
    assert!(heard.iter().all(|r| r.never_sent), "{heard:?}");
    assert_eq!(
        heard.iter().map(|r| r.event.attempt).collect::<Vec<_>>(),
        [1, 2]
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_body_is_sent_once_whole_and_never_resent_without_it() {
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let layer = RetryLayer::new(HttpRetry::new(policy()));
    let counters = layer.counters();
    let (service, attempts) = stack(layer);
    let response = service
        .oneshot(request(
            Method::PUT,
            &url,
            stream(&["chunk one, ", "chunk two"]),
        ))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, b"chunk one, chunk two");
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
    assert_eq!((counters.sent_once(), counters.retries()), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn a_body_over_the_limit_is_sent_once() {
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let layer = RetryLayer::new(HttpRetry::new(policy()).body_limit(4));
    let counters = layer.counters();
    let (service, _) = stack(layer);
    let response = service
        .oneshot(request(Method::PUT, &url, full("longer than four")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(received.lock().unwrap()[0].body, b"longer than four");
    assert_eq!(received.lock().unwrap().len(), 1);
    assert_eq!(counters.sent_once(), 1);
    assert_eq!(
        SendOnce::OverLimit {
            length: 16,
            limit: 4
        }
        .to_string(),
        "the body (16 bytes) is longer than the 4-byte buffer limit (`body_limit`)"
    );
}

/// A buffered body is sent whole on every attempt, its trailers included (the server above
/// reads no trailers over HTTP/1, so the service here is a `service_fn` that collects each
/// attempt's body).
#[tokio::test(start_paused = true)]
async fn a_buffered_body_is_resent_with_its_trailers() {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&bodies);
    let service = tower::service_fn(move |request: Request<ReplayBody<TestBody>>| {
        let log = Arc::clone(&log);
        async move {
            let collected = request.into_body().collect().await?;
            let trailers = collected.trailers().cloned();
            let mut log = log.lock().expect("the log");
            log.push((collected.to_bytes(), trailers));
            let status = if log.len() == 1 { 503 } else { 200 };
            Ok::<_, BoxError>(
                Response::builder()
                    .status(status)
                    .body(())
                    .expect("a response"),
            )
        }
    });
    let mut trailers = http::HeaderMap::new();
    trailers.insert("checksum", http::HeaderValue::from_static("sha-256=abc"));
    let sent = trailers.clone();
    let body = Full::new(Bytes::from_static(b"claim 4711"))
        .map_err(|never| match never {})
        .with_trailers(async move { Some(Ok(sent)) })
        .boxed();
    let layer = RetryLayer::new(HttpRetry::new(policy()));
    let counters = layer.counters();
    let response = ServiceBuilder::new()
        .layer(layer)
        .service(service)
        .oneshot(request(Method::PUT, "http://claims.test/4711", body))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    let expected = (Bytes::from_static(b"claim 4711"), Some(trailers));
    assert_eq!(*bodies.lock().unwrap(), [expected.clone(), expected]);
    assert_eq!((counters.requests(), counters.retries()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_404_is_returned_at_once() {
    const NOT_FOUND: &str = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
    let (url, received) = scripted(&[NOT_FOUND, PAID]).await;
    let (service, _) = stack(RetryLayer::new(HttpRetry::new(policy())));
    let response = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_ends_the_retries() {
    // No reserve and no deposits worth a retry: every request is sent once.
    let budget = Arc::new(RetryBudget::new().ratio(0.0).min_per_second(0));
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let layer = RetryLayer::new(HttpRetry::new(policy()).budget(budget));
    let (service, _) = stack(layer);
    let response = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(received.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_refuses_without_sending() {
    let breaker = Arc::new(CircuitBreaker::new().consecutive_failures(1));
    let (url, received) = scripted(&[UNAVAILABLE]).await;
    let (service, attempts) = stack(RetryLayer::new(
        HttpRetry::new(policy()).breaker(Arc::clone(&breaker)),
    ));
    // The first 503 opens it; the loop ends with that answer.
    let response = service
        .clone()
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let error = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect_err("refused");
    assert!(error.downcast_ref::<CircuitOpen>().is_some(), "{error:?}");
    assert_eq!(received.lock().unwrap().len(), 1);
    assert_eq!(attempts.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn inside_a_retrying_function_the_layer_sends_once_and_the_function_retries() {
    fn retry_everything(_: &BoxError) -> bool {
        true
    }

    #[retry_runtime::retry(max = 1, base = "5s", jitter = none, on = retry_everything)]
    async fn pay(
        service: &(
             impl Service<
            Request<TestBody>,
            Response = Response<hyper::body::Incoming>,
            Error = BoxError,
        > + Clone
         ),
        url: &str,
    ) -> Result<StatusCode, BoxError> {
        let response = service
            .clone()
            .oneshot(request(Method::GET, url, full("")))
            .await?;
        match response.status() {
            StatusCode::OK => Ok(StatusCode::OK),
            status => Err(status.to_string().into()),
        }
    }

    let (url, received) = scripted(&[UNAVAILABLE, UNAVAILABLE, PAID]).await;
    let layer = RetryLayer::new(HttpRetry::new(policy()));
    let counters = layer.counters();
    let (service, _) = stack(layer);
    let started = Instant::now();
    let error = pay(&service, &url).await.expect_err("two 503s");
    assert_eq!(error.to_string(), "503 Service Unavailable");
    // One request per attempt of the function, and the function's pause, not the layer's.
    assert_eq!(received.lock().unwrap().len(), 2);
    assert_eq!(started.elapsed(), Duration::from_secs(5));
    assert_eq!((counters.requests(), counters.retries()), (2, 0));
}

/// A `service_fn` below the layer, in process: the n-th request gets the n-th answer of
/// `script` (the last again once they run out) after the delay beside it, on tokio's clock.
fn scripted_fn(
    script: &'static [(Duration, u16)],
) -> (
    impl Service<
        Request<ReplayBody<TestBody>>,
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
    let service = tower::service_fn(move |_: Request<ReplayBody<TestBody>>| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        let (delay, status) = script[n.min(script.len() - 1)];
        async move {
            tokio::time::sleep(delay).await;
            Ok(Response::builder()
                .status(status)
                .body(())
                .expect("a response"))
        }
    });
    (service, calls)
}

#[tokio::test(start_paused = true)]
async fn on_give_up_hears_once_why_when_the_retries_run_out() {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    let config = HttpRetry::new(policy().max(2))
        .name("payments")
        .on_give_up(move |why: &GiveUp| log.lock().unwrap().push(*why));
    let (inner, calls) = scripted_fn(&[(Duration::ZERO, 503)]);
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(config))
        .service(inner);
    let started = Instant::now();
    let response = service
        .oneshot(request(Method::GET, "http://payments/pay", full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(started.elapsed(), Duration::from_secs(1 + 2));
    assert_eq!(
        *heard.lock().unwrap(),
        [GiveUp::new(
            "payments",
            GiveUpReason::Exhausted,
            3,
            Duration::from_secs(3)
        )]
    );
}

#[tokio::test(start_paused = true)]
async fn on_give_up_is_not_called_for_an_answer_that_is_not_retried() {
    let heard = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&heard);
    let config = HttpRetry::new(policy()).on_give_up(move |_: &GiveUp| {
        count.fetch_add(1, Ordering::SeqCst);
    });
    let (inner, calls) = scripted_fn(&[(Duration::ZERO, 503), (Duration::ZERO, 404)]);
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(config))
        .service(inner);
    let response = service
        .oneshot(request(Method::GET, "http://payments/pay", full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(heard.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_abandoned_after_the_timeout_and_retried() {
    // The first answer would take an hour; the timeout cuts it at 2 s, the pause is 1 s.
    let (inner, calls) = scripted_fn(&[(HOUR, 200), (Duration::ZERO, 200)]);
    let layer = RetryLayer::new(HttpRetry::new(policy()).timeout(Duration::from_secs(2)));
    let counters = layer.counters();
    let service = ServiceBuilder::new().layer(layer).service(inner);
    let started = Instant::now();
    let response = service
        .oneshot(request(Method::GET, "http://payments/pay", full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(started.elapsed(), Duration::from_secs(2 + 1));
    assert_eq!(counters.retries(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_last_timeout_is_the_callers_elapsed_error() {
    let (inner, calls) = scripted_fn(&[(HOUR, 200)]);
    let gave_up = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&gave_up);
    let config = HttpRetry::new(policy().max(1))
        .timeout(Duration::from_secs(2))
        .on_give_up(move |why: &GiveUp| log.lock().unwrap().push(why.reason));
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(config))
        .service(inner);
    let started = Instant::now();
    let error = service
        .oneshot(request(Method::GET, "http://payments/pay", full("")))
        .await
        .expect_err("every attempt times out");
    let elapsed = error.downcast_ref::<Elapsed>().expect("an `Elapsed`");
    assert_eq!(elapsed.limit(), Duration::from_secs(2));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(started.elapsed(), Duration::from_secs(2 + 1 + 2));
    assert_eq!(*gave_up.lock().unwrap(), [GiveUpReason::Exhausted]);
}

#[tokio::test(start_paused = true)]
async fn a_post_without_a_key_that_times_out_is_not_resent() {
    let (inner, calls) = scripted_fn(&[(HOUR, 200), (Duration::ZERO, 200)]);
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(
            HttpRetry::new(policy()).timeout(Duration::from_secs(2)),
        ))
        .service(inner);
    let started = Instant::now();
    let error = service
        .oneshot(request(Method::POST, "http://payments/pay", full("x")))
        .await
        .expect_err("the attempt timed out");
    assert!(error.is::<Elapsed>(), "{error:?}");
    // It may have reached the server: sent once, abandoned at the limit.
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn the_timeout_is_clipped_to_the_deadline() {
    let (inner, calls) = scripted_fn(&[(HOUR, 200)]);
    let service = ServiceBuilder::new()
        .layer(RetryLayer::new(
            HttpRetry::new(policy().deadline(Duration::from_secs(4)))
                .timeout(Duration::from_secs(2)),
        ))
        .service(inner);
    let started = Instant::now();
    let error = service
        .oneshot(request(Method::GET, "http://payments/pay", full("")))
        .await
        .expect_err("every attempt times out");
    // 2 s, a pause of 1 s, then the 1 s left before the deadline: the second attempt's limit.
    let elapsed = error.downcast_ref::<Elapsed>().expect("an `Elapsed`");
    assert_eq!(elapsed.limit(), Duration::from_secs(1));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(started.elapsed(), Duration::from_secs(2 + 1 + 1));
}

/// The requests of a custom service: not HTTP, but `Clone`.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Command {
    Get(&'static str),
    Set(&'static str, u32),
}

#[derive(Debug, PartialEq, Eq)]
enum StoreError {
    Busy,
    NoSuchKey,
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for StoreError {}

impl retry_runtime::Transient for StoreError {
    fn is_transient(&self) -> bool {
        *self == StoreError::Busy
    }
}

/// A store that answers the n-th command with the n-th of `script` and records the commands.
fn store(
    script: &'static [Result<Option<u32>, StoreError>],
) -> (
    impl Service<Command, Response = Option<u32>, Error = StoreError, Future: Send>
    + Clone
    + Send
    + 'static,
    Arc<Mutex<Vec<Command>>>,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let service = tower::service_fn(move |command: Command| {
        let n = {
            let mut log = log.lock().expect("the log");
            log.push(command);
            log.len() - 1
        };
        let answer = match &script[n.min(script.len() - 1)] {
            Ok(value) => Ok(*value),
            Err(StoreError::Busy) => Err(StoreError::Busy),
            Err(StoreError::NoSuchKey) => Err(StoreError::NoSuchKey),
        };
        std::future::ready(answer)
    });
    (service, seen)
}

#[tokio::test(start_paused = true)]
async fn a_clone_request_is_resent_while_its_errors_are_transient() {
    let (inner, seen) = store(&[Err(StoreError::Busy), Err(StoreError::Busy), Ok(Some(7))]);
    let layer = CloneRetryLayer::new(HttpRetry::new(policy()).name("store"));
    let counters = layer.counters();
    let service = ServiceBuilder::new().layer(layer).service(inner);
    let started = Instant::now();
    let answer = service
        .oneshot(Command::Set("quota", 7))
        .await
        .expect("stored");
    assert_eq!(answer, Some(7));
    assert_eq!(
        *seen.lock().unwrap(),
        [const { Command::Set("quota", 7) }; 3]
    );
    assert_eq!(started.elapsed(), Duration::from_secs(1 + 2));
    assert_eq!((counters.requests(), counters.retries()), (1, 2));
}

#[tokio::test(start_paused = true)]
async fn a_permanent_error_of_a_clone_request_is_returned_at_once() {
    let (inner, seen) = store(&[Err(StoreError::NoSuchKey), Ok(Some(7))]);
    let service = ServiceBuilder::new()
        .layer(CloneRetryLayer::new(HttpRetry::new(policy())))
        .service(inner);
    let error = service
        .oneshot(Command::Get("quota"))
        .await
        .expect_err("no such key");
    assert_eq!(error.downcast_ref(), Some(&StoreError::NoSuchKey));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_clone_request_with_a_classifier_and_an_answer_judge() {
    // `classify` replaces `Transient`: here every error is retried, the permanent one too.
    let (inner, seen) = store(&[Err(StoreError::NoSuchKey), Ok(None), Ok(None), Ok(Some(1))]);
    let gave_up = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&gave_up);
    let config = HttpRetry::new(policy().max(2)).on_give_up(move |why: &GiveUp| {
        log.lock().unwrap().push((why.reason, why.attempts));
    });
    let service = ServiceBuilder::new()
        .layer(
            CloneRetryLayer::new(config)
                .classify(|_: &StoreError| true)
                .on_response(|value: &Option<u32>| value.is_none()),
        )
        .service(inner);
    let started = Instant::now();
    // The retries run out on a rejected answer: it is the caller's, as with `on_result`.
    let answer = service
        .oneshot(Command::Get("quota"))
        .await
        .expect("the last answer");
    assert_eq!(answer, None);
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert_eq!(started.elapsed(), Duration::from_secs(1 + 2));
    assert_eq!(*gave_up.lock().unwrap(), [(GiveUpReason::Exhausted, 3)]);
}

#[tokio::test(start_paused = true)]
async fn a_clone_request_shares_the_budget_and_the_timeout() {
    let budget = Arc::new(RetryBudget::new().ratio(0.0).min_per_second(0));
    let (inner, seen) = store(&[Err(StoreError::Busy), Ok(Some(1))]);
    let service = ServiceBuilder::new()
        .layer(CloneRetryLayer::new(
            HttpRetry::new(policy()).budget(budget),
        ))
        .service(inner);
    let error = service
        .oneshot(Command::Get("quota"))
        .await
        .expect_err("no retry in the budget");
    assert_eq!(error.downcast_ref(), Some(&StoreError::Busy));
    assert_eq!(seen.lock().unwrap().len(), 1);

    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let slow_once = tower::service_fn(move |_: Command| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok::<_, StoreError>(n)
        }
    });
    let service = ServiceBuilder::new()
        .layer(CloneRetryLayer::new(
            HttpRetry::new(policy()).timeout(Duration::from_secs(2)),
        ))
        .service(slow_once);
    let started = Instant::now();
    let answer = service
        .oneshot(Command::Get("quota"))
        .await
        .expect("an answer");
    assert_eq!(answer, 1);
    assert_eq!(started.elapsed(), Duration::from_secs(2 + 1));
}

// ---- the events a user reads (feature `tracing`) -------------------------------------------------

use crate::tracing_events::{Captured, capture_async, levels};
use tracing::Level;

fn messages(events: &[Captured]) -> Vec<&str> {
    events.iter().map(|e| e.field("message")).collect()
}

#[test]
fn early_failures_are_info_events_and_only_the_last_is_an_error() {
    let ((), events) = capture_async(|| async {
        let (inner, calls) = scripted_fn(&[(Duration::ZERO, 503)]);
        let service = ServiceBuilder::new()
            .layer(RetryLayer::new(
                HttpRetry::new(policy().max(2)).name("payments"),
            ))
            .service(inner);
        let response = service
            .oneshot(request(Method::GET, "http://payments/pay", full("")))
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    });
    assert_eq!(
        levels(&events),
        [Level::INFO, Level::INFO, Level::ERROR],
        "{events:?}"
    );
    for (n, event) in events[..2].iter().enumerate() {
        assert_eq!(event.field("function"), "payments");
        assert_eq!(event.field("attempt"), (n + 1).to_string());
        assert_eq!(event.field("pause"), format!("{}s", 1 << n));
    }
    let last = &events[2];
    assert_eq!(last.field("function"), "payments");
    assert_eq!(last.field("attempts"), "3");
    assert_eq!(last.field("reason"), "retries used up");
}

#[test]
fn a_never_sent_retry_says_so_and_the_final_error_shows_the_services_error() {
    let ((), events) = capture_async(|| async {
        let refused = tower::service_fn(|_: Request<ReplayBody<TestBody>>| {
            std::future::ready(Err::<Response<()>, _>(std::io::Error::from(
                std::io::ErrorKind::ConnectionRefused,
            )))
        });
        // No hook: the loop without `notify` counts the retries itself.
        let layer = RetryLayer::new(HttpRetry::new(policy().max(1)).name("payments"));
        let counters = layer.counters();
        let service = ServiceBuilder::new().layer(layer).service(refused);
        let error = service
            .oneshot(request(Method::POST, "http://payments/pay", full("x")))
            .await
            .expect_err("refused");
        assert!(error.is::<std::io::Error>(), "{error:?}");
        assert_eq!((counters.retries(), counters.never_sent_retries()), (1, 1));
    });
    assert_eq!(
        levels(&events),
        [Level::DEBUG, Level::INFO, Level::INFO, Level::ERROR],
        "{events:?}"
    );
    assert_eq!(
        messages(&events),
        [
            "a non-idempotent request without a valid `Idempotency-Key` header: retried only if it never reached the server",
            "attempt failed; retrying",
            "the attempt never reached the server: resending it",
            "giving up",
        ]
    );
    assert_eq!(events[0].field("method"), "POST");
    for event in &events[1..3] {
        assert_eq!(event.field("function"), "payments");
        assert_eq!(event.field("attempt"), "1");
    }
    assert_eq!(events[1].field("error"), "Kind(ConnectionRefused)");
    assert_eq!(events[3].field("error"), "Kind(ConnectionRefused)");
    assert_eq!(events[3].field("attempts"), "2");
}

#[test]
fn a_request_sent_once_says_why_and_logs_no_retry() {
    let ((), events) = capture_async(|| async {
        let (inner, calls) = scripted_fn(&[(Duration::ZERO, 503)]);
        let service = ServiceBuilder::new()
            .layer(RetryLayer::new(HttpRetry::new(policy()).name("payments")))
            .service(inner);
        let response = service
            .oneshot(request(
                Method::PUT,
                "http://payments/pay",
                stream(&["a", "b"]),
            ))
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
    assert_eq!(levels(&events), [Level::INFO], "{events:?}");
    assert_eq!(events[0].field("function"), "payments");
    assert_eq!(events[0].field("message"), "sending once, without retries");
    assert_eq!(
        events[0].field("reason"),
        SendOnce::UnknownLength.to_string()
    );
}

#[test]
fn the_happy_path_of_the_layer_logs_nothing() {
    let ((), events) = capture_async(|| async {
        let (inner, _) = scripted_fn(&[(Duration::ZERO, 200)]);
        let service = ServiceBuilder::new()
            .layer(RetryLayer::new(HttpRetry::new(policy())))
            .service(inner);
        let response = service
            .oneshot(request(Method::GET, "http://payments/pay", full("")))
            .await
            .expect("an answer");
        assert_eq!(response.status(), StatusCode::OK);
    });
    assert!(events.is_empty(), "{events:?}");
}

pub const TOO_MANY: &str = "HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n";

fn concurrency(gate: &retry_runtime::AdmissionGate) -> (u32, u32) {
    match gate.state(std::time::Instant::now()) {
        retry_runtime::GateState::Concurrency { limit, in_flight } => (limit, in_flight),
        other => panic!("not a concurrency limit: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_gate_learns_from_a_429_and_sheds_beyond_its_limit() {
    use retry_runtime::{AdmissionGate, Aimd, RejectReason, Rejected};
    let gate =
        Arc::new(AdmissionGate::aimd(Aimd::new().initial_limit(10).min_limit(1)).name("payments"));
    let (url, received) = scripted(&[TOO_MANY, PAID]).await;
    let config = HttpRetry::new(policy()).gate(Arc::clone(&gate));
    let (service, _) = stack(RetryLayer::new(config.clone()));
    let started = Instant::now();
    let response = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    // The 429 is a throttled attempt: the limit shrinks from 10 to ⌊10 × 0.9⌋ = 9, and the
    // policy's 1 s pause is taken.
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert_eq!(received.lock().unwrap().len(), 2);
    assert_eq!(concurrency(&gate), (9, 0));

    // With every slot held elsewhere, the next request is shed before it is sent.
    let held: Vec<_> = (0..9)
        .map(|_| {
            gate.admit(std::time::Instant::now())
                .expect("below the limit")
        })
        .collect();
    let (service, attempts) = stack(RetryLayer::new(config));
    let error = service
        .oneshot(request(Method::GET, &url, full("")))
        .await
        .expect_err("shed");
    let rejected = error
        .downcast_ref::<Rejected>()
        .expect("a boxed `Rejected`");
    assert_eq!(
        rejected.reason(),
        RejectReason::ConcurrencyLimit { limit: 9 }
    );
    assert_eq!(rejected.gate(), "payments");
    assert_eq!(attempts.load(Ordering::SeqCst), 0, "never sent");
    assert_eq!(received.lock().unwrap().len(), 2);
    drop(held);
    assert_eq!(concurrency(&gate), (9, 0));
}

/// `CloneRetryLayer` honours `gate` as `RetryLayer` does (its docs list it): a throttled answer
/// teaches the gate, and a request beyond its limit is shed before the service sees it.
#[tokio::test(start_paused = true)]
async fn a_clone_request_asks_the_gate_and_is_shed_beyond_its_limit() {
    use retry_runtime::{AdmissionGate, Aimd, RejectReason, Rejected, Verdict};
    let gate =
        Arc::new(AdmissionGate::aimd(Aimd::new().initial_limit(10).min_limit(1)).name("store"));
    let (inner, seen) = store(&[Err(StoreError::Busy), Ok(Some(7))]);
    let layer = CloneRetryLayer::new(HttpRetry::new(policy()).gate(Arc::clone(&gate)))
        // A busy store is throttling: the gate learns it as shed load.
        .classify(|error: &StoreError| match error {
            StoreError::Busy => Verdict::Throttled,
            StoreError::NoSuchKey => Verdict::Fail,
        });
    let service = ServiceBuilder::new().layer(layer).service(inner.clone());
    let started = Instant::now();
    let answer = service
        .oneshot(Command::Get("quota"))
        .await
        .expect("stored");
    assert_eq!(answer, Some(7));
    assert_eq!(seen.lock().unwrap().len(), 2);
    // The throttled attempt cut the limit from 10 to ⌊10 × 0.9⌋ = 9; the retry paused 1 s.
    assert_eq!(started.elapsed(), Duration::from_secs(1));
    assert_eq!(concurrency(&gate), (9, 0));

    let held: Vec<_> = (0..9)
        .map(|_| {
            gate.admit(std::time::Instant::now())
                .expect("below the limit")
        })
        .collect();
    let service = ServiceBuilder::new()
        .layer(CloneRetryLayer::new(
            HttpRetry::new(policy()).gate(Arc::clone(&gate)),
        ))
        .service(inner);
    let error = service
        .oneshot(Command::Get("quota"))
        .await
        .expect_err("shed");
    let rejected = error
        .downcast_ref::<Rejected>()
        .expect("a boxed `Rejected`");
    assert_eq!(
        rejected.reason(),
        RejectReason::ConcurrencyLimit { limit: 9 }
    );
    assert_eq!(rejected.gate(), "store");
    assert_eq!(seen.lock().unwrap().len(), 2, "never sent");
    drop(held);
    assert_eq!(concurrency(&gate), (9, 0));
}

/// The paths CHANGELOG.md gives for what `retry_runtime::integrations::{tower,
/// reqwest_middleware}` held (issue 39): each item is where it says. A path that moves fails to
/// compile here.
#[test]
fn the_http_doors_items_are_where_the_changelog_says() {
    use retry_http::reqwest::RetryMiddleware;
    use retry_http::tower::{
        AnyResponse, ByTransient, ClassifyError, ClassifyResponse, CloneRetryLayer,
        CloneRetryService, RetryLayer, RetryService, error_verdict,
    };
    use retry_http::{
        BoxError, Counters, DEFAULT_BODY_LIMIT, HttpRetry, ReplayBody, Resend, SendOnce, never_sent,
    };
    fn named<T: ?Sized>() -> &'static str {
        std::any::type_name::<T>()
    }
    let names = [
        named::<RetryMiddleware>(),
        named::<AnyResponse>(),
        named::<ByTransient>(),
        named::<dyn ClassifyError<std::io::Error>>(),
        named::<dyn ClassifyResponse<u16>>(),
        named::<CloneRetryLayer>(),
        named::<CloneRetryService<()>>(),
        named::<RetryLayer>(),
        named::<RetryService<()>>(),
        named::<BoxError>(),
        named::<HttpRetry>(),
        named::<ReplayBody<()>>(),
        named::<Resend>(),
        named::<SendOnce>(),
    ];
    assert!(
        names.iter().all(|name| name.starts_with("retry_http::")
            || name.starts_with("dyn retry_http::")
            || name.starts_with("alloc::boxed::Box<dyn")),
        "{names:?}"
    );
    // `retry_http::Counters` is the runtime's one `Counters` (issue 40), re-exported here
    // (`engine_door` holds it to `retry_runtime::engine::Counters` by type).
    assert!(
        named::<Counters>().starts_with("retry_runtime::"),
        "{}",
        named::<Counters>()
    );
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert!(never_sent(&refused));
    assert_eq!(error_verdict(&refused), retry_runtime::Verdict::Retry);
    assert_eq!(DEFAULT_BODY_LIMIT, 64 * 1024);
}

// ---- one sink: the loop counts the layer's retries and its gate's rejections, once ---------------

/// The layer hands its counters to the engine's loop, which counts each retry once, as its
/// pause is decided: as many retries as the server saw requests beyond the first of each call.
#[tokio::test(start_paused = true)]
async fn each_retry_is_counted_once_as_the_server_saw_it() {
    // The first call: 503, 503, 200; the second: 503, 200.
    let (url, received) = scripted(&[UNAVAILABLE, UNAVAILABLE, PAID, UNAVAILABLE, PAID]).await;
    let layer = RetryLayer::new(HttpRetry::new(policy()));
    let counters = layer.counters();
    let (service, _) = stack(layer);
    for _ in 0..2 {
        let response = service
            .clone()
            .oneshot(request(Method::GET, &url, full("")))
            .await
            .expect("an answer");
        assert_eq!(text(response).await, "paid");
    }
    let seen = received.lock().unwrap().len() as u64;
    assert_eq!(seen, 5);
    assert_eq!(counters.requests(), 2);
    // One count per retry the server saw, not two.
    assert_eq!(counters.retries(), seen - counters.requests());
    assert_eq!(counters.retries(), 3);
    assert_eq!(counters.gate_rejected(), 0);
}

/// An attempt the layer's gate sheds is never sent, and the loop counts it in the layer's
/// counters (`Counters::gate_rejected`), once.
#[tokio::test(start_paused = true)]
async fn an_attempt_the_gate_sheds_is_counted_in_the_layers_counters() {
    use retry_runtime::{AdmissionGate, Aimd};

    let (url, received) = scripted(&[PAID]).await;
    let gate = Arc::new(AdmissionGate::aimd(
        Aimd::new().initial_limit(1).min_limit(1).max_limit(1),
    ));
    let layer = RetryLayer::new(HttpRetry::new(policy()).gate(gate));
    let counters = layer.counters();
    let client: Client<HttpConnector, ReplayBody<TestBody>> =
        Client::builder(TokioExecutor::new()).build_http();
    // The first request waits 10 s before it is sent, holding the gate's one slot.
    let slow = Arc::new(AtomicUsize::new(0));
    let service = ServiceBuilder::new().layer(layer).service_fn(
        move |request: Request<ReplayBody<TestBody>>| {
            let (client, slow) = (client.clone(), Arc::clone(&slow));
            async move {
                if slow.fetch_add(1, Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                }
                client.request(request).await
            }
        },
    );
    let (held, shed) = tokio::join!(
        service
            .clone()
            .oneshot(request(Method::GET, &url, full(""))),
        async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            service
                .clone()
                .oneshot(request(Method::GET, &url, full("")))
                .await
        }
    );
    assert_eq!(held.expect("an answer").status(), StatusCode::OK);
    let shed = shed.expect_err("shed by the gate");
    assert!(
        shed.downcast_ref::<retry_runtime::Rejected>().is_some(),
        "{shed:?}"
    );
    assert_eq!(
        received.lock().unwrap().len(),
        1,
        "the shed request was never sent"
    );
    assert_eq!(
        (
            counters.requests(),
            counters.gate_rejected(),
            counters.retries()
        ),
        (2, 1, 0)
    );
}

//! The reqwest middleware (`retry_http::reqwest`) on a
//! `reqwest_middleware` client, against the scripted loopback server of `tower_layer`: what the
//! server received, the pauses (recorded with `testing::record_async`, not slept), the counters.

use super::tower_layer::{BUSY_2S, CLOSE, PAID, UNAVAILABLE, scripted};
use crate::common::HOUR;
use bytes::Bytes;
use http_body_util::{Full, StreamBody};
use reqwest::{Body, Method, StatusCode};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use retry_http::reqwest::RetryMiddleware;
use retry_http::{HttpRetry, Resend, SendOnce};
use retry_runtime::{Elapsed, GiveUp, GiveUpReason, IdempotencyKey, Jitter, Policy, testing};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const S: Duration = Duration::from_secs(1);

fn policy() -> Policy {
    Policy::new().max(3).base(S).jitter(Jitter::None)
}

fn client(middleware: RetryMiddleware) -> ClientWithMiddleware {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client without TLS builds");
    ClientBuilder::new(client).with(middleware).build()
}

#[tokio::test]
async fn a_503_with_retry_after_is_retried_after_the_pause_it_asks_for() {
    let (url, received) = scripted(&[BUSY_2S, UNAVAILABLE, PAID]).await;
    let client = client(RetryMiddleware::new(HttpRetry::new(policy())));
    let (response, pauses) = testing::record_async(client.get(&url).send()).await;
    let response = response.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.expect("a body"), "paid");
    assert_eq!(pauses, [2 * S, 2 * S]);
    assert_eq!(received.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_closed_connection_under_a_get_is_retried() {
    let (url, received) = scripted(&[CLOSE, PAID]).await;
    let client = client(RetryMiddleware::new(HttpRetry::new(policy())));
    let (response, pauses) = testing::record_async(client.get(&url).send()).await;
    assert_eq!(response.expect("an answer").status(), StatusCode::OK);
    assert_eq!(pauses, [S]);
    assert_eq!(received.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_post_with_an_added_key_is_resent_with_the_same_key_and_the_whole_body() {
    let (url, received) = scripted(&[CLOSE, UNAVAILABLE, PAID]).await;
    let middleware = RetryMiddleware::new(HttpRetry::new(policy()).add_idempotency_key());
    let counters = middleware.counters();
    let client = client(middleware);
    let send = client.post(&url).body("amount=100&to=4711").send();
    let (response, pauses) = testing::record_async(send).await;
    assert_eq!(response.expect("an answer").status(), StatusCode::OK);
    assert_eq!(pauses, [S, 2 * S]);
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 3);
    let key = received[0].key.clone().expect("a key");
    assert_eq!((key.len(), key.as_bytes()[15]), (38, b'4'), "{key}");
    for attempt in &received {
        assert_eq!(attempt.key.as_deref(), Some(key.as_str()));
        assert_eq!(attempt.body, b"amount=100&to=4711");
    }
    assert_eq!((counters.requests(), counters.retries()), (1, 2));
}

#[tokio::test]
async fn a_post_with_its_own_key_is_resent() {
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let client = client(RetryMiddleware::new(HttpRetry::new(policy())));
    let send = client
        .post(&url)
        .header(IdempotencyKey::HEADER, "payout-4711")
        .body("x")
        .send();
    let (response, _) = testing::record_async(send).await;
    assert_eq!(response.expect("an answer").status(), StatusCode::OK);
    let keys: Vec<_> = received
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.key.clone())
        .collect();
    assert_eq!(
        keys,
        [Some("payout-4711".into()), Some("payout-4711".into())]
    );
}

#[tokio::test]
async fn a_post_without_a_key_is_sent_once() {
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let middleware = RetryMiddleware::new(HttpRetry::new(policy()));
    let counters = middleware.counters();
    let client = client(middleware);
    let (response, pauses) = testing::record_async(client.post(&url).body("x").send()).await;
    assert_eq!(
        response.expect("an answer").status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert!(pauses.is_empty());
    assert_eq!(received.lock().unwrap().len(), 1);
    assert_eq!(counters.without_key(), 1);
}

#[tokio::test]
async fn a_refused_connection_is_resent_even_without_a_key() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    let middleware = RetryMiddleware::new(
        HttpRetry::new(policy().max(2)).notify(move |r: &Resend| log.lock().unwrap().push(*r)),
    );
    let counters = middleware.counters();
    let client = client(middleware);
    let send = client
        .request(Method::PATCH, format!("http://127.0.0.1:{port}/pay"))
        .body("x")
        .send();
    let (outcome, pauses) = testing::record_async(send).await;
    let error = outcome.expect_err("nothing listens");
    assert!(error.is_connect(), "{error:?}");
    assert_eq!(pauses, [S, 2 * S]);
    assert_eq!((counters.retries(), counters.never_sent_retries()), (2, 2));
    assert!(heard.lock().unwrap().iter().all(|r| r.never_sent));
}

#[tokio::test]
async fn a_stream_body_is_sent_once_whole() {
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let middleware = RetryMiddleware::new(HttpRetry::new(policy()));
    let counters = middleware.counters();
    let client = client(middleware);
    let chunks = ["chunk one, ", "chunk two"].map(|chunk| {
        Ok::<_, std::io::Error>(http_body::Frame::data(Bytes::from_static(chunk.as_bytes())))
    });
    let body = Body::wrap(StreamBody::new(futures_util::stream::iter(chunks)));
    let send = client.put(&url).body(body).send();
    let (response, pauses) = testing::record_async(send).await;
    assert_eq!(
        response.expect("an answer, not \"not cloneable\"").status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert!(pauses.is_empty());
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, b"chunk one, chunk two");
    assert_eq!(counters.sent_once(), 1);
}

#[tokio::test]
async fn a_wrapped_body_of_known_length_is_buffered_and_resent_whole() {
    let (url, received) = scripted(&[UNAVAILABLE, PAID]).await;
    let client = client(RetryMiddleware::new(HttpRetry::new(policy())));
    let body = Body::wrap(Full::new(Bytes::from_static(b"amount=100")));
    let send = client.put(&url).body(body).send();
    let (response, pauses) = testing::record_async(send).await;
    assert_eq!(response.expect("an answer").status(), StatusCode::OK);
    assert_eq!(pauses, [S]);
    let bodies: Vec<_> = received
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.body.clone())
        .collect();
    assert_eq!(bodies, [b"amount=100".to_vec(), b"amount=100".to_vec()]);
}

// ---- hooks, timeout and events, against a scripted middleware below ours on tokio's paused clock --

type Answer<'a> = std::pin::Pin<
    Box<dyn Future<Output = reqwest_middleware::Result<reqwest::Response>> + Send + 'a>,
>;

/// A middleware that checks a closure's signature: the one reqwest-middleware takes as a
/// middleware.
fn middleware<F>(f: F) -> F
where
    F: for<'a> Fn(
            reqwest::Request,
            &'a mut http::Extensions,
            reqwest_middleware::Next<'a>,
        ) -> Answer<'a>
        + Send
        + Sync
        + 'static,
{
    f
}

/// A client whose requests never leave the process: below ours, a middleware answers the n-th
/// request with the n-th of `script` (the last again) after the delay beside it, on tokio's
/// clock. Returns the client and the count of requests that reached it.
pub(crate) fn in_process(
    ours: RetryMiddleware,
    script: &'static [(Duration, u16)],
) -> (ClientWithMiddleware, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let below = middleware(move |_, _, _| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        let (delay, status) = script[n.min(script.len() - 1)];
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            let response = http::Response::builder()
                .status(status)
                .body(Vec::<u8>::new())
                .expect("a response");
            Ok(reqwest::Response::from(response))
        })
    });
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(ours)
        .with(below)
        .build();
    (client, calls)
}

#[tokio::test(start_paused = true)]
async fn on_give_up_hears_once_why_when_the_retries_run_out() {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    let ours = RetryMiddleware::new(
        HttpRetry::new(policy().max(2))
            .name("payments")
            .on_give_up(move |why: &GiveUp| log.lock().unwrap().push(*why)),
    );
    let (client, calls) = in_process(ours, &[(Duration::ZERO, 503)]);
    let started = Instant::now();
    let response = client.get("http://payments/pay").send().await;
    assert_eq!(
        response.expect("an answer").status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(started.elapsed(), S + 2 * S);
    assert_eq!(
        *heard.lock().unwrap(),
        [GiveUp::new("payments", GiveUpReason::Exhausted, 3, 3 * S)]
    );
}

#[tokio::test(start_paused = true)]
async fn on_give_up_is_not_called_for_a_post_without_a_key() {
    let heard = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&heard);
    let ours = RetryMiddleware::new(HttpRetry::new(policy()).on_give_up(move |_: &GiveUp| {
        count.fetch_add(1, Ordering::SeqCst);
    }));
    let (client, calls) = in_process(ours, &[(Duration::ZERO, 503)]);
    let response = client.post("http://payments/pay").body("x").send().await;
    assert_eq!(
        response.expect("an answer").status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(heard.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_abandoned_after_the_timeout_and_retried() {
    let ours = RetryMiddleware::new(HttpRetry::new(policy()).timeout(2 * S));
    let counters = ours.counters();
    let (client, calls) = in_process(ours, &[(HOUR, 200), (Duration::ZERO, 200)]);
    let started = Instant::now();
    let response = client.get("http://payments/pay").send().await;
    assert_eq!(response.expect("an answer").status(), StatusCode::OK);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(started.elapsed(), 2 * S + S);
    assert_eq!(counters.retries(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_last_timeout_is_a_middleware_error_holding_elapsed() {
    let ours = RetryMiddleware::new(HttpRetry::new(policy().max(1)).timeout(2 * S));
    let (client, calls) = in_process(ours, &[(HOUR, 200)]);
    let started = Instant::now();
    let error = client
        .get("http://payments/pay")
        .send()
        .await
        .expect_err("every attempt times out");
    let reqwest_middleware::Error::Middleware(error) = error else {
        panic!("not the middleware's error: {error:?}");
    };
    let elapsed = error.downcast_ref::<Elapsed>().expect("an `Elapsed`");
    assert_eq!(elapsed.limit(), 2 * S);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(started.elapsed(), 2 * S + S + 2 * S);
}

#[tokio::test(start_paused = true)]
async fn a_post_without_a_key_that_times_out_is_not_resent() {
    let ours = RetryMiddleware::new(HttpRetry::new(policy()).timeout(2 * S));
    let (client, calls) = in_process(ours, &[(HOUR, 200), (Duration::ZERO, 200)]);
    let started = Instant::now();
    let error = client
        .post("http://payments/pay")
        .body("x")
        .send()
        .await
        .expect_err("the attempt timed out");
    assert!(
        matches!(&error, reqwest_middleware::Error::Middleware(e) if e.is::<Elapsed>()),
        "{error:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(started.elapsed(), 2 * S);
}

use crate::tracing_events::{capture, capture_async, levels};
use tracing::Level;

#[test]
fn early_failures_are_info_events_and_only_the_last_is_an_error() {
    let ((), events) = capture_async(|| async {
        let ours = RetryMiddleware::new(HttpRetry::new(policy().max(2)).name("payments"));
        let (client, calls) = in_process(ours, &[(Duration::ZERO, 503)]);
        let response = client.get("http://payments/pay").send().await;
        assert_eq!(
            response.expect("an answer").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
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
    assert_eq!(events[2].field("function"), "payments");
    assert_eq!(events[2].field("attempts"), "3");
    assert_eq!(events[2].field("reason"), "retries used up");
}

#[test]
fn a_never_sent_retry_says_so() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    // A runtime with I/O, for the real connection attempts; pauses on the paused clock.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let ((), events) = capture(|| {
        runtime.block_on(async move {
            let ours = RetryMiddleware::new(HttpRetry::new(policy().max(1)).name("payments"));
            let error = client(ours)
                .post(format!("http://127.0.0.1:{port}/pay"))
                .body("x")
                .send()
                .await
                .expect_err("nothing listens");
            assert!(error.is_connect(), "{error:?}");
        })
    });
    // reqwest and hyper log too: only ours count (the loop's, and the middleware's own).
    let ours: Vec<_> = events
        .into_iter()
        .filter(|e| e.target.starts_with("retry_runtime") || e.target.starts_with("retry_http"))
        .collect();
    assert_eq!(
        levels(&ours),
        [Level::DEBUG, Level::INFO, Level::INFO, Level::ERROR],
        "{ours:?}"
    );
    assert_eq!(
        ours.iter().map(|e| e.field("message")).collect::<Vec<_>>(),
        [
            "a non-idempotent request without a valid `Idempotency-Key` header: retried only if it never reached the server",
            "attempt failed; retrying",
            "the attempt never reached the server: resending it",
            "giving up",
        ]
    );
    for event in &ours[1..3] {
        assert_eq!(event.field("function"), "payments");
        assert_eq!(event.field("attempt"), "1");
    }
    assert_eq!(ours[3].field("attempts"), "2");
}

#[test]
fn a_request_sent_once_says_why() {
    let ((), events) = capture_async(|| async {
        let ours = RetryMiddleware::new(HttpRetry::new(policy()).name("payments"));
        let (client, calls) = in_process(ours, &[(Duration::ZERO, 503)]);
        let chunks = ["a", "b"].map(|chunk| {
            Ok::<_, std::io::Error>(http_body::Frame::data(Bytes::from_static(chunk.as_bytes())))
        });
        let body = Body::wrap(StreamBody::new(futures_util::stream::iter(chunks)));
        let response = client.put("http://payments/pay").body(body).send().await;
        assert_eq!(
            response.expect("an answer").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
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

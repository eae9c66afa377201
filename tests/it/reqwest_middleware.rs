//! The reqwest middleware (`retry_runtime::integrations::reqwest_middleware`) on a
//! `reqwest_middleware` client, against the scripted loopback server of `tower_layer`: what the
//! server received, the pauses (recorded with `testing::record_async`, not slept), the counters.

use super::tower_layer::{BUSY_2S, CLOSE, PAID, UNAVAILABLE, scripted};
use bytes::Bytes;
use http_body_util::{Full, StreamBody};
use reqwest::{Body, Method, StatusCode};
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use retry_runtime::integrations::reqwest_middleware::{HttpRetry, Resend, RetryMiddleware};
use retry_runtime::{IdempotencyKey, Jitter, Policy, testing};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

//! `store` over real HTTP on loopback: an axum service that answers `POST /payouts` through a
//! `MemoryStore`, called with reqwest. Each case of the `Idempotency-Key` draft, then a
//! `#[non_idempotent] #[retry]` client that loses a response and is answered from the store.
//!
//! Nothing waits on a clock except the client's 1 ms retry pauses: a request held "at the bank"
//! is held by a `Notify` the test releases.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use retry_durable::store::{
    Begin, Fingerprint, IdempotencyStore, MemoryStore, StoreOptions, key_from_header,
};
use retry_runtime::{IdempotencyKey, non_idempotent, retry};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;

const PAYOUT: &str = "claim=4711&cents=125000";
const OTHER_PAYOUT: &str = "claim=4711&cents=990000";

type Stored = (StatusCode, Bytes);

/// The payment service and the knobs a test turns.
#[derive(Default)]
struct Service {
    store: Option<MemoryStore<Stored>>,
    executed: AtomicU32,
    /// Hold the next payout at the bank until `release` is notified.
    hold_next: AtomicBool,
    held: Notify,
    release: Notify,
    /// Release the held payout when a repeat finds it running, and answer that repeat's 409
    /// only once the first has completed: the client's retry then finds the stored response,
    /// however short its pause.
    release_on_conflict: AtomicBool,
    completed: Notify,
    /// The next payout fails before paying (the bank is unreachable): 503, nothing stored.
    fail_next: AtomicBool,
    /// The next payout is paid and stored, and its connection closed without a response.
    lose_next: AtomicBool,
    /// `Retry-Attempt` of each request, in arrival order.
    attempts_seen: Mutex<Vec<String>>,
}

impl Service {
    fn store(&self) -> &MemoryStore<Stored> {
        self.store.as_ref().expect("created by `start`")
    }
}

/// Starts the service on a free loopback port; returns its `/payouts` URL.
async fn start() -> (String, Arc<Service>) {
    let service = Arc::new(Service {
        store: Some(
            MemoryStore::new().with_options(StoreOptions::new().ttl(Duration::from_secs(60))),
        ),
        ..Service::default()
    });
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a free loopback port");
    let url = format!(
        "http://{}/payouts",
        listener
            .local_addr()
            .expect("a bound listener has an address")
    );
    let app = Router::new()
        .route("/payouts", post(pay))
        .with_state(Arc::clone(&service));
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, service)
}

async fn pay(State(service): State<Arc<Service>>, headers: HeaderMap, body: Bytes) -> Response {
    let attempt = headers
        .get("retry-attempt")
        .map(|v| v.to_str().unwrap_or("?").to_owned());
    service
        .attempts_seen
        .lock()
        .expect("no test panics while holding it")
        .push(attempt.unwrap_or_default());
    let key = match key_from_header(headers.get(IdempotencyKey::HEADER)) {
        Ok(key) => key,
        Err(e) => return (status(e.status()), e.to_string()).into_response(),
    };
    match service.store().begin(&key, Fingerprint::of(&body)).await {
        Ok(Begin::Execute(guard)) => {
            if service.hold_next.swap(false, Ordering::SeqCst) {
                service.held.notify_one();
                service.release.notified().await;
            }
            if service.fail_next.swap(false, Ordering::SeqCst) {
                // Dropping the guard releases the key: the client's retry executes.
                drop(guard);
                return (StatusCode::SERVICE_UNAVAILABLE, "bank unreachable").into_response();
            }
            let number = service.executed.fetch_add(1, Ordering::SeqCst) + 1;
            let stored: Stored = (StatusCode::CREATED, format!("receipt P-{number}").into());
            guard.complete(&stored).await.expect("a MemoryStore stores");
            service.completed.notify_one();
            if service.lose_next.swap(false, Ordering::SeqCst) {
                return lost_response();
            }
            stored.into_response()
        }
        Ok(Begin::Replay(stored)) => stored.into_response(),
        Ok(Begin::InProgress) if service.release_on_conflict.swap(false, Ordering::SeqCst) => {
            service.release.notify_one();
            service.completed.notified().await;
            (StatusCode::CONFLICT, "in progress").into_response()
        }
        Ok(rejected) => {
            let code = rejected
                .rejection_status()
                .expect("Execute and Replay are matched above");
            (status(code), format!("{rejected:?}")).into_response()
        }
        Err(e) => (status(e.status()), e.to_string()).into_response(),
    }
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).expect("the store's statuses are 400, 409 and 422")
}

/// A body that fails before its first byte: hyper closes the connection without a response.
fn lost_response() -> Response {
    let lost = io::Error::new(io::ErrorKind::ConnectionAborted, "lost on purpose");
    let body = futures_util::stream::iter([Err::<Bytes, _>(lost)]);
    Response::new(Body::from_stream(body))
}

/// One raw request: the status and the body as text.
async fn post_payout(url: &str, key: Option<&str>, payload: &'static str) -> (u16, String) {
    let mut request = reqwest::Client::new().post(url).body(payload);
    if let Some(key) = key {
        request = request.header(IdempotencyKey::HEADER, key);
    }
    let response = request.send().await.expect("the service answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a whole body"))
}

#[tokio::test]
async fn the_first_request_executes_and_stores_its_response() {
    let (url, service) = start().await;
    let answer = post_payout(&url, Some("\"k-1\""), PAYOUT).await;
    assert_eq!(answer, (201, "receipt P-1".to_owned()));
    assert_eq!(service.executed.load(Ordering::SeqCst), 1);
    let stored = service
        .store()
        .begin(
            &IdempotencyKey::from("k-1"),
            Fingerprint::of(PAYOUT.as_bytes()),
        )
        .await
        .unwrap();
    assert_eq!(
        stored,
        Begin::Replay((StatusCode::CREATED, "receipt P-1".into()))
    );
}

#[tokio::test]
async fn a_repeat_with_the_same_payload_gets_the_stored_response_without_executing() {
    let (url, service) = start().await;
    let first = post_payout(&url, Some("\"k-1\""), PAYOUT).await;
    // Quoted as the draft writes it, or bare as many clients send it: the same key.
    for key in ["\"k-1\"", "k-1"] {
        assert_eq!(post_payout(&url, Some(key), PAYOUT).await, first);
    }
    assert_eq!(service.executed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_same_key_with_a_different_payload_is_422() {
    let (url, service) = start().await;
    post_payout(&url, Some("\"k-1\""), PAYOUT).await;
    let (status, _) = post_payout(&url, Some("\"k-1\""), OTHER_PAYOUT).await;
    assert_eq!(status, 422);
    assert_eq!(service.executed.load(Ordering::SeqCst), 1);
    // The first payout's response is still the one stored.
    let replay = post_payout(&url, Some("\"k-1\""), PAYOUT).await;
    assert_eq!(replay, (201, "receipt P-1".to_owned()));
}

#[tokio::test]
async fn a_repeat_while_the_first_runs_is_409_and_the_first_completes() {
    let (url, service) = start().await;
    service.hold_next.store(true, Ordering::SeqCst);
    let first = tokio::spawn({
        let url = url.clone();
        async move { post_payout(&url, Some("\"k-1\""), PAYOUT).await }
    });
    service.held.notified().await; // the first is at the bank
    let (status, _) = post_payout(&url, Some("\"k-1\""), PAYOUT).await;
    assert_eq!(status, 409);
    // A different payload is refused as a mismatch even while the first runs.
    let (status, _) = post_payout(&url, Some("\"k-1\""), OTHER_PAYOUT).await;
    assert_eq!(status, 422);
    service.release.notify_one();
    assert_eq!(first.await.unwrap(), (201, "receipt P-1".to_owned()));
    let replay = post_payout(&url, Some("\"k-1\""), PAYOUT).await;
    assert_eq!(replay, (201, "receipt P-1".to_owned()));
    assert_eq!(service.executed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_request_without_a_usable_key_is_400() {
    let (url, service) = start().await;
    let (status, body) = post_payout(&url, None, PAYOUT).await;
    assert_eq!(
        (status, body.as_str()),
        (400, "the request has no `Idempotency-Key` header")
    );
    for bad in ["\"\"", "\"unterminated", "two words"] {
        let (status, _) = post_payout(&url, Some(bad), PAYOUT).await;
        assert_eq!(status, 400, "{bad:?}");
    }
    assert_eq!(service.executed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_failure_that_drops_the_guard_lets_the_repeat_execute() {
    let (url, service) = start().await;
    service.fail_next.store(true, Ordering::SeqCst);
    let (status, _) = post_payout(&url, Some("\"k-1\""), PAYOUT).await;
    assert_eq!(status, 503);
    assert_eq!(service.executed.load(Ordering::SeqCst), 0);
    let answer = post_payout(&url, Some("\"k-1\""), PAYOUT).await;
    assert_eq!(answer, (201, "receipt P-1".to_owned()));
}

// The client side: `#[non_idempotent] #[retry]` over reqwest, classified by its own function.

#[derive(Debug)]
enum PayError {
    Transport(reqwest::Error),
    Status(u16),
}

fn is_transient(error: &PayError) -> bool {
    match error {
        PayError::Transport(e) => !e.is_builder(),
        PayError::Status(status) => matches!(status, 409 | 503),
    }
}

#[non_idempotent]
#[retry(max = 3, base = "1ms", jitter = full, on = is_transient)]
async fn pay_out(
    http: &reqwest::Client,
    url: &str,
    key: &IdempotencyKey,
) -> Result<String, PayError> {
    let (name, attempt) = retry_runtime::headers::AttemptHeader::DEFAULT.for_current_attempt();
    let response = http
        .post(url)
        .header(IdempotencyKey::HEADER, format!("\"{key}\""))
        .header(name, attempt)
        .body(PAYOUT)
        .send()
        .await
        .map_err(PayError::Transport)?;
    match response.status().as_u16() {
        201 => response.text().await.map_err(PayError::Transport),
        status => Err(PayError::Status(status)),
    }
}

#[tokio::test]
async fn a_lost_response_is_retried_with_the_same_key_and_answered_from_the_store() {
    let (url, service) = start().await;
    service.lose_next.store(true, Ordering::SeqCst);
    let key = IdempotencyKey::new();
    let receipt = pay_out(&reqwest::Client::new(), &url, &key).await.unwrap();
    assert_eq!(receipt, "receipt P-1");
    assert_eq!(service.executed.load(Ordering::SeqCst), 1);
    assert_eq!(*service.attempts_seen.lock().unwrap(), ["1", "2"]);
}

#[tokio::test]
async fn a_client_retries_a_409_until_the_first_completes() {
    let (url, service) = start().await;
    service.hold_next.store(true, Ordering::SeqCst);
    service.release_on_conflict.store(true, Ordering::SeqCst);
    let key = IdempotencyKey::new();
    let http = reqwest::Client::new();
    let first = tokio::spawn({
        let (http, url, key) = (http.clone(), url.clone(), key.clone());
        async move { pay_out(&http, &url, &key).await.unwrap() }
    });
    service.held.notified().await;
    let second = pay_out(&http, &url, &key).await.unwrap();
    assert_eq!(first.await.unwrap(), "receipt P-1");
    assert_eq!(second, "receipt P-1");
    assert_eq!(service.executed.load(Ordering::SeqCst), 1);
    // The first's one attempt, the second's 409 and its retry.
    assert_eq!(*service.attempts_seen.lock().unwrap(), ["1", "1", "2"]);
}

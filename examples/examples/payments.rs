//! A payout over real HTTP: an `axum` payment service that keeps its responses by idempotency
//! key, and a `reqwest` client whose `#[retry]` sends the same key on every attempt.
//!
//! ```text
//! cargo run --example payments
//! ```
//!
//! Four scenes, in about two seconds:
//!
//! 1. The response to a payout is lost: the service pays, stores its response, and closes the
//!    connection without sending it. The client retries with the same key and gets the stored
//!    receipt; the payout is executed exactly once.
//! 2. The customer clicks "pay" twice. The second click's request arrives while the first is
//!    still at the bank and gets 409 with `Retry-After: 1`; it is retried as a passing failure
//!    and then gets the stored receipt.
//! 3. The same key for a different amount: 422, a mistake that waiting will not fix, so it is
//!    not retried.
//! 4. A request without a key: 400.
//!
//! The receiving side is [`retry_runtime::store::MemoryStore`]; the service in
//! [`payment_service`] only maps its answers to HTTP.

use retry_runtime::IdempotencyKey;
use std::error::Error;
use std::time::Duration;

use client::{Cents, ClaimId, PayClient, PayError, pay_out, pay_out_without_key};
use payment_service::PaymentService;

const STORM_ROOF: ClaimId = ClaimId(4711);
const STORM_FENCE: ClaimId = ClaimId(4712);

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let service = PaymentService::start()
        .await
        .map_err(|e| format!("cannot start the payment service on a loopback port: {e}"))?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    println!("Payment service listening on {}", service.url());

    scene("1", "the response to a payout is lost");
    service.lose_next_response();
    let portal = PayClient::new("portal", &http, service.url());
    let key = IdempotencyKey::new(); // once per payout, before the first attempt
    let amount = Cents(125_000);
    println!("  portal: paying {amount} for claim {STORM_ROOF} with key {key}");
    let receipt = pay_out(&portal, STORM_ROOF, amount, &key).await?;
    println!("  portal: paid, {receipt}");
    assert_eq!(portal.attempts(), 2, "one lost response, one retry");
    let executed = service.payouts_executed(&key);
    assert_eq!(
        executed, 1,
        "a lost response must not lead to a second payout"
    );
    println!("  payout executed exactly once (the service counts {executed} for this key)");

    scene(
        "2",
        "a second click while the first payout is still at the bank",
    );
    service.slow_bank_for_next_payout(Duration::from_millis(300));
    let key = IdempotencyKey::new(); // the form's key: both clicks send it
    let amount = Cents(48_000);
    println!("  paying {amount} for claim {STORM_FENCE} with key {key}");
    let first = PayClient::new("click 1", &http, service.url());
    let second = PayClient::new("click 2", &http, service.url());
    let (first_receipt, second_receipt) =
        tokio::join!(pay_out(&first, STORM_FENCE, amount, &key), async {
            // Sent once the first request is at the bank, so that it finds the key running.
            service.payout_started().await;
            pay_out(&second, STORM_FENCE, amount, &key).await
        },);
    let (first_receipt, second_receipt) = (first_receipt?, second_receipt?);
    println!("  click 1 got {first_receipt}, click 2 got {second_receipt}");
    assert_eq!(first_receipt, second_receipt);
    assert_eq!((first.attempts(), second.attempts()), (1, 2));
    let executed = service.payouts_executed(&key);
    assert_eq!(executed, 1, "a second click must not pay twice");
    println!("  payout executed exactly once (the service counts {executed} for this key)");

    scene("3", "the same key for a different amount");
    let other_amount = Cents(990_000);
    println!("  paying {other_amount} for claim {STORM_FENCE} with the key of scene 2");
    let reused = PayClient::new("portal", &http, service.url());
    let answer = pay_out(&reused, STORM_FENCE, other_amount, &key).await;
    println!("  portal: not paid: {}", outcome(&answer));
    assert!(matches!(answer, Err(PayError::KeyReused)));
    assert_eq!(reused.attempts(), 1, "a 422 is not worth a retry");

    scene("4", "an old client that sends no key");
    let answer = pay_out_without_key(&http, service.url(), STORM_ROOF, amount).await;
    println!("  old client: {}", outcome(&answer));
    assert!(matches!(
        answer,
        Err(PayError::Rejected { status: 400, .. })
    ));

    let total = service.total_payouts_executed();
    assert_eq!(total, 2);
    println!("\n{total} payouts for 2 keys, each executed exactly once.");
    Ok(())
}

fn scene(number: &str, title: &str) {
    println!("\nScene {number}: {title}");
}

fn outcome<T: std::fmt::Display>(answer: &Result<T, PayError>) -> String {
    match answer {
        Ok(value) => format!("{value}"),
        Err(e) => format!("{e}"),
    }
}

/// The portal's side: a payout through `reqwest`, retried with the same key.
mod client {
    use retry_runtime::scope::AttemptHeader;
    use retry_runtime::{IdempotencyKey, Verdict, non_idempotent, retry};
    use serde::{Deserialize, Serialize};
    use std::fmt;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::{Duration, Instant};

    /// A claim number.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
    #[serde(transparent)]
    pub struct ClaimId(pub u32);

    /// An amount in euro cents, so that no payout is ever rounded.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(transparent)]
    pub struct Cents(pub u64);

    /// The request body of `POST /payouts`.
    #[derive(Serialize, Deserialize)]
    pub struct PayoutRequest {
        pub claim: ClaimId,
        pub cents: Cents,
    }

    /// The service's confirmation: the body of a 201.
    #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Receipt {
        pub receipt: String,
        pub claim: ClaimId,
        pub cents: Cents,
    }

    /// Why a payout has no receipt.
    #[derive(Debug)]
    pub enum PayError {
        /// No complete answer: the connection broke or timed out, perhaps after the service
        /// paid. Worth another try, but only because the key makes a repeat harmless.
        Transport(reqwest::Error),
        /// 409: the same payout is still running at the service.
        InProgress { retry_after: Option<Duration> },
        /// 422: the key was used for a different payout. A bug in the caller.
        KeyReused,
        /// 5xx: the service could not answer now.
        Unavailable { status: u16 },
        /// Any other refusal, such as 400: the request is wrong.
        Rejected { status: u16, detail: String },
        /// A success whose body is not a receipt.
        Protocol(String),
    }

    /// The `on = ...` of [`pay_out`]: a `Verdict`, so that a 409's `Retry-After` sets the pause.
    pub fn is_transient(error: &PayError) -> Verdict {
        match error {
            // Everything `reqwest` reports once the request was built: no connection, a
            // timeout, a connection closed before or during the response.
            PayError::Transport(e) if e.is_builder() || e.is_redirect() => Verdict::Fail,
            PayError::Transport(_) | PayError::Unavailable { .. } => Verdict::Retry,
            PayError::InProgress { retry_after } => {
                retry_after.map_or(Verdict::Retry, Verdict::RetryAfter)
            }
            PayError::KeyReused | PayError::Rejected { .. } | PayError::Protocol(_) => {
                Verdict::Fail
            }
        }
    }

    /// Where the payouts go, and who is paying, for the output.
    pub struct PayClient {
        name: &'static str,
        http: reqwest::Client,
        url: String,
        attempts: AtomicU32,
        first_attempt: OnceLock<Instant>,
    }

    impl PayClient {
        pub fn new(name: &'static str, http: &reqwest::Client, base: &str) -> Self {
            PayClient {
                name,
                http: http.clone(), // a handle on one connection pool
                url: format!("{base}/payouts"),
                attempts: AtomicU32::new(0),
                first_attempt: OnceLock::new(),
            }
        }

        pub fn attempts(&self) -> u32 {
            self.attempts.load(Ordering::Relaxed)
        }
    }

    /// Pays `amount` for `claim`.
    ///
    /// `#[non_idempotent]` makes `#[retry]` insist on `key`: a retry after a lost response
    /// would otherwise pay twice. Every attempt sends it in `Idempotency-Key`, and its number
    /// in `Retry-Attempt`. Up to 3 retries with pauses anywhere in 0–200 ms, 0–400 ms and
    /// 0–800 ms, or as long as the service's `Retry-After` asks.
    #[non_idempotent]
    #[retry(max = 3, base = "200ms", jitter = full, on = is_transient)]
    pub async fn pay_out(
        client: &PayClient,
        claim: ClaimId,
        amount: Cents,
        key: &IdempotencyKey,
    ) -> Result<Receipt, PayError> {
        client.attempts.fetch_add(1, Ordering::Relaxed);
        let since_first = client.first_attempt.get_or_init(Instant::now).elapsed();
        let (attempt_header, attempt) = AttemptHeader::DEFAULT.for_current_attempt();
        let request = client
            .http
            .post(&client.url)
            .header(IdempotencyKey::HEADER, sf_string(key.as_str()))
            .header(attempt_header, &attempt);
        let answer = send(request, claim, amount).await;
        let verdict = match &answer {
            Ok(_) => "",
            Err(e) if is_transient(e).is_retry() => " (transient: retry with the same key)",
            Err(_) => " (permanent: no retry)",
        };
        println!(
            "  {}: attempt {attempt} at {:.2} s -> {}{verdict}",
            client.name,
            since_first.as_secs_f64(),
            super::outcome(&answer)
        );
        answer
    }

    /// The same request without `Idempotency-Key`, as a client from before keys would send it.
    /// Not retried: without a key a retry could pay twice.
    pub async fn pay_out_without_key(
        http: &reqwest::Client,
        base: &str,
        claim: ClaimId,
        amount: Cents,
    ) -> Result<Receipt, PayError> {
        send(http.post(format!("{base}/payouts")), claim, amount).await
    }

    async fn send(
        request: reqwest::RequestBuilder,
        claim: ClaimId,
        cents: Cents,
    ) -> Result<Receipt, PayError> {
        let body = serde_json::to_vec(&PayoutRequest { claim, cents })
            .map_err(|e| PayError::Protocol(e.to_string()))?;
        let response = request
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(PayError::Transport)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.trim().parse().ok())
            .map(Duration::from_secs);
        let body = response.bytes().await.map_err(PayError::Transport)?;
        match status {
            200..=299 => {
                serde_json::from_slice(&body).map_err(|e| PayError::Protocol(e.to_string()))
            }
            409 => Err(PayError::InProgress { retry_after }),
            422 => Err(PayError::KeyReused),
            500..=599 => Err(PayError::Unavailable { status }),
            _ => Err(PayError::Rejected {
                status,
                detail: problem_detail(&body),
            }),
        }
    }

    /// The `detail` of an RFC 9457 problem, or the body as text.
    fn problem_detail(body: &[u8]) -> String {
        serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|problem| Some(problem.get("detail")?.as_str()?.to_owned()))
            .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
    }

    /// The key as the draft writes the header: a structured-field string, `"…"`.
    fn sf_string(key: &str) -> String {
        let mut quoted = String::with_capacity(key.len() + 2);
        quoted.push('"');
        for c in key.chars() {
            if matches!(c, '"' | '\\') {
                quoted.push('\\');
            }
            quoted.push(c);
        }
        quoted.push('"');
        quoted
    }

    impl fmt::Display for Cents {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "EUR {}.{:02}", self.0 / 100, self.0 % 100)
        }
    }

    impl fmt::Display for ClaimId {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{}", self.0)
        }
    }

    impl fmt::Display for Receipt {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "receipt {}", self.receipt)
        }
    }

    impl fmt::Display for PayError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                PayError::Transport(e) => {
                    // reqwest's own message names the URL; the innermost cause says what
                    // happened.
                    let mut cause: &dyn std::error::Error = e;
                    while let Some(inner) = cause.source() {
                        cause = inner;
                    }
                    write!(f, "no answer: {cause}")
                }
                PayError::InProgress {
                    retry_after: Some(pause),
                } => write!(f, "409, still in progress, retry after {pause:?}"),
                PayError::InProgress { retry_after: None } => f.write_str("409, still in progress"),
                PayError::KeyReused => f.write_str("422, the key was used for another payout"),
                PayError::Unavailable { status } => write!(f, "{status}, service unavailable"),
                PayError::Rejected { status, detail } => write!(f, "{status}, {detail}"),
                PayError::Protocol(e) => write!(f, "unexpected answer: {e}"),
            }
        }
    }

    impl std::error::Error for PayError {}
}

/// The payment service: `POST /payouts` with `Idempotency-Key`, on a loopback port.
///
/// Its only idempotency logic is the `match` on [`Begin`]; the rules live in
/// [`MemoryStore`].
mod payment_service {
    use crate::client::{PayoutRequest, Receipt};
    use axum::Router;
    use axum::body::{Body, Bytes};
    use axum::extract::State;
    use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;
    use retry_runtime::IdempotencyKey;
    use retry_runtime::scope::AttemptHeader;
    use retry_runtime::store::{
        Begin, Fingerprint, IdempotencyStore, MemoryStore, key_from_header,
    };
    use std::collections::HashMap;
    use std::io;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::Duration;
    use tokio::net::TcpListener;
    use tokio::sync::Notify;

    /// What the service keeps for a repeat: the status and body it answered with.
    #[derive(Clone)]
    struct Stored {
        status: StatusCode,
        body: Bytes,
    }

    struct Service {
        store: MemoryStore<Stored>,
        /// Payouts executed, by key: what the example asserts on.
        executed: Mutex<HashMap<IdempotencyKey, u32>>,
        lose_next_response: AtomicBool,
        slow_bank: Mutex<Option<Duration>>,
        payout_started: Notify,
    }

    /// The handle `main` keeps: where the service listens, knobs to make it misbehave, and
    /// what it did.
    pub struct PaymentService {
        url: String,
        service: Arc<Service>,
    }

    impl PaymentService {
        /// Listens on a free loopback port and serves in a background task.
        pub async fn start() -> io::Result<Self> {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let url = format!("http://{}", listener.local_addr()?);
            let service = Arc::new(Service {
                // Keys kept a day (the default), as payment APIs keep theirs.
                store: MemoryStore::new(),
                executed: Mutex::default(),
                lose_next_response: AtomicBool::new(false),
                slow_bank: Mutex::default(),
                payout_started: Notify::new(),
            });
            let app = Router::new()
                .route("/payouts", post(pay))
                .with_state(Arc::clone(&service));
            tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    eprintln!("    [service] stopped: {e}");
                }
            });
            Ok(PaymentService { url, service })
        }

        pub fn url(&self) -> &str {
            &self.url
        }

        /// The next payout is executed and stored, and its response is never sent.
        pub fn lose_next_response(&self) {
            self.service
                .lose_next_response
                .store(true, Ordering::SeqCst);
        }

        /// The next payout waits this long at the bank.
        pub fn slow_bank_for_next_payout(&self, delay: Duration) {
            *lock(&self.service.slow_bank) = Some(delay);
        }

        /// Resolves once the payout slowed by [`Self::slow_bank_for_next_payout`] has reached
        /// the bank.
        pub async fn payout_started(&self) {
            self.service.payout_started.notified().await;
        }

        pub fn payouts_executed(&self, key: &IdempotencyKey) -> u32 {
            lock(&self.service.executed).get(key).copied().unwrap_or(0)
        }

        pub fn total_payouts_executed(&self) -> u32 {
            lock(&self.service.executed).values().sum()
        }
    }

    /// `POST /payouts`.
    async fn pay(State(service): State<Arc<Service>>, headers: HeaderMap, body: Bytes) -> Response {
        let attempt = headers
            .get(AttemptHeader::DEFAULT.name())
            .and_then(|v| AttemptHeader::DEFAULT.parse(v.to_str().ok()?))
            .map_or_else(|| "-".to_owned(), |n| n.to_string());
        // Requiring a key on this route is the service's decision: without one a client's
        // retry could pay twice, so refuse to pay at all.
        let key = match key_from_header(headers.get(IdempotencyKey::HEADER)) {
            Ok(key) => key,
            Err(e) => {
                println!(
                    "    [service] Retry-Attempt {attempt}, no usable key: {}",
                    e.status()
                );
                return problem(StatusCode::BAD_REQUEST, &e.to_string());
            }
        };
        let Ok(order) = serde_json::from_slice::<PayoutRequest>(&body) else {
            return problem(StatusCode::BAD_REQUEST, "the body is not a payout request");
        };
        let log = format!(
            "    [service] Retry-Attempt {attempt}, key {}…:",
            short(&key)
        );
        // The fingerprint covers the whole body: the same key for another claim or amount is
        // a different request.
        match service.store.begin(&key, Fingerprint::of(&body)).await {
            Ok(Begin::Execute(guard)) => {
                println!(
                    "{log} new, paying {} for claim {}",
                    order.cents, order.claim
                );
                let stored = execute(&service, &key, &order).await;
                if let Err(e) = guard.complete(&stored).await {
                    println!("{log} paid, but the response could not be stored: {e}");
                    return problem(status(e.status()), &e.to_string());
                }
                if service.lose_next_response.swap(false, Ordering::SeqCst) {
                    println!("{log} paid and stored; the response is lost on the way back");
                    return lost_response();
                }
                println!("{log} paid and stored");
                stored.into_response()
            }
            Ok(Begin::Replay(stored)) => {
                println!("{log} completed before: the stored response, nothing paid");
                stored.into_response()
            }
            Ok(Begin::InProgress) => {
                println!("{log} still running: 409, Retry-After: 1");
                let mut response = problem(StatusCode::CONFLICT, "this payout is in progress");
                let headers = response.headers_mut();
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            Ok(Begin::Mismatch) => {
                println!("{log} used for another payout: 422");
                let detail = "this key was used for a different payout";
                problem(StatusCode::UNPROCESSABLE_ENTITY, detail)
            }
            Ok(other) => {
                let code = other.rejection_status().unwrap_or(500);
                problem(status(code), "the payout cannot be made now")
            }
            // Nothing executes without a record: a passing failure for the client's retry.
            Err(e) => {
                println!("{log} the store is unavailable: {}", e.status());
                let mut response = problem(status(e.status()), &e.to_string());
                let headers = response.headers_mut();
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
        }
    }

    fn status(code: u16) -> StatusCode {
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The payout itself: the bank call, then the receipt.
    ///
    /// There is no `.await` between counting the payout and returning, so the handler cannot
    /// be cancelled after the money moved but before the guard completes. A real bank call can
    /// be, so a real service runs `begin`, the bank call and `complete` in a task that
    /// outlives the connection (`tokio::spawn`) and awaits that task in the handler.
    async fn execute(service: &Service, key: &IdempotencyKey, order: &PayoutRequest) -> Stored {
        let delay = lock(&service.slow_bank).take();
        if let Some(delay) = delay {
            service.payout_started.notify_one();
            tokio::time::sleep(delay).await;
        }
        let number = {
            let mut executed = lock(&service.executed);
            *executed.entry(key.clone()).or_default() += 1;
            executed.values().sum::<u32>()
        };
        let receipt = Receipt {
            receipt: format!("P-{number}"),
            claim: order.claim,
            cents: order.cents,
        };
        let body = serde_json::to_vec(&receipt).unwrap_or_default();
        Stored {
            status: StatusCode::CREATED,
            body: body.into(),
        }
    }

    /// A response whose body fails before its first byte, so that hyper closes the connection
    /// instead of finishing the response.
    ///
    /// More faithful than sleeping past the client's timeout: the client sees exactly what a
    /// crash or a network cut after the commit looks like (the connection closes while it
    /// waits), and nothing depends on timing.
    fn lost_response() -> Response {
        let failure = io::Error::new(io::ErrorKind::ConnectionAborted, "response lost on purpose");
        let body = futures_util::stream::iter([Err::<Bytes, _>(failure)]);
        Response::new(Body::from_stream(body))
    }

    /// An RFC 9457 problem, as the idempotency draft suggests for its errors.
    fn problem(status: StatusCode, detail: &str) -> Response {
        let body = serde_json::json!({ "title": status.canonical_reason(), "detail": detail });
        let content_type = HeaderValue::from_static("application/problem+json");
        (
            status,
            [(header::CONTENT_TYPE, content_type)],
            body.to_string(),
        )
            .into_response()
    }

    impl IntoResponse for Stored {
        fn into_response(self) -> Response {
            let content_type = HeaderValue::from_static("application/json");
            (
                self.status,
                [(header::CONTENT_TYPE, content_type)],
                self.body,
            )
                .into_response()
        }
    }

    fn short(key: &IdempotencyKey) -> &str {
        key.as_str().get(..8).unwrap_or(key.as_str())
    }

    fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        // Nothing here panics while holding a lock; a poisoned one is still whole.
        mutex.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

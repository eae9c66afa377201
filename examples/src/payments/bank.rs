//! The bank: a system outside the service's database, which honours an `Idempotency-Key` of its
//! own. The service passes its key on, so that a payout executed a second time after a crash
//! (between the bank's answer and the service's commit) gets the first transfer back instead
//! of a second one.
//!
//! [`Bank`] is the bank itself, on a loopback port (in the example's process, or in a test's,
//! so that it outlives the service processes a test kills). [`transfer`] is the service's call.

use super::{Cents, short};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore, key_from_header};
use retry_runtime::headers::AttemptHeader;
use retry_runtime::{CircuitBreaker, CircuitOpen, IdempotencyKey, Verdict, non_idempotent, retry};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// The body of `POST /transfers`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransferRequest {
    /// How much.
    pub cents: Cents,
}

/// The bank's confirmation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// `T-` and a number.
    pub id: String,
    /// How much was transferred.
    pub cents: Cents,
}

struct Books {
    store: MemoryStore<Transfer>,
    /// Transfers executed, by key; what the tests check.
    executed: Mutex<HashMap<String, u32>>,
    /// Requests received, by key, executed or answered again.
    requests: Mutex<HashMap<String, u32>>,
    /// Calls received, by key: the requests that were a call's first attempt (`Retry-Attempt: 1`,
    /// or no such header), not its retries.
    calls: Mutex<HashMap<String, u32>>,
    count: AtomicU32,
    delay: Duration,
    slow_next: Mutex<Option<Duration>>,
    started: Notify,
    verbose: bool,
    /// While set, every transfer is answered 503: an outage, scripted by a test.
    down: AtomicBool,
    /// Transfers answered 503 during an outage.
    refused: AtomicU32,
}

/// The bank, serving `POST /transfers` on a loopback port in a background task.
pub struct Bank {
    url: String,
    books: Arc<Books>,
}

impl Bank {
    /// Listens on a free loopback port. Each transfer takes `delay` (zero for an instant bank).
    pub async fn start(delay: Duration) -> io::Result<Self> {
        Self::start_with(delay, true).await
    }

    /// The same, printing nothing.
    pub async fn start_quiet(delay: Duration) -> io::Result<Self> {
        Self::start_with(delay, false).await
    }

    async fn start_with(delay: Duration, verbose: bool) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let books = Arc::new(Books {
            store: MemoryStore::new(),
            executed: Mutex::default(),
            requests: Mutex::default(),
            calls: Mutex::default(),
            count: AtomicU32::new(0),
            delay,
            slow_next: Mutex::default(),
            started: Notify::new(),
            verbose,
            down: AtomicBool::new(false),
            refused: AtomicU32::new(0),
        });
        let app = Router::new()
            .route("/transfers", post(transfer_in_bank))
            .with_state(Arc::clone(&books));
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("    [bank] stopped: {e}");
            }
        });
        Ok(Bank { url, books })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The next transfer takes this long.
    pub fn slow_next_transfer(&self, delay: Duration) {
        *lock(&self.books.slow_next) = Some(delay);
    }

    /// Resolves once the transfer slowed by [`Bank::slow_next_transfer`] has started.
    pub async fn transfer_started(&self) {
        self.books.started.notified().await;
    }

    /// How many transfers the bank executed for `key` (not counting answers given again).
    pub fn transfers_executed(&self, key: &str) -> u32 {
        lock(&self.books.executed).get(key).copied().unwrap_or(0)
    }

    /// How many transfer requests the bank received for `key`.
    pub fn requests(&self, key: &str) -> u32 {
        lock(&self.books.requests).get(key).copied().unwrap_or(0)
    }

    /// How many calls asked the bank for a transfer with `key`: requests that were a call's
    /// first attempt, so that a caller's retries of one call (with the same key) count once.
    pub fn calls(&self, key: &str) -> u32 {
        lock(&self.books.calls).get(key).copied().unwrap_or(0)
    }

    /// Transfers executed, by key.
    pub fn executed(&self) -> HashMap<String, u32> {
        lock(&self.books.executed).clone()
    }

    /// Starts (`true`) or ends an outage: meanwhile every transfer is answered 503, before the
    /// bank looks at it, and nothing is transferred.
    pub fn set_down(&self, down: bool) {
        self.books.down.store(down, Ordering::SeqCst);
    }

    /// How many transfer requests were answered 503 during outages.
    pub fn refused(&self) -> u32 {
        self.books.refused.load(Ordering::SeqCst)
    }
}

/// `POST /transfers` at the bank: once per key, as the service's own payouts.
async fn transfer_in_bank(
    State(books): State<Arc<Books>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if books.down.load(Ordering::SeqCst) {
        books.refused.fetch_add(1, Ordering::SeqCst);
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let Ok(key) = key_from_header(headers.get(IdempotencyKey::HEADER)) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Ok(request) = serde_json::from_slice::<TransferRequest>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    *lock(&books.requests)
        .entry(key.as_str().to_owned())
        .or_default() += 1;
    let attempt = headers
        .get(AttemptHeader::DEFAULT.name())
        .and_then(|value| value.to_str().ok())
        .and_then(|value| AttemptHeader::DEFAULT.parse(value));
    if attempt.is_none_or(|attempt| attempt == 1) {
        *lock(&books.calls)
            .entry(key.as_str().to_owned())
            .or_default() += 1;
    }
    // In a task of its own, so that a caller that dies mid-request does not cancel it halfway.
    let task = tokio::spawn(async move {
        match books.store.begin(&key, Fingerprint::of(&body)).await {
            Ok(Begin::Execute(guard)) => {
                let slow = lock(&books.slow_next).take();
                if let Some(delay) = slow {
                    books.started.notify_one();
                    tokio::time::sleep(delay).await;
                }
                if !books.delay.is_zero() {
                    tokio::time::sleep(books.delay).await;
                }
                let number = books.count.fetch_add(1, Ordering::SeqCst) + 1;
                let transfer = Transfer {
                    id: format!("T-{number}"),
                    cents: request.cents,
                };
                *lock(&books.executed)
                    .entry(key.as_str().to_owned())
                    .or_default() += 1;
                if guard.complete(&transfer).await.is_err() {
                    return StatusCode::INTERNAL_SERVER_ERROR.into_response();
                }
                if books.verbose {
                    println!(
                        "    [bank] key {}…: transferred, {}",
                        short(&key),
                        transfer.id
                    );
                }
                created(&transfer)
            }
            Ok(Begin::Replay(transfer)) => {
                if books.verbose {
                    println!(
                        "    [bank] key {}…: seen before, {} again, nothing transferred",
                        short(&key),
                        transfer.id
                    );
                }
                created(&transfer)
            }
            Ok(Begin::Mismatch) => StatusCode::UNPROCESSABLE_ENTITY.into_response(),
            Ok(_) | Err(_) => {
                let retry_after = [(header::RETRY_AFTER, HeaderValue::from_static("1"))];
                (StatusCode::CONFLICT, retry_after).into_response()
            }
        }
    });
    task.await
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Why the bank did not confirm a transfer.
#[derive(Debug)]
pub enum BankError {
    /// No answer, or a 409 or 5xx: worth another try with the same key.
    Unavailable(String),
    /// The bank refused the transfer.
    Refused(u16),
    /// [`BANK_BREAKER`] is open: the bank was not asked.
    NotCalled(CircuitOpen),
}

impl From<CircuitOpen> for BankError {
    fn from(open: CircuitOpen) -> Self {
        BankError::NotCalled(open)
    }
}

impl fmt::Display for BankError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BankError::Unavailable(why) => write!(f, "the bank is unavailable: {why}"),
            BankError::Refused(status) => write!(f, "the bank refused the transfer: {status}"),
            BankError::NotCalled(open) => write!(f, "the bank was not asked: {open}"),
        }
    }
}

impl std::error::Error for BankError {}

fn bank_is_transient(error: &BankError) -> Verdict {
    match error {
        BankError::Unavailable(_) => Verdict::Retry,
        BankError::Refused(_) | BankError::NotCalled(_) => Verdict::Fail,
    }
}

/// How long [`BANK_BREAKER`] stays open before it lets one trial transfer through.
pub const BANK_OPEN_FOR: Duration = Duration::from_secs(2);

/// The bank's breaker (`bank` in the metrics), shared by every payout of the service's process:
/// open after 5 failed
/// transfer attempts in a row, for [`BANK_OPEN_FOR`]. While it is open a payout does not ask the
/// bank at all: it gives its key back and answers 503 at once.
pub static BANK_BREAKER: CircuitBreaker = CircuitBreaker::new()
    .name("bank")
    .consecutive_failures(5)
    .open_for(BANK_OPEN_FOR);

/// The service's call to the bank, with the service's own key: a second call after a crash gets
/// the first transfer. Short pauses: a payout that cannot reach the bank gives its key back and
/// answers 503, and the client's retry comes back later. Every attempt asks [`BANK_BREAKER`]
/// first.
#[non_idempotent]
#[retry(
    max = 3,
    base = "20ms",
    max_delay = "200ms",
    jitter = full,
    on = bank_is_transient,
    breaker = BANK_BREAKER,
)]
pub async fn transfer(
    http: &reqwest::Client,
    bank: &str,
    key: &IdempotencyKey,
    cents: Cents,
) -> Result<Transfer, BankError> {
    let body = serde_json::to_vec(&TransferRequest { cents })
        .map_err(|e| BankError::Unavailable(e.to_string()))?;
    let (attempt_header, attempt) = AttemptHeader::DEFAULT.for_current_attempt();
    let response = http
        .post(format!("{bank}/transfers"))
        .header(
            IdempotencyKey::HEADER,
            retry_runtime::headers::key_header_value(key),
        )
        .header(attempt_header, &attempt)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| BankError::Unavailable(e.to_string()))?;
    match response.status().as_u16() {
        201 => {
            let body = response
                .bytes()
                .await
                .map_err(|e| BankError::Unavailable(e.to_string()))?;
            serde_json::from_slice(&body).map_err(|e| BankError::Unavailable(e.to_string()))
        }
        409 | 500..=599 => Err(BankError::Unavailable(response.status().to_string())),
        status => Err(BankError::Refused(status)),
    }
}

fn created(transfer: &Transfer) -> Response {
    let content_type = [(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    )];
    match serde_json::to_vec(transfer) {
        Ok(body) => (StatusCode::CREATED, content_type, body).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Nothing here panics while holding a lock; a poisoned one is still whole.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

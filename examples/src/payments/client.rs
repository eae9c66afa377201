//! The portal's side: a payout through `reqwest`, retried with the same key.

use super::{Cents, ClaimId, PayoutRequest, Receipt};
use retry_runtime::headers::{AttemptHeader, key_header_value};
use retry_runtime::{IdempotencyKey, Verdict, non_idempotent, retry};
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Why a payout has no receipt.
#[derive(Debug)]
pub enum PayError {
    /// No complete answer: the connection broke or timed out, perhaps after the service paid.
    /// Worth another try, but only because the key makes a repeat harmless.
    Transport(reqwest::Error),
    /// 409: the same payout is still running at the service.
    InProgress {
        /// The service's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// 422: the key was used for a different payout. A bug in the caller.
    KeyReused,
    /// 5xx: the service could not answer now (503 while its database is down).
    Unavailable {
        /// The status.
        status: u16,
        /// The service's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// Any other refusal, such as 400: the request is wrong.
    Rejected {
        /// The status.
        status: u16,
        /// The problem's `detail`.
        detail: String,
    },
    /// A success whose body is not a receipt.
    Protocol(String),
}

/// The `on = ...` of [`pay_out`]: a `Verdict`, so that a `Retry-After` sets the pause.
pub fn is_transient(error: &PayError) -> Verdict {
    match error {
        // Everything `reqwest` reports once the request was built: no connection, a timeout,
        // a connection closed before or during the response.
        PayError::Transport(e) if e.is_builder() || e.is_redirect() => Verdict::Fail,
        PayError::Transport(_) => Verdict::Retry,
        PayError::InProgress { retry_after } | PayError::Unavailable { retry_after, .. } => {
            retry_after.map_or(Verdict::Retry, Verdict::RetryAfter)
        }
        PayError::KeyReused | PayError::Rejected { .. } | PayError::Protocol(_) => Verdict::Fail,
    }
}

/// What one attempt got: a receipt, no answer, or a status and whether it came with
/// `Retry-After`. The tests read these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A receipt.
    Paid,
    /// No complete answer.
    NoAnswer,
    /// A refusal.
    Status {
        /// The status.
        status: u16,
        /// Whether the response had a `Retry-After`.
        retry_after: bool,
    },
}

/// Where the payouts go (one URL, or several replicas taken in turn, one per attempt), and who
/// is paying, for the output.
pub struct PayClient {
    name: String,
    http: reqwest::Client,
    urls: Vec<String>,
    verbose: bool,
    attempts: AtomicU32,
    answers: Mutex<Vec<Answer>>,
    first_attempt: OnceLock<Instant>,
}

impl PayClient {
    /// A client of the service at `base`, printing each attempt.
    pub fn new(name: &str, http: &reqwest::Client, base: &str) -> Self {
        Self::replicas(name, http, &[base])
    }

    /// A client of replicas of the service: attempt 1 goes to the first, attempt 2 to the
    /// next, and so on, as a load balancer might send them.
    pub fn replicas(name: &str, http: &reqwest::Client, bases: &[&str]) -> Self {
        PayClient {
            name: name.to_owned(),
            http: http.clone(), // a handle on one connection pool
            urls: bases.iter().map(|base| format!("{base}/payouts")).collect(),
            verbose: true,
            attempts: AtomicU32::new(0),
            answers: Mutex::default(),
            first_attempt: OnceLock::new(),
        }
    }

    /// Prints nothing (for the tests and the benchmark).
    pub fn quiet(mut self) -> Self {
        self.verbose = false;
        self
    }

    /// How many attempts were made.
    pub fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::Relaxed)
    }

    /// What each attempt got, in order.
    pub fn answers(&self) -> Vec<Answer> {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Pays `amount` for `claim`.
///
/// `#[non_idempotent]` makes `#[retry]` insist on `key`: a retry after a lost response would
/// otherwise pay twice. Every attempt sends it in `Idempotency-Key`, and its number in
/// `Retry-Attempt`. Up to 4 retries with pauses anywhere in 0–200 ms, 0–400 ms, 0–800 ms and
/// 0–1.6 s, or as long as the service's `Retry-After` asks.
#[non_idempotent]
#[retry(max = 4, base = "200ms", jitter = full, on = is_transient)]
pub async fn pay_out(
    client: &PayClient,
    claim: ClaimId,
    amount: Cents,
    key: &IdempotencyKey,
) -> Result<Receipt, PayError> {
    attempt(client, claim, amount, key).await
}

/// One attempt of a payout: the body of [`pay_out`], for callers with a `#[retry]` of their
/// own (the fault tests retry for longer, with millisecond pauses).
pub async fn attempt(
    client: &PayClient,
    claim: ClaimId,
    amount: Cents,
    key: &IdempotencyKey,
) -> Result<Receipt, PayError> {
    let number = client.attempts.fetch_add(1, Ordering::Relaxed);
    let since_first = client.first_attempt.get_or_init(Instant::now).elapsed();
    let (attempt_header, attempt) = AttemptHeader::DEFAULT.for_current_attempt();
    let url = &client.urls[number as usize % client.urls.len()];
    let request = client
        .http
        .post(url)
        .header(IdempotencyKey::HEADER, key_header_value(key))
        .header(attempt_header, &attempt);
    let answer = send(request, claim, amount).await;
    let (seen, verdict) = match &answer {
        Ok(_) => (Answer::Paid, ""),
        Err(e) => (
            match e {
                PayError::Transport(_) | PayError::Protocol(_) => Answer::NoAnswer,
                PayError::InProgress { retry_after } => Answer::Status {
                    status: 409,
                    retry_after: retry_after.is_some(),
                },
                PayError::KeyReused => Answer::Status {
                    status: 422,
                    retry_after: false,
                },
                PayError::Unavailable {
                    status,
                    retry_after,
                } => Answer::Status {
                    status: *status,
                    retry_after: retry_after.is_some(),
                },
                PayError::Rejected { status, .. } => Answer::Status {
                    status: *status,
                    retry_after: false,
                },
            },
            if is_transient(e).is_retry() {
                " (transient: retry with the same key)"
            } else {
                " (permanent: no retry)"
            },
        ),
    };
    client
        .answers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(seen);
    if client.verbose {
        println!(
            "  {}: attempt {attempt} at {:.2} s -> {}{verdict}",
            client.name,
            since_first.as_secs_f64(),
            outcome(&answer)
        );
    }
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
        200..=299 => serde_json::from_slice(&body).map_err(|e| PayError::Protocol(e.to_string())),
        409 => Err(PayError::InProgress { retry_after }),
        422 => Err(PayError::KeyReused),
        500..=599 => Err(PayError::Unavailable {
            status,
            retry_after,
        }),
        _ => Err(PayError::Rejected {
            status,
            detail: problem_detail(&body),
        }),
    }
}

/// A receipt or an error, as one line of output.
pub fn outcome<T: fmt::Display>(answer: &Result<T, PayError>) -> String {
    match answer {
        Ok(value) => format!("{value}"),
        Err(e) => format!("{e}"),
    }
}

/// The `detail` of an RFC 9457 problem, or the body as text.
fn problem_detail(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|problem| Some(problem.get("detail")?.as_str()?.to_owned()))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned())
}

impl fmt::Display for PayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let after = |pause: &Option<Duration>| match pause {
            Some(pause) => format!(", retry after {pause:?}"),
            None => String::new(),
        };
        match self {
            PayError::Transport(e) => {
                // reqwest's own message names the URL; the innermost cause says what happened.
                let mut cause: &dyn std::error::Error = e;
                while let Some(inner) = cause.source() {
                    cause = inner;
                }
                write!(f, "no answer: {cause}")
            }
            PayError::InProgress { retry_after } => {
                write!(f, "409, still in progress{}", after(retry_after))
            }
            PayError::KeyReused => f.write_str("422, the key was used for another payout"),
            PayError::Unavailable {
                status,
                retry_after,
            } => write!(f, "{status}, service unavailable{}", after(retry_after)),
            PayError::Rejected { status, detail } => write!(f, "{status}, {detail}"),
            PayError::Protocol(e) => write!(f, "unexpected answer: {e}"),
        }
    }
}

impl std::error::Error for PayError {}

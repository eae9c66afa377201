//! The README's Rust code, compiled: each ```` ```rust ```` block of `README.md` appears here
//! verbatim, with the few types it leaves out (a client, a claim, an error) defined around it,
//! and the tests below fail when a block is not here word for word. The guides
//! (`retry-runtime/docs/`) are doctests; the tests below also check the expansion that the
//! behaviour guide shows against its snapshot (`tests-build/tests/expand/async_fn.expanded.rs`)
//! and the compile error that the keys guide shows against its `.stderr`.
//!
//! ```text
//! cargo run --example readme    # runs the README's first example once
//! cargo test --example readme   # checks that every README block is compiled here
//! ```

/// What the README's types stand for: a service that answers at once. Not every error is made
/// here, only named by the README's classifiers.
#[allow(dead_code)]
mod service {
    #[derive(Debug)]
    pub struct ContractClient;
    #[derive(Debug)]
    pub struct Claim(pub u32);
    #[derive(Debug, PartialEq)]
    pub enum Coverage {
        Covered,
    }
    #[derive(Debug)]
    pub enum ContractError {
        Overloaded,
        ConnectionLost,
        TimedOut,
        Unavailable,
    }

    impl ContractClient {
        pub async fn coverage(&self, claim: &Claim) -> Result<Coverage, ContractError> {
            let _ = claim;
            Ok(Coverage::Covered)
        }
    }

    impl From<retry_runtime::Elapsed> for ContractError {
        fn from(_: retry_runtime::Elapsed) -> Self {
            ContractError::TimedOut
        }
    }

    impl From<retry_runtime::CircuitOpen> for ContractError {
        fn from(_: retry_runtime::CircuitOpen) -> Self {
            ContractError::Unavailable
        }
    }

    pub fn is_transient(error: &ContractError) -> bool {
        matches!(
            error,
            ContractError::Overloaded | ContractError::ConnectionLost
        )
    }
}

/// "Retry with backoff and jitter, written as an attribute on the function that may fail".
#[rustfmt::skip]
mod intro {
use crate::service::{is_transient, Claim, ContractClient, ContractError, Coverage};

use retry_runtime::retry;

// The claims portal asks the contract service whether a policy covers a storm claim.
// "overloaded" and a dropped connection are worth retrying; "not covered" is an answer (Ok), never retried.
#[retry(max = 3, base = "1s", jitter, on = is_transient)]
async fn check_coverage(client: &ContractClient, claim: &Claim) -> Result<Coverage, ContractError> {
    client.coverage(claim).await
}

pub async fn answer() -> Result<Coverage, ContractError> {
    check_coverage(&ContractClient, &Claim(4711)).await
}
}

/// "Which errors are transient".
#[rustfmt::skip]
mod transient {
use crate::service::ContractError;
use retry_runtime::Transient;
use std::time::Duration;

impl Transient for ContractError {
    fn is_transient(&self) -> bool {
        matches!(self, ContractError::Overloaded | ContractError::ConnectionLost)
    }
    // Optional: a pause the server asked for (HTTP Retry-After, gRPC pushback).
    fn retry_after(&self) -> Option<Duration> { None }
}
}

/// "Non-idempotent calls".
#[rustfmt::skip]
#[allow(dead_code)]
mod non_idempotent {
pub struct PaymentClient;
#[derive(Clone, Copy)]
pub struct ClaimId(u32);
#[derive(Clone, Copy)]
pub struct Cents(u64);
pub struct Receipt;
pub type PayError = std::io::Error;

impl PaymentClient {
    async fn pay(&self, claim: ClaimId, amount: Cents, key: &IdempotencyKey) -> Result<Receipt, PayError> {
        let _ = (claim.0, amount.0, key);
        Ok(Receipt)
    }

    async fn charge(&self, order: u64, amount: Cents) -> Result<Receipt, PayError> {
        let _ = (order, amount.0);
        Ok(Receipt)
    }
}

fn is_transient(error: &PayError) -> bool {
    error.kind() == std::io::ErrorKind::ConnectionReset
}

use retry_runtime::{non_idempotent, retry, IdempotencyKey};

#[non_idempotent]
#[retry(max = 2, base = "500ms", jitter = full, on = is_transient)]
async fn pay_out(client: &PaymentClient, claim: ClaimId, amount: Cents, key: &IdempotencyKey) -> Result<Receipt, PayError> {
    client.pay(claim, amount, key).await
}

async fn settle(client: &PaymentClient, claim: ClaimId, amount: Cents) -> Result<Receipt, PayError> {
    let key = IdempotencyKey::new();           // 128 random bits as a UUID v4, created once
    pay_out(client, claim, amount, &key).await // every attempt sends the same key
}

#[non_idempotent]
#[retry(max = 2, base = "500ms", on = is_transient)]
async fn charge(client: &PaymentClient, #[idempotency_key] order: u64, amount: Cents) -> Result<Receipt, PayError> {
    client.charge(order, amount).await // the service keys the charge by the order number
}
}

/// "Idempotency that survives a restart: the stores".
#[rustfmt::skip]
#[allow(dead_code)]
mod stores {
use retry_runtime::IdempotencyKey;
use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, SqliteStore, StoreError};

#[derive(serde::Serialize, serde::Deserialize)]
pub struct Receipt {
    key: String,
    cents: i64,
}

/// What the handler answers instead of a receipt.
pub enum Answer {
    Status(u16),
}

impl From<StoreError> for Answer {
    fn from(error: StoreError) -> Self {
        Answer::Status(error.status())
    }
}

impl From<sqlx::Error> for Answer {
    fn from(_: sqlx::Error) -> Self {
        Answer::Status(500)
    }
}

async fn pay(store: &SqliteStore<Receipt>, key: &IdempotencyKey, body: &[u8], cents: i64) -> Result<Receipt, Answer> {
    match store.begin(key, Fingerprint::of(body)).await {
        Ok(Begin::Execute(mut guard)) => {
            let receipt = Receipt { key: key.to_string(), cents };
            let tx = guard.transaction().await?;
            sqlx::query("INSERT INTO ledger (key, cents) VALUES (?, ?)")
                .bind(key.as_str())
                .bind(cents)
                .execute(&mut **tx)
                .await?;
            guard.complete(&receipt).await?; // the ledger row and the completed key commit together
            Ok(receipt)
        }
        Ok(Begin::Replay(receipt)) => Ok(receipt), // answered again; nothing is paid
        Ok(refused) => Err(Answer::Status(refused.rejection_status().unwrap_or(500))), // 409, 422
        Err(unavailable) => Err(Answer::Status(unavailable.status())), // 503: nothing executed
    }
}
}

/// "Control over each attempt".
#[rustfmt::skip]
#[allow(dead_code)]
mod control {
use crate::service::{Claim, ContractError, Coverage};

pub struct ContractClient;

impl ContractClient {
    async fn coverage(&self, claim: &Claim, attempt: u32) -> Result<Coverage, ContractError> {
        let _ = (claim, attempt);
        Ok(Coverage::Covered)
    }
}

use retry_runtime::{retry, RetryEvent};

fn log_retry(error: &ContractError, event: &RetryEvent) {
    eprintln!("{} attempt {} failed ({error:?}); next in {:?}", event.function, event.attempt, event.pause);
}

#[retry(max = 3, base = "1s", timeout = "2s", deadline = "10s", notify = log_retry)]
async fn check_coverage(client: &ContractClient, claim: &Claim) -> Result<Coverage, ContractError> {
    let attempt = retry_runtime::attempt();   // 1 on the first call
    client.coverage(claim, attempt.number()).await
}
}

/// "Protecting the service that is called".
#[rustfmt::skip]
#[allow(dead_code)]
mod protecting {
use crate::service::{Claim, ContractClient, ContractError, Coverage};

use retry_runtime::{retry, CircuitBreaker, RetryBudget};
use std::time::Duration;

static COVERAGE_BUDGET: RetryBudget = RetryBudget::new();          // retries ≤ 10 % of first calls + a reserve
static CONTRACT_BREAKER: CircuitBreaker = CircuitBreaker::new()     // open after 5 failures in a row,
    .open_for(Duration::from_secs(30));                             // for 30 s, then one trial call

#[retry(max = 3, base = "1s", budget = COVERAGE_BUDGET, breaker = CONTRACT_BREAKER)]
async fn check_coverage(client: &ContractClient, claim: &Claim) -> Result<Coverage, ContractError> {
    client.coverage(claim).await
}
}

/// "Fallback: after the last attempt".
#[rustfmt::skip]
#[allow(dead_code)]
mod fallback {
use crate::service::{is_transient, Claim, ContractError};

pub struct ContractClient;

#[derive(Debug)]
pub enum Coverage {
    Covered,
    /// The check was deferred: its answer comes later.
    Pending { job: u64 },
}

impl ContractClient {
    async fn coverage(&self, claim: &Claim) -> Result<Coverage, ContractError> {
        let _ = claim;
        Err(ContractError::Overloaded)
    }
}

/// The portal's queue of deferred checks.
pub struct Queue;

impl Queue {
    async fn enqueue(&self, claim: &Claim) -> Result<u64, ContractError> {
        Ok(u64::from(claim.0))
    }
}

use retry_runtime::{retry, CircuitBreaker, GiveUp};
use std::time::Duration;

static CONTRACT_BREAKER: CircuitBreaker = CircuitBreaker::new().open_for(Duration::from_secs(30));

#[retry(max = 3, base = "1s", on = is_transient, breaker = CONTRACT_BREAKER,
        fallback = |error, why| save_for_later(queue, claim, error, why))]
async fn check_coverage(client: &ContractClient, queue: &Queue, claim: &Claim) -> Result<Coverage, ContractError> {
    client.coverage(claim).await
}

/// Saves the claim and queues its check: the customer reads "your details are saved", and the
/// answer comes later. A database write, so async.
async fn save_for_later(queue: &Queue, claim: &Claim, error: ContractError, why: GiveUp) -> Result<Coverage, ContractError> {
    eprintln!("deferred claim {}: {why} ({error:?})", claim.0);   // `check_coverage` gave up after 4 attempts in 7.3s: retries used up
    let job = queue.enqueue(claim).await?;
    Ok(Coverage::Pending { job })
}

#[tokio::test]
async fn the_fallback_defers_the_check() {
    // The pauses recorded, not slept.
    let (answer, pauses) =
        retry_runtime::testing::record_async(check_coverage(&ContractClient, &Queue, &Claim(4711))).await;
    assert!(matches!(answer, Ok(Coverage::Pending { job: 4711 })), "{answer:?}");
    assert_eq!(pauses.len(), 3);
}
}

/// "When the outage outlasts the customer: a fallback and a durable queue".
#[rustfmt::skip]
#[allow(dead_code)]
mod queue {
use retry_examples::portal::coverage::{is_transient, ContractError, Coverage, CONTRACT_BREAKER, COVERAGE_BUDGET};
use retry_examples::portal::later::{check_later, save_for_later, CoverageJob};
use retry_examples::portal::{Claim, ContractClient};
use retry_durable::queue::{Job, Queue, QueueError, Worker};
use retry_runtime::{non_idempotent, retry, IdempotencyKey};
use sqlx::Sqlite;
use std::time::Duration;

// The form and the worker alike: the check, or where its loop gave up, the claim saved and its
// check queued under the same key (Err(ContractError::Deferred { job, why, cause })).
#[non_idempotent]
#[retry(max = 3, base = "1s", jitter, on = is_transient,
        budget = COVERAGE_BUDGET, breaker = CONTRACT_BREAKER,
        fallback = |error, why| save_for_later(queue, claim, key, error, why))]
async fn check_coverage(client: &ContractClient, queue: &Queue<Sqlite>, claim: &Claim, key: &IdempotencyKey) -> Result<Coverage, ContractError> {
    let line = client.request(&format!("COVERAGE {} {key}", claim.id)).await.map_err(ContractError::ConnectionLost)?;
    match line.as_str() {
        "COVERED" => Ok(Coverage::Covered),
        "NOT_COVERED" => Ok(Coverage::NotCovered),
        "OVERLOADED" => Err(ContractError::Overloaded),
        "UNKNOWN_CLAIM" => Err(ContractError::InvalidClaim(claim.id)), // an answer: no fallback, shown as it is
        _ => Err(ContractError::Protocol(line)),
    }
}

// Every portal replica: a worker that drains the queue through the same function, budget and breaker.
async fn drain(client: ContractClient, queue: Queue<Sqlite>) -> Result<(), QueueError> {
    let worker = Worker::new("portal-1")
        .concurrency(2)                      // at most 2 checks at a time
        .per_second(10.0)                    // and 10 a second: a steady stream, not a burst
        .lease(Duration::from_secs(30))      // renewed while a check runs; a dead worker's job comes back
        .breaker(&CONTRACT_BREAKER);         // nothing claimed while the breaker is open
    let jobs = queue.clone();
    worker.run(&queue, move |job: Job<CoverageJob>| check_later(client.clone(), jobs.clone(), job)).await?;
    Ok(())
}
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let answer = intro::answer().await;
    println!("claim 4711: {answer:?}");
}

#[cfg(test)]
mod tests {
    const README: &str = include_str!("../../README.md");
    const BEHAVIOUR: &str = include_str!("../../retry-runtime/docs/behaviour.md");
    const KEYS: &str = include_str!("../../retry-runtime/docs/keys.md");
    const HERE: &str = include_str!("readme.rs");

    /// The ```` ```rust ```` blocks of a Markdown text (not `rust,ignore` or `text`).
    fn rust_blocks(markdown: &str) -> Vec<String> {
        let mut blocks = Vec::new();
        let mut current: Option<String> = None;
        for line in markdown.lines() {
            match (&mut current, line) {
                (None, "```rust") => current = Some(String::new()),
                (Some(block), "```") => {
                    blocks.push(std::mem::take(block));
                    current = None;
                }
                (Some(block), line) => {
                    block.push_str(line);
                    block.push('\n');
                }
                (None, _) => {}
            }
        }
        blocks
    }

    #[test]
    fn every_rust_block_of_the_readme_is_compiled_here() {
        let blocks = rust_blocks(README);
        assert!(blocks.len() >= 6, "found only {} blocks", blocks.len());
        for block in blocks {
            assert!(
                HERE.contains(&block),
                "this README block is not in examples/examples/readme.rs word for word; copy it \
                 there (inside a `#[rustfmt::skip]` module with the types it needs):\n{block}"
            );
        }
    }

    /// A guide's block as the reader sees it: without rustdoc's hidden `# ` lines.
    fn shown(block: &str) -> String {
        block
            .lines()
            .filter(|line| *line != "#" && !line.starts_with("# "))
            .map(|line| format!("{line}\n"))
            .collect()
    }

    #[test]
    fn the_expansion_in_the_behaviour_guide_is_its_snapshot() {
        let snapshot = include_str!("../../tests-build/tests/expand/async_fn.expanded.rs");
        let expansion = rust_blocks(BEHAVIOUR)
            .into_iter()
            .find(|block| block.contains("__retry_rt"))
            .expect("the behaviour guide shows the expansion");
        assert!(
            snapshot.contains(&shown(&expansion)),
            "the expansion in retry-runtime/docs/behaviour.md differs from \
             tests-build/tests/expand/async_fn.expanded.rs; copy the function from the snapshot"
        );
    }

    #[test]
    fn the_compile_error_in_the_keys_guide_is_the_one_rustc_prints() {
        let stderr = include_str!(
            "../../tests-build/tests/ui/non_idempotent_after_retry_without_key.stderr"
        );
        let start = KEYS
            .find("```text\nerror: `pay_out` is `#[non_idempotent]`")
            .expect("the keys guide shows the error")
            + "```text\n".len();
        let end = start + KEYS[start..].find("```").expect("the block ends");
        assert!(
            stderr.contains(KEYS[start..end].trim_end()),
            "the compile error in retry-runtime/docs/keys.md differs from \
             tests-build/tests/ui/non_idempotent_after_retry_without_key.stderr"
        );
    }
}

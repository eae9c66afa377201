//! `fallback = f`: when the loop gives up, `f(last_error, why)` is called and what it returns is
//! the function's result; with `on_result`, `f(last_outcome, why)`, which hears a rejected `Ok`
//! as well. Why it gave up (retries used up, the deadline, a server's pause beyond `max_delay`,
//! the budget empty, the breaker open or refusing) comes with the attempts made and the time
//! spent. It is not called for an accepted `Ok`, for a permanent error, when the future is
//! dropped, or in a nested function that makes a single attempt because an outer one retries. In
//! an `async fn` it may be async. It runs in the last attempt's context, so `attempt().key()`
//! gives the idempotency key of a `#[non_idempotent]` function.
//!
//! Async on tokio's paused clock, with exact times; sync with the recorder.

use crate::common::callsites;
use retry_runtime::{
    CircuitBreaker, CircuitOpen, GiveUp, GiveUpReason, IdempotencyKey, RetryBudget, RetryEvent,
    Transient, attempt, non_idempotent, retry, testing,
};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const S: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

#[derive(Debug, PartialEq)]
enum ContractError {
    Overloaded(u32),
    SlowDown(Duration),
    InvalidClaim,
    Unavailable(CircuitOpen),
}

impl Transient for ContractError {
    fn is_transient(&self) -> bool {
        matches!(
            self,
            ContractError::Overloaded(_) | ContractError::SlowDown(_)
        )
    }
    fn retry_after(&self) -> Option<Duration> {
        match self {
            ContractError::SlowDown(d) => Some(*d),
            _ => None,
        }
    }
}

impl From<CircuitOpen> for ContractError {
    fn from(open: CircuitOpen) -> Self {
        ContractError::Unavailable(open)
    }
}

#[derive(Debug, PartialEq)]
enum Coverage {
    Covered,
    /// What the portal tells the customer when the check was deferred.
    Saved {
        claim: u32,
    },
}

/// The portal's queue of deferred checks: what each fallback saved.
#[derive(Default)]
struct Queue {
    saved: Mutex<Vec<(u32, String, GiveUp)>>,
}

impl Queue {
    fn saved(&self) -> Vec<(u32, String, GiveUp)> {
        self.saved.lock().expect("not poisoned").clone()
    }
}

/// The fallback the issue asks for: save the claim and the error for later, and answer with
/// what was saved.
fn save_for_later(
    queue: &Queue,
    claim: u32,
    error: ContractError,
    why: GiveUp,
) -> Result<Coverage, ContractError> {
    queue
        .saved
        .lock()
        .expect("not poisoned")
        .push((claim, format!("{error:?}"), why));
    Ok(Coverage::Saved { claim })
}

/// The async form: saving usually writes to a database.
async fn save_for_later_async(
    queue: &Queue,
    claim: u32,
    error: ContractError,
    why: GiveUp,
) -> Result<Coverage, ContractError> {
    tokio::time::sleep(50 * MS).await;
    save_for_later(queue, claim, error, why)
}

/// One answer of the contract service, given the call's number.
type Answer = fn(u32) -> Result<Coverage, ContractError>;

/// The contract service: answers `answers[n]` on call `n` (the last one for later calls).
struct Contract {
    answers: Vec<Answer>,
    calls: Cell<u32>,
}

impl Contract {
    fn new(answers: &[Answer]) -> Self {
        Contract {
            answers: answers.to_vec(),
            calls: Cell::new(0),
        }
    }

    fn check(&self) -> Result<Coverage, ContractError> {
        let call = self.calls.get();
        self.calls.set(call + 1);
        self.answers[(call as usize).min(self.answers.len() - 1)](call + 1)
    }
}

fn overloaded(n: u32) -> Result<Coverage, ContractError> {
    Err(ContractError::Overloaded(n))
}
fn covered(_: u32) -> Result<Coverage, ContractError> {
    Ok(Coverage::Covered)
}
fn invalid(_: u32) -> Result<Coverage, ContractError> {
    Err(ContractError::InvalidClaim)
}
fn slow_down_60_s(_: u32) -> Result<Coverage, ContractError> {
    Err(ContractError::SlowDown(60 * S))
}

// ---- async, with an async fallback that captures the parameters ----------------------------

#[retry(
    max = 3,
    base = "1s",
    jitter = none,
    fallback = |e, why| save_for_later_async(queue, claim, e, why)
)]
async fn check_coverage(
    contract: &Contract,
    queue: &Queue,
    claim: u32,
) -> Result<Coverage, ContractError> {
    tokio::time::sleep(100 * MS).await;
    contract.check()
}

#[tokio::test(start_paused = true)]
async fn an_async_fallback_is_the_result_when_the_retries_run_out() {
    let (contract, queue, t0) = (
        Contract::new(&[overloaded]),
        Queue::default(),
        Instant::now(),
    );
    let result = check_coverage(&contract, &queue, 4711).await;
    assert_eq!(result, Ok(Coverage::Saved { claim: 4711 }));
    assert_eq!(contract.calls.get(), 4);
    // Four attempts of 100 ms, pauses of 1, 2 and 4 s, then the fallback's own 50 ms.
    assert_eq!(t0.elapsed(), 7400 * MS + 50 * MS);
    let saved = queue.saved();
    assert_eq!(saved.len(), 1);
    let (claim, error, why) = &saved[0];
    assert_eq!((*claim, error.as_str()), (4711, "Overloaded(4)"));
    assert_eq!(why.reason, GiveUpReason::Exhausted);
    assert_eq!((why.function, why.attempts), ("check_coverage", 4));
    assert_eq!(why.elapsed, 7400 * MS);
    assert_eq!(
        why.to_string(),
        "`check_coverage` gave up after 4 attempts in 7.4s: retries used up"
    );
}

#[tokio::test(start_paused = true)]
async fn the_fallback_is_not_called_for_ok() {
    let (contract, queue) = (Contract::new(&[overloaded, covered]), Queue::default());
    assert_eq!(
        check_coverage(&contract, &queue, 1).await,
        Ok(Coverage::Covered)
    );
    assert!(queue.saved().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_fallback_is_not_called_for_a_permanent_error() {
    // A permanent error is an answer about the request, which the caller must see.
    let (contract, queue) = (Contract::new(&[overloaded, invalid]), Queue::default());
    assert_eq!(
        check_coverage(&contract, &queue, 1).await,
        Err(ContractError::InvalidClaim)
    );
    assert!(queue.saved().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_fallback_is_not_called_when_the_future_is_dropped() {
    let (contract, queue) = (Contract::new(&[overloaded]), Queue::default());
    // Dropped during the second pause, 3.2 s in: the loop never gives up.
    let dropped = tokio::time::timeout(3 * S, check_coverage(&contract, &queue, 1)).await;
    assert!(dropped.is_err());
    assert_eq!(contract.calls.get(), 2);
    tokio::time::sleep(60 * S).await;
    assert!(queue.saved().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_fallback_is_not_called_for_a_suggested_pause_within_the_limits() {
    let (contract, queue) = (
        Contract::new(&[|_| Err(ContractError::SlowDown(2 * S)), covered]),
        Queue::default(),
    );
    assert_eq!(
        check_coverage(&contract, &queue, 1).await,
        Ok(Coverage::Covered)
    );
    assert!(queue.saved().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_server_pause_beyond_max_delay_is_a_reason_to_fall_back() {
    let (contract, queue) = (
        Contract::new(&[overloaded, slow_down_60_s]),
        Queue::default(),
    );
    let result = check_coverage(&contract, &queue, 9).await;
    assert_eq!(result, Ok(Coverage::Saved { claim: 9 }));
    let (_, error, why) = &queue.saved()[0];
    assert_eq!(error, "SlowDown(60s)");
    assert_eq!(why.reason, GiveUpReason::SuggestedTooLong(60 * S));
    assert_eq!(why.attempts, 2);
    assert_eq!(why.elapsed, 1200 * MS);
}

// ---- a sync fallback in an async fn ---------------------------------------------------------

#[retry(max = 10, base = "1s", deadline = "2500ms", jitter = none, fallback = |e, why| save_for_later(queue, 7, e, why))]
async fn check_within_deadline(
    contract: &Contract,
    queue: &Queue,
) -> Result<Coverage, ContractError> {
    contract.check()
}

#[tokio::test(start_paused = true)]
async fn a_sync_fallback_in_an_async_fn_hears_the_deadline() {
    let (contract, queue, t0) = (
        Contract::new(&[overloaded]),
        Queue::default(),
        Instant::now(),
    );
    assert_eq!(
        check_within_deadline(&contract, &queue).await,
        Ok(Coverage::Saved { claim: 7 })
    );
    // 0 s, pause 1 s; 1 s, a 2 s pause would end past 2.5 s.
    assert_eq!(t0.elapsed(), S);
    let (_, error, why) = &queue.saved()[0];
    assert_eq!(error, "Overloaded(2)");
    assert_eq!(
        (why.reason, why.attempts, why.elapsed),
        (GiveUpReason::Deadline, 2, S)
    );
}

// ---- the budget and the breaker ---------------------------------------------------------------

static EMPTY_BUDGET: RetryBudget = RetryBudget::new().ratio(0.0).min_per_second(0);

#[retry(max = 3, base = "1s", jitter = none, budget = EMPTY_BUDGET, fallback = |e, why| save_for_later(queue, 5, e, why))]
async fn check_within_budget(
    contract: &Contract,
    queue: &Queue,
) -> Result<Coverage, ContractError> {
    contract.check()
}

#[tokio::test(start_paused = true)]
async fn an_empty_budget_is_a_reason_to_fall_back() {
    let (contract, queue) = (Contract::new(&[overloaded]), Queue::default());
    assert_eq!(
        check_within_budget(&contract, &queue).await,
        Ok(Coverage::Saved { claim: 5 })
    );
    assert_eq!(contract.calls.get(), 1);
    let (_, _, why) = &queue.saved()[0];
    assert_eq!((why.reason, why.attempts), (GiveUpReason::Budget, 1));
}

static BREAKER: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(2)
    .open_for(Duration::from_secs(30));

#[retry(max = 3, base = "1s", jitter = none, breaker = BREAKER, fallback = |e, why| save_for_later(queue, 3, e, why))]
async fn check_behind_breaker(
    contract: &Contract,
    queue: &Queue,
) -> Result<Coverage, ContractError> {
    contract.check()
}

#[tokio::test(start_paused = true)]
async fn a_breaker_that_opens_or_refuses_is_a_reason_to_fall_back() {
    let (contract, queue, t0) = (
        Contract::new(&[overloaded]),
        Queue::default(),
        Instant::now(),
    );
    // The second failure opens the circuit: the loop falls back at once, with that failure.
    assert_eq!(
        check_behind_breaker(&contract, &queue).await,
        Ok(Coverage::Saved { claim: 3 })
    );
    assert_eq!(t0.elapsed(), S);
    // Refused before its first attempt: the error is `E::from(CircuitOpen)`, no attempt ran.
    assert_eq!(
        check_behind_breaker(&contract, &queue).await,
        Ok(Coverage::Saved { claim: 3 })
    );
    assert_eq!(contract.calls.get(), 2);
    let saved = queue.saved();
    let reasons: Vec<_> = saved
        .iter()
        .map(|(_, e, w)| (e.as_str(), w.reason, w.attempts))
        .collect();
    assert_eq!(
        reasons,
        [
            ("Overloaded(2)", GiveUpReason::BreakerOpen, 2),
            (
                "Unavailable(CircuitOpen { remaining: Some(30s) })",
                GiveUpReason::BreakerOpen,
                0
            ),
        ]
    );
}

// ---- nested: the outer function has not given up ----------------------------------------------

#[retry(max = 3, base = "1ms", jitter = none, fallback = |e, why| save_for_later(queue, 1, e, why))]
async fn inner(contract: &Contract, queue: &Queue) -> Result<Coverage, ContractError> {
    contract.check()
}

#[retry(max = 2, base = "1ms", jitter = none, fallback = |e, why| save_for_later(outer_queue, 2, e, why))]
async fn outer(
    contract: &Contract,
    queue: &Queue,
    outer_queue: &Queue,
) -> Result<Coverage, ContractError> {
    inner(contract, queue).await
}

#[tokio::test(start_paused = true)]
async fn a_nested_single_attempt_does_not_fall_back_the_outer_loop_does() {
    let (contract, inner_queue, outer_queue) = (
        Contract::new(&[overloaded]),
        Queue::default(),
        Queue::default(),
    );
    assert_eq!(
        outer(&contract, &inner_queue, &outer_queue).await,
        Ok(Coverage::Saved { claim: 2 })
    );
    assert_eq!(contract.calls.get(), 3);
    assert!(inner_queue.saved().is_empty());
    assert_eq!(outer_queue.saved().len(), 1);
}

// ---- the order of notify, on_give_up, the tracing events and the fallback ------------------------

type Journal = Arc<Mutex<Vec<String>>>;

fn note(journal: &Journal, line: impl Into<String>) {
    journal.lock().expect("not poisoned").push(line.into());
}

#[retry(
    max = 2,
    base = "1ms",
    jitter = none,
    notify = |e: &ContractError, event: &RetryEvent| note(journal, format!("notify {} {e:?}", event.attempt)),
    on_give_up = |e: &ContractError, why: &GiveUp| note(journal, format!("on_give_up {e:?} {}", why.reason)),
    fallback = |e, why: GiveUp| { note(journal, format!("fallback {e:?} {}", why.attempts)); Ok(Coverage::Saved { claim: 0 }) },
)]
fn check_journaled(contract: &Contract, journal: &Journal) -> Result<Coverage, ContractError> {
    contract.check()
}

#[test]
fn notify_the_events_on_give_up_and_the_fallback_come_in_this_order() {
    let journal = Journal::default();
    let contract = Contract::new(&[overloaded]);
    let (result, _) = journaled(&journal, || {
        testing::record(|| check_journaled(&contract, &journal))
    });
    assert_eq!(result, Ok(Coverage::Saved { claim: 0 }));
    assert_eq!(
        *journal.lock().expect("not poisoned"),
        [
            "INFO attempt failed; retrying",
            "notify 1 Overloaded(1)",
            "INFO attempt failed; retrying",
            "notify 2 Overloaded(2)",
            "ERROR giving up",
            "on_give_up Overloaded(3) retries used up",
            "fallback Overloaded(3) 3",
        ]
    );
}

#[retry(
    max = 2,
    base = "1ms",
    jitter = none,
    notify = |e: &ContractError, event: &RetryEvent| note(journal, format!("notify {} {e:?}", event.attempt)),
    on_give_up = |e: &ContractError, why: &GiveUp| note(journal, format!("on_give_up {e:?} {}", why.reason)),
    fallback = |e, why: GiveUp| async move {
        tokio::time::sleep(MS).await;
        note(journal, format!("fallback {e:?} {}", why.attempts));
        Ok(Coverage::Saved { claim: 0 })
    },
)]
async fn check_journaled_async(
    contract: &Contract,
    journal: &Journal,
) -> Result<Coverage, ContractError> {
    contract.check()
}

#[test]
fn async_notify_the_events_on_give_up_and_the_fallback_come_in_this_order() {
    let journal = Journal::default();
    let contract = Contract::new(&[overloaded]);
    let result = journaled(&journal, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime")
            .block_on(check_journaled_async(&contract, &journal))
    });
    assert_eq!(result, Ok(Coverage::Saved { claim: 0 }));
    assert_eq!(
        *journal.lock().expect("not poisoned"),
        [
            "INFO attempt failed; retrying",
            "notify 1 Overloaded(1)",
            "INFO attempt failed; retrying",
            "notify 2 Overloaded(2)",
            "ERROR giving up",
            "on_give_up Overloaded(3) retries used up",
            "fallback Overloaded(3) 3",
        ]
    );
}

/// Runs `f` with the events of this thread written to `journal` as `LEVEL message`.
fn journaled<R>(journal: &Journal, f: impl FnOnce() -> R) -> R {
    callsites::keep_open();
    tracing::subscriber::with_default(Journaling(Arc::clone(journal)), f)
}

struct Journaling(Journal);

struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Journaling {
    fn register_callsite(
        &self,
        _: &'static tracing::Metadata<'static>,
    ) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        note(&self.0, format!("{} {message}", event.metadata().level()));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

// ---- sync ----------------------------------------------------------------------------------------

#[retry(max = 2, base = "1s", jitter = none, fallback = |e, why| save_for_later(queue, claim, e, why))]
fn check_blocking(
    contract: &Contract,
    queue: &Queue,
    claim: u32,
) -> Result<Coverage, ContractError> {
    contract.check()
}

#[test]
fn a_sync_fallback_is_the_result_when_the_retries_run_out() {
    let (contract, queue) = (Contract::new(&[overloaded]), Queue::default());
    let (result, pauses) = testing::record(|| check_blocking(&contract, &queue, 12));
    assert_eq!(result, Ok(Coverage::Saved { claim: 12 }));
    assert_eq!(pauses, [S, 2 * S]);
    let (claim, error, why) = &queue.saved()[0];
    assert_eq!((*claim, error.as_str()), (12, "Overloaded(3)"));
    assert_eq!((why.reason, why.attempts), (GiveUpReason::Exhausted, 3));
    // On the recording's clock only the pauses take time.
    assert_eq!(why.elapsed, 3 * S);
}

#[test]
fn sync_the_fallback_is_not_called_for_ok_or_a_permanent_error() {
    let queue = Queue::default();
    let contract = Contract::new(&[overloaded, covered]);
    let (result, _) = testing::record(|| check_blocking(&contract, &queue, 1));
    assert_eq!(result, Ok(Coverage::Covered));
    let contract = Contract::new(&[overloaded, invalid]);
    let (result, _) = testing::record(|| check_blocking(&contract, &queue, 1));
    assert_eq!(result, Err(ContractError::InvalidClaim));
    assert!(queue.saved().is_empty());
}

#[retry(max = 2, base = "1ms", jitter = none)]
fn sync_inner(contract: &Contract, queue: &Queue) -> Result<Coverage, ContractError> {
    let _ = queue;
    contract.check()
}

#[retry(max = 3, base = "1ms", jitter = none, fallback = |e, why| save_for_later(queue, 8, e, why))]
fn sync_inner_with_fallback(contract: &Contract, queue: &Queue) -> Result<Coverage, ContractError> {
    contract.check()
}

#[retry(max = 1, base = "1ms", jitter = none)]
fn sync_outer(contract: &Contract, queue: &Queue) -> Result<Coverage, ContractError> {
    let _ = sync_inner(contract, queue);
    sync_inner_with_fallback(contract, queue)
}

#[test]
fn sync_a_nested_single_attempt_does_not_fall_back() {
    let (contract, queue) = (Contract::new(&[overloaded]), Queue::default());
    let (result, _) = testing::record(|| sync_outer(&contract, &queue));
    assert!(matches!(result, Err(ContractError::Overloaded(_))));
    // Two attempts of the outer loop, each calling both inner functions once.
    assert_eq!(contract.calls.get(), 4);
    assert!(queue.saved().is_empty());
}

// ---- the idempotency key, in the fallback ---------------------------------------------------------

/// What a deferred payout job records: the key its retries will send, and the attempt.
fn defer_payout(
    jobs: &RefCell<Vec<(String, u32)>>,
    error: ContractError,
    why: GiveUp,
) -> Result<Coverage, ContractError> {
    let now = attempt();
    let key = now.key().map(|k| k.as_str().to_owned()).unwrap_or_default();
    jobs.borrow_mut().push((key, now.number()));
    let _ = (error, why);
    Ok(Coverage::Saved { claim: 0 })
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", jitter = none, fallback = |e, why| defer_payout(jobs, e, why))]
fn pay_out(
    contract: &Contract,
    key: &IdempotencyKey,
    jobs: &RefCell<Vec<(String, u32)>>,
) -> Result<Coverage, ContractError> {
    assert_eq!(attempt().key(), Some(key));
    contract.check()
}

#[test]
fn a_non_idempotent_fallback_sees_the_same_key() {
    let (contract, jobs) = (Contract::new(&[overloaded]), RefCell::new(Vec::new()));
    let key = IdempotencyKey::from("payout-4711");
    let (result, _) = testing::record(|| pay_out(&contract, &key, &jobs));
    assert_eq!(result, Ok(Coverage::Saved { claim: 0 }));
    assert_eq!(*jobs.borrow(), [("payout-4711".to_owned(), 3)]);
    // Outside the function, no key.
    assert_eq!(attempt().key(), None);
}

async fn defer_payout_async(
    jobs: &RefCell<Vec<(String, u32)>>,
    error: ContractError,
    why: GiveUp,
) -> Result<Coverage, ContractError> {
    // The context follows the fallback's future across `.await`.
    tokio::time::sleep(MS).await;
    defer_payout(jobs, error, why)
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", jitter = none, fallback = |e, why| defer_payout_async(jobs, e, why))]
async fn pay_out_async(
    contract: &Contract,
    #[idempotency_key] key: &str,
    jobs: &RefCell<Vec<(String, u32)>>,
) -> Result<Coverage, ContractError> {
    let _ = key;
    contract.check()
}

#[tokio::test(start_paused = true)]
async fn an_async_non_idempotent_fallback_sees_the_same_key() {
    let (contract, jobs) = (Contract::new(&[overloaded]), RefCell::new(Vec::new()));
    let result = pay_out_async(&contract, "payout-4712", &jobs).await;
    assert_eq!(result, Ok(Coverage::Saved { claim: 0 }));
    assert_eq!(*jobs.borrow(), [("payout-4712".to_owned(), 3)]);
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", jitter = none, fallback = |e, why| {
    // Read as the closure makes its future, before any `.await`.
    let now = attempt();
    let seen = (now.key().map(|k| k.as_str().to_owned()).unwrap_or_default(), now.number());
    async move {
        jobs.borrow_mut().push(seen);
        let _ = (e, why);
        Ok(Coverage::Saved { claim: 0 })
    }
})]
async fn pay_out_async_made_in_context(
    contract: &Contract,
    #[idempotency_key] key: &str,
    jobs: &RefCell<Vec<(String, u32)>>,
) -> Result<Coverage, ContractError> {
    let _ = key;
    contract.check()
}

#[tokio::test(start_paused = true)]
async fn an_async_fallback_is_made_in_the_last_attempts_context() {
    let (contract, jobs) = (Contract::new(&[overloaded]), RefCell::new(Vec::new()));
    let result = pay_out_async_made_in_context(&contract, "payout-4713", &jobs).await;
    assert_eq!(result, Ok(Coverage::Saved { claim: 0 }));
    assert_eq!(*jobs.borrow(), [("payout-4713".to_owned(), 3)]);
}

// ---- with `on_result`: the fallback hears the outcome, a rejected `Ok` as well -----------------

/// A rate-limited server: answers `answers[n]` on call `n` (the last one for later calls), a
/// status, or `None` for an overloaded connection.
struct RateLimited {
    answers: Vec<Option<u16>>,
    calls: Cell<u32>,
}

impl RateLimited {
    fn new(answers: &[Option<u16>]) -> Self {
        RateLimited {
            answers: answers.to_vec(),
            calls: Cell::new(0),
        }
    }

    fn get(&self) -> Result<u16, ContractError> {
        let call = self.calls.get();
        self.calls.set(call + 1);
        self.answers[(call as usize).min(self.answers.len() - 1)]
            .ok_or(ContractError::Overloaded(call + 1))
    }
}

/// What the fallbacks heard, one line per call.
#[derive(Default)]
struct Fallbacks {
    heard: RefCell<Vec<String>>,
}

/// Serves a cached status when the server keeps refusing: the fallback `on_result` +
/// `fallback` users write, "when the retries give up, fall back".
fn serve_cached(
    fallbacks: &Fallbacks,
    outcome: Result<u16, ContractError>,
    why: GiveUp,
) -> Result<u16, ContractError> {
    fallbacks.heard.borrow_mut().push(format!(
        "{outcome:?} after {}: {:?}",
        why.attempts, why.reason
    ));
    Ok(200)
}

#[retry(
    max = 2,
    base = "1s",
    jitter = none,
    on_result = |status: &u16| *status == 429,
    fallback = |outcome, why| serve_cached(fallbacks, outcome, why)
)]
fn get_rate_limited(server: &RateLimited, fallbacks: &Fallbacks) -> Result<u16, ContractError> {
    server.get()
}

#[test]
fn with_on_result_the_fallback_runs_once_per_call_with_the_rejected_ok() {
    // A server that keeps answering 429: every call gives up on a rejected `Ok(429)`, and its
    // fallback hears it (it ran zero times before).
    let (server, fallbacks) = (RateLimited::new(&[Some(429)]), Fallbacks::default());
    let (results, recording) = testing::record(|| {
        (0..10)
            .map(|_| get_rate_limited(&server, &fallbacks))
            .collect::<Vec<_>>()
    });
    assert!(results.iter().all(|r| *r == Ok(200)), "{results:?}");
    assert_eq!(results.len(), 10);
    assert_eq!(server.calls.get(), 30, "three attempts per call");
    assert_eq!(
        *fallbacks.heard.borrow(),
        vec!["Ok(429) after 3: Exhausted"; 10]
    );
    assert_eq!(recording, [S, 2 * S].repeat(10));
}

#[test]
fn with_on_result_the_fallback_hears_a_last_error_and_not_an_accepted_ok() {
    let fallbacks = Fallbacks::default();
    let server = RateLimited::new(&[Some(429), Some(429), None]);
    let (result, _) = testing::record(|| get_rate_limited(&server, &fallbacks));
    assert_eq!(result, Ok(200));
    assert_eq!(
        *fallbacks.heard.borrow(),
        ["Err(Overloaded(3)) after 3: Exhausted"]
    );

    // An `Ok` that `on_result` accepts is the answer: no fallback.
    let server = RateLimited::new(&[Some(429), Some(204)]);
    let (result, _) = testing::record(|| get_rate_limited(&server, &fallbacks));
    assert_eq!((result, server.calls.get()), (Ok(204), 2));
    assert_eq!(fallbacks.heard.borrow().len(), 1);
}

#[retry(
    max = 2,
    base = "1s",
    jitter = none,
    on_result = |status: &u16| *status == 429,
    fallback = |outcome, why| async move {
        tokio::time::sleep(50 * MS).await;
        serve_cached(fallbacks, outcome, why)
    }
)]
async fn get_rate_limited_async(
    server: &RateLimited,
    fallbacks: &Fallbacks,
) -> Result<u16, ContractError> {
    server.get()
}

#[tokio::test(start_paused = true)]
async fn with_on_result_an_async_fallback_runs_once_per_call_with_the_rejected_ok() {
    let (server, fallbacks) = (RateLimited::new(&[Some(429)]), Fallbacks::default());
    let t0 = Instant::now();
    for _ in 0..10 {
        assert_eq!(get_rate_limited_async(&server, &fallbacks).await, Ok(200));
    }
    assert_eq!(server.calls.get(), 30);
    assert_eq!(
        *fallbacks.heard.borrow(),
        vec!["Ok(429) after 3: Exhausted"; 10]
    );
    // Pauses of 1 and 2 s, then the fallback's 50 ms, per call.
    assert_eq!(t0.elapsed(), 10 * (3 * S + 50 * MS));
}

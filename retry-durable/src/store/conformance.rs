//! The store contract as a test suite that any [`IdempotencyStore`] runs against itself, as
//! `tower-test` does for services (feature `conformance`).
//!
//! `MemoryStore`, `SqliteStore` and `PostgresStore` pass it in this crate's tests. Someone who
//! writes a store of their own (on Redis, MySQL, DynamoDB, ...) adds the feature to their
//! dev-dependencies, writes a [`StoreFactory`] that opens their store on fresh, empty storage
//! reading the kit's [`ManualClock`], and gets one test per rule:
//!
//! ```toml
//! [dev-dependencies]
//! retry-durable = { version = "0.1", default-features = false, features = ["conformance"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! ```
//! use retry_durable::store::conformance::{ManualClock, Receipt, StoreFactory};
//! use retry_durable::store::{BoxFuture, MemoryStore};
//!
//! struct Memory;
//!
//! impl StoreFactory for Memory {
//!     type Store = MemoryStore<Receipt>;
//!
//!     fn fresh<'a>(&'a self, _case: &'a str, clock: ManualClock) -> BoxFuture<'a, Option<Self::Store>> {
//!         // Every time the store reads (leases, time to live) comes from the kit's clock.
//!         Box::pin(async move { Some(MemoryStore::new().with_clock(move || clock.instant())) })
//!     }
//! }
//!
//! // One `#[tokio::test]` per rule, named after it, in a module `conformance`:
//! retry_durable::store_conformance_tests!(Memory);
//! # fn main() {}
//! ```
//!
//! A case that finds the store breaking the contract panics with the rule and what the store
//! answered instead. [`check`] runs one case by name and [`CASES`] lists them, for a harness of
//! your own.
//!
//! # What the contract is
//!
//! Each case is named after the rule it checks ([`CASES`]): a new key executes once and a
//! repeat replays; a repeat while the first runs is `InProgress` (409); another payload is a
//! `Mismatch` (422); scopes keep clients apart; a release or a dropped guard frees the key; a
//! completed key replays for [`DEFAULT_TTL`] and no longer; a dead holder's key is taken over
//! after [`DEFAULT_LEASE`] with the next claim number; a holder whose key was taken over is
//! refused with [`StoreError::Superseded`]; renewing keeps a key; a holder past its lease still
//! completes when nobody took over; of many concurrent requests with one key exactly one
//! executes, on a new key, on a dead holder's key and on keys whose response expired (every
//! other is `InProgress`, none replays the expired response); a key breaks the key rule
//! ([`validate_key`](super::validate_key)) and is refused with [`StoreError::InvalidKey`]
//! before any database work; a `begin` cancelled mid-flight gives its claim back at once;
//! `purge_expired` removes what expired and
//! nothing else; the store works behind `dyn` and its futures are `Send`.
//!
//! What the kit cannot check, because it depends on where the store keeps its keys, stays with
//! each store's own tests: that keys survive a restart and that replicas share them, that the
//! handler's writes commit with the completion, and what a crash leaves.

use super::{
    Begin, BoxFuture, DEFAULT_LEASE, DEFAULT_TTL, Fingerprint, Guard, IdempotencyStore, Mode,
    StoreError,
};
use retry_runtime::{IdempotencyKey, Transient};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Barrier;

/// The response the cases store and replay.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// Which holder stored it.
    pub number: u32,
    /// Text, so that a store that keeps responses as strings or JSON has something to keep.
    pub text: String,
}

/// The clock every store of a case reads: it moves only when the case says, so that a 60 s
/// lease ends without a 60 s wait.
#[derive(Clone, Debug)]
pub struct ManualClock {
    system: SystemTime,
    instant: Instant,
    offset: Arc<Mutex<Duration>>,
}

impl ManualClock {
    /// A clock at the present moment.
    pub fn new() -> Self {
        ManualClock {
            system: SystemTime::now(),
            instant: Instant::now(),
            offset: Arc::default(),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap_or_else(PoisonError::into_inner) += by;
    }

    /// The time as a wall clock, for a store that keeps times in its database.
    pub fn system_time(&self) -> SystemTime {
        self.system + self.elapsed()
    }

    /// The time as a monotonic clock, for a store in memory.
    pub fn instant(&self) -> Instant {
        self.instant + self.elapsed()
    }

    fn elapsed(&self) -> Duration {
        *self.offset.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

/// Opens the store under test, once per case.
pub trait StoreFactory: Send + Sync {
    /// The store.
    type Store: IdempotencyStore<Receipt> + 'static;

    /// A store on fresh, empty storage (a new file, schema or key prefix per call) that reads
    /// `clock` whenever it needs the time, with [`DEFAULT_TTL`] and [`DEFAULT_LEASE`]; `case`
    /// names the case, for a name of the storage. `None` skips the case (a server that is not
    /// there, after saying so).
    fn fresh<'a>(&'a self, case: &'a str, clock: ManualClock)
    -> BoxFuture<'a, Option<Self::Store>>;
}

/// Every case, by name.
pub const CASES: &[&str] = &[
    "a_new_key_executes_and_a_repeat_replays_without_executing",
    "a_repeat_while_the_first_runs_is_in_progress_then_replays",
    "a_different_payload_is_a_mismatch_running_or_completed",
    "scopes_keep_clients_apart",
    "a_release_frees_the_key_at_once",
    "a_dropped_guard_frees_the_key",
    "a_completed_key_replays_for_the_ttl_then_executes_afresh",
    "a_dead_holders_key_is_taken_over_after_the_lease_with_the_next_claim",
    "a_superseded_holder_can_neither_complete_nor_renew_nor_release",
    "renewing_keeps_the_key",
    "a_holder_past_its_lease_completes_when_nobody_took_over",
    "concurrent_requests_with_one_new_key_execute_once",
    "concurrent_takeovers_of_a_dead_holders_key_execute_once",
    "concurrent_takeovers_of_expired_keys_execute_once_and_the_rest_are_in_progress",
    "keys_follow_one_rule_checked_before_any_database_work",
    "a_cancelled_begin_gives_its_claim_back_at_once",
    "purge_removes_what_expired_and_nothing_else",
    "the_store_works_behind_dyn_and_its_futures_are_send",
    "the_one_commit_mode_executes_once_and_a_dropped_claim_frees_the_key",
];

/// Runs the case named `case` (one of [`CASES`]) on a fresh store from `factory`; panics, naming
/// the rule, when the store breaks it, and when `case` is not a case. Needs a multi-threaded
/// tokio runtime (the concurrent cases spawn tasks).
pub async fn check<F: StoreFactory>(factory: &F, case: &str) {
    let clock = ManualClock::new();
    let Some(store) = factory.fresh(case, clock.clone()).await else {
        return;
    };
    let t = Case {
        store: Arc::new(store),
        clock,
    };
    match case {
        "a_new_key_executes_and_a_repeat_replays_without_executing" => {
            a_new_key_executes_and_a_repeat_replays_without_executing(t).await
        }
        "a_repeat_while_the_first_runs_is_in_progress_then_replays" => {
            a_repeat_while_the_first_runs_is_in_progress_then_replays(t).await
        }
        "a_different_payload_is_a_mismatch_running_or_completed" => {
            a_different_payload_is_a_mismatch_running_or_completed(t).await
        }
        "scopes_keep_clients_apart" => scopes_keep_clients_apart(t).await,
        "a_release_frees_the_key_at_once" => a_release_frees_the_key_at_once(t).await,
        "a_dropped_guard_frees_the_key" => a_dropped_guard_frees_the_key(t).await,
        "a_completed_key_replays_for_the_ttl_then_executes_afresh" => {
            a_completed_key_replays_for_the_ttl_then_executes_afresh(t).await
        }
        "a_dead_holders_key_is_taken_over_after_the_lease_with_the_next_claim" => {
            a_dead_holders_key_is_taken_over_after_the_lease_with_the_next_claim(t).await
        }
        "a_superseded_holder_can_neither_complete_nor_renew_nor_release" => {
            a_superseded_holder_can_neither_complete_nor_renew_nor_release(t).await
        }
        "renewing_keeps_the_key" => renewing_keeps_the_key(t).await,
        "a_holder_past_its_lease_completes_when_nobody_took_over" => {
            a_holder_past_its_lease_completes_when_nobody_took_over(t).await
        }
        "concurrent_requests_with_one_new_key_execute_once" => {
            concurrent_requests_with_one_new_key_execute_once(t).await
        }
        "concurrent_takeovers_of_a_dead_holders_key_execute_once" => {
            concurrent_takeovers_of_a_dead_holders_key_execute_once(t).await
        }
        "concurrent_takeovers_of_expired_keys_execute_once_and_the_rest_are_in_progress" => {
            concurrent_takeovers_of_expired_keys_execute_once_and_the_rest_are_in_progress(t).await
        }
        "keys_follow_one_rule_checked_before_any_database_work" => {
            keys_follow_one_rule_checked_before_any_database_work(t).await
        }
        "a_cancelled_begin_gives_its_claim_back_at_once" => {
            a_cancelled_begin_gives_its_claim_back_at_once(t).await
        }
        "purge_removes_what_expired_and_nothing_else" => {
            purge_removes_what_expired_and_nothing_else(t).await
        }
        "the_store_works_behind_dyn_and_its_futures_are_send" => {
            the_store_works_behind_dyn_and_its_futures_are_send(t).await
        }
        "the_one_commit_mode_executes_once_and_a_dropped_claim_frees_the_key" => {
            the_one_commit_mode_executes_once_and_a_dropped_claim_frees_the_key(t).await
        }
        other => panic!("`{other}` is not a conformance case; the cases are CASES"),
    }
}

/// Runs every case of [`CASES`] on fresh stores from `factory`, one after the other.
pub async fn check_all<F: StoreFactory>(factory: &F) {
    for case in CASES {
        check(factory, case).await;
    }
}

/// One `#[tokio::test]` per case of the conformance kit, in a module `conformance`, each on a
/// fresh store from the factory (an expression of a type that implements
/// [`StoreFactory`](crate::store::conformance::StoreFactory)). The calling crate needs tokio with the
/// `macros` and `rt-multi-thread` features.
///
/// [`store::conformance`](crate::store::conformance) has an example.
#[macro_export]
macro_rules! store_conformance_tests {
    ($factory:expr) => {
        $crate::store_conformance_tests!(@cases $factory;
            a_new_key_executes_and_a_repeat_replays_without_executing,
            a_repeat_while_the_first_runs_is_in_progress_then_replays,
            a_different_payload_is_a_mismatch_running_or_completed,
            scopes_keep_clients_apart,
            a_release_frees_the_key_at_once,
            a_dropped_guard_frees_the_key,
            a_completed_key_replays_for_the_ttl_then_executes_afresh,
            a_dead_holders_key_is_taken_over_after_the_lease_with_the_next_claim,
            a_superseded_holder_can_neither_complete_nor_renew_nor_release,
            renewing_keeps_the_key,
            a_holder_past_its_lease_completes_when_nobody_took_over,
            concurrent_requests_with_one_new_key_execute_once,
            concurrent_takeovers_of_a_dead_holders_key_execute_once,
            concurrent_takeovers_of_expired_keys_execute_once_and_the_rest_are_in_progress,
            keys_follow_one_rule_checked_before_any_database_work,
            a_cancelled_begin_gives_its_claim_back_at_once,
            purge_removes_what_expired_and_nothing_else,
            the_store_works_behind_dyn_and_its_futures_are_send,
            the_one_commit_mode_executes_once_and_a_dropped_claim_frees_the_key,
        );
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        mod conformance {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    $crate::store::conformance::check(&$factory, stringify!($case)).await;
                }
            )*
            #[test]
            fn every_case_has_a_test() {
                let listed: &[&str] = &[$(stringify!($case)),*];
                assert_eq!(listed, $crate::store::conformance::CASES);
            }
        }
    };
}

/// One case's store and clock.
struct Case<S> {
    store: Arc<S>,
    clock: ManualClock,
}

const PAY: &[u8] = br#"{"claim":4711,"cents":125000}"#;
const OTHER: &[u8] = br#"{"claim":4711,"cents":990000}"#;
const MS: Duration = Duration::from_millis(1);

fn receipt(number: u32) -> Receipt {
    Receipt {
        number,
        text: format!("receipt P-{number}"),
    }
}

fn key(text: &str) -> IdempotencyKey {
    IdempotencyKey::from(text)
}

/// `begin` that must claim.
async fn execute<'s, S: IdempotencyStore<Receipt>>(
    store: &'s S,
    scope: &str,
    key: &IdempotencyKey,
    payload: &[u8],
) -> Guard<'s, Receipt, S::Transaction> {
    match store
        .begin_scoped(scope, key, Fingerprint::of(payload))
        .await
    {
        Ok(Begin::Execute(guard)) => guard,
        Ok(other) => panic!("key {key:?} in scope {scope:?}: expected Execute, got {other:?}"),
        Err(e) => panic!("key {key:?} in scope {scope:?}: expected Execute, got the error {e}"),
    }
}

/// `begin` that must not claim: its answer without the guard type.
async fn answer<S: IdempotencyStore<Receipt>>(
    store: &S,
    scope: &str,
    key: &IdempotencyKey,
    payload: &[u8],
) -> Begin<'static, Receipt> {
    match store
        .begin_scoped(scope, key, Fingerprint::of(payload))
        .await
    {
        Ok(Begin::Replay(response)) => Begin::Replay(response),
        Ok(Begin::InProgress) => Begin::InProgress,
        Ok(Begin::Mismatch) => Begin::Mismatch,
        Ok(other) => panic!("key {key:?} in scope {scope:?}: expected no execution, got {other:?}"),
        Err(e) => panic!("key {key:?} in scope {scope:?}: expected an answer, got the error {e}"),
    }
}

/// Must succeed: `what` says which step, for the message.
fn ok<T>(result: Result<T, StoreError>, what: &str) -> T {
    result.unwrap_or_else(|e| panic!("{what}: expected Ok, got the error {e}"))
}

/// Asks until the key is free again (a dropped guard may release it in a background task).
async fn until_free<'s, S: IdempotencyStore<Receipt>>(
    store: &'s S,
    key: &IdempotencyKey,
    payload: &[u8],
) -> Guard<'s, Receipt, S::Transaction> {
    for _ in 0..500 {
        match store.begin(key, Fingerprint::of(payload)).await {
            Ok(Begin::Execute(guard)) => return guard,
            Ok(Begin::InProgress) => tokio::time::sleep(MS).await,
            Ok(other) => panic!("expected InProgress until released, got {other:?}"),
            Err(e) => panic!("expected InProgress until released, got the error {e}"),
        }
    }
    panic!("a dropped guard's key was not released within 500 tries")
}

async fn a_new_key_executes_and_a_repeat_replays_without_executing<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let k = key("8e03978e-40d5-43e8-bc93-6894a57f9324");
    let guard = execute(&*t.store, "", &k, PAY).await;
    assert_eq!(
        (guard.key(), guard.scope(), guard.claim()),
        (&k, "", 1),
        "the first claim on a key is number 1"
    );
    ok(guard.complete(&receipt(1)).await, "complete");
    for _ in 0..3 {
        assert_eq!(
            answer(&*t.store, "", &k, PAY).await,
            Begin::Replay(receipt(1))
        );
    }
}

async fn a_repeat_while_the_first_runs_is_in_progress_then_replays<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let k = key("k1");
    let guard = execute(&*t.store, "", &k, PAY).await;
    let repeat = answer(&*t.store, "", &k, PAY).await;
    assert_eq!(repeat, Begin::InProgress);
    assert_eq!(repeat.rejection_status(), Some(409));
    ok(guard.complete(&receipt(1)).await, "complete");
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(1))
    );
}

async fn a_different_payload_is_a_mismatch_running_or_completed<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let k = key("k1");
    let guard = execute(&*t.store, "", &k, PAY).await;
    let other = answer(&*t.store, "", &k, OTHER).await;
    assert_eq!(other, Begin::Mismatch, "another payload while running");
    assert_eq!(other.rejection_status(), Some(422));
    ok(guard.complete(&receipt(1)).await, "complete");
    assert_eq!(
        answer(&*t.store, "", &k, OTHER).await,
        Begin::Mismatch,
        "another payload once completed"
    );
    // The mismatch changed nothing: the first request is still replayed.
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(1))
    );
}

async fn scopes_keep_clients_apart<S: IdempotencyStore<Receipt> + 'static>(t: Case<S>) {
    let k = key("order-1"); // two clients chose the same key
    let a = execute(&*t.store, "client-a", &k, PAY).await;
    let b = execute(&*t.store, "client-b", &k, OTHER).await;
    let unscoped = execute(&*t.store, "", &k, PAY).await;
    assert_eq!((a.scope(), b.scope()), ("client-a", "client-b"));
    ok(a.complete(&receipt(1)).await, "complete in scope a");
    ok(b.complete(&receipt(2)).await, "complete in scope b");
    assert_eq!(
        answer(&*t.store, "client-a", &k, PAY).await,
        Begin::Replay(receipt(1))
    );
    assert_eq!(
        answer(&*t.store, "client-b", &k, OTHER).await,
        Begin::Replay(receipt(2))
    );
    assert_eq!(
        answer(&*t.store, "client-a", &k, OTHER).await,
        Begin::Mismatch
    );
    assert_eq!(answer(&*t.store, "", &k, PAY).await, Begin::InProgress);
    drop(unscoped);
}

async fn a_release_frees_the_key_at_once<S: IdempotencyStore<Receipt> + 'static>(t: Case<S>) {
    let k = key("k1");
    let guard = execute(&*t.store, "", &k, PAY).await;
    ok(guard.release().await, "release");
    // Nothing was stored: the retry executes, and may even carry another payload.
    let retry = execute(&*t.store, "", &k, OTHER).await;
    assert_eq!(retry.claim(), 1, "a released claim's number is used again");
    ok(retry.complete(&receipt(2)).await, "complete");
    assert_eq!(
        answer(&*t.store, "", &k, OTHER).await,
        Begin::Replay(receipt(2))
    );
}

async fn a_dropped_guard_frees_the_key<S: IdempotencyStore<Receipt> + 'static>(t: Case<S>) {
    let k = key("k1");
    drop(execute(&*t.store, "", &k, PAY).await); // the handler failed halfway
    let retry = until_free(&*t.store, &k, PAY).await;
    ok(retry.complete(&receipt(1)).await, "complete");
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(1))
    );
}

async fn a_completed_key_replays_for_the_ttl_then_executes_afresh<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let k = key("k1");
    let guard = execute(&*t.store, "", &k, PAY).await;
    ok(guard.complete(&receipt(1)).await, "complete");
    t.clock.advance(DEFAULT_TTL - MS);
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(1)),
        "1 ms before the time to live ends"
    );
    t.clock.advance(MS);
    // Expired: a new request, even with another payload.
    let fresh = execute(&*t.store, "", &k, OTHER).await;
    ok(fresh.complete(&receipt(2)).await, "complete");
    assert_eq!(
        answer(&*t.store, "", &k, OTHER).await,
        Begin::Replay(receipt(2))
    );
}

async fn a_dead_holders_key_is_taken_over_after_the_lease_with_the_next_claim<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let k = key("k1");
    // A holder that dies: it never completes nor releases.
    std::mem::forget(execute(&*t.store, "", &k, PAY).await);
    t.clock.advance(DEFAULT_LEASE - MS);
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::InProgress,
        "1 ms before the lease ends"
    );
    t.clock.advance(MS);
    // Another payload does not take a running key over, even one whose holder died.
    assert_eq!(answer(&*t.store, "", &k, OTHER).await, Begin::Mismatch);
    let successor = execute(&*t.store, "", &k, PAY).await;
    assert_eq!(successor.claim(), 2, "the takeover is the second claim");
    assert_eq!(answer(&*t.store, "", &k, PAY).await, Begin::InProgress);
    ok(successor.complete(&receipt(2)).await, "complete");
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(2))
    );
}

async fn a_superseded_holder_can_neither_complete_nor_renew_nor_release<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let k = key("k1");
    let first = execute(&*t.store, "", &k, PAY).await; // paused, not dead
    t.clock.advance(DEFAULT_LEASE);
    let second = execute(&*t.store, "", &k, PAY).await; // also paused
    t.clock.advance(DEFAULT_LEASE);
    let third = execute(&*t.store, "", &k, PAY).await;
    assert_eq!((first.claim(), second.claim(), third.claim()), (1, 2, 3));

    let refused = first
        .renew()
        .await
        .expect_err("a superseded holder's renew is refused");
    assert!(
        matches!(refused, StoreError::Superseded { claim: 1 }),
        "renew: expected Superseded {{ claim: 1 }}, got {refused}"
    );
    assert_eq!(refused.status(), 409);
    assert!(refused.is_transient());
    let refused = first
        .release()
        .await
        .expect_err("a superseded holder's release is refused");
    assert!(
        matches!(refused, StoreError::Superseded { claim: 1 }),
        "release: expected Superseded {{ claim: 1 }}, got {refused}"
    );
    let refused = second
        .complete(&receipt(2))
        .await
        .expect_err("a superseded holder's completion is refused");
    assert!(
        matches!(refused, StoreError::Superseded { claim: 2 }),
        "complete: expected Superseded {{ claim: 2 }}, got {refused}"
    );
    assert!(
        refused
            .to_string()
            .starts_with("claim 2 on this idempotency key was taken over"),
        "{refused}"
    );

    // The refusals changed nothing: the third holder still holds the key.
    assert_eq!(answer(&*t.store, "", &k, PAY).await, Begin::InProgress);
    ok(third.complete(&receipt(3)).await, "complete");
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(3))
    );
}

async fn renewing_keeps_the_key<S: IdempotencyStore<Receipt> + 'static>(t: Case<S>) {
    let k = key("k1");
    let long = execute(&*t.store, "", &k, PAY).await;
    t.clock.advance(Duration::from_secs(50));
    ok(long.renew().await, "renew");
    t.clock.advance(Duration::from_secs(50)); // 100 s after the claim, 50 s after the renewal
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::InProgress,
        "50 s after a renewal"
    );
    t.clock.advance(Duration::from_secs(10));
    let successor = execute(&*t.store, "", &k, PAY).await;
    assert_eq!(successor.claim(), 2);
    drop(long);
}

async fn a_holder_past_its_lease_completes_when_nobody_took_over<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let k = key("k1");
    let slow = execute(&*t.store, "", &k, PAY).await;
    t.clock.advance(DEFAULT_LEASE * 3);
    ok(
        slow.complete(&receipt(1)).await,
        "complete past the lease, nobody took over",
    );
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(1))
    );
}

/// `n` requests with one key, at once. Exactly one executes, and holds its claim until every
/// other has answered `InProgress`; then every one replays.
async fn race<S: IdempotencyStore<Receipt> + 'static>(
    store: &Arc<S>,
    k: IdempotencyKey,
    n: usize,
    expected_claim: u64,
) {
    let asked = Arc::new(Barrier::new(n));
    let start = Arc::new(Barrier::new(n));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let store = Arc::clone(store);
        let (k, asked, start) = (k.clone(), Arc::clone(&asked), Arc::clone(&start));
        tasks.spawn(async move {
            start.wait().await;
            match store.begin(&k, Fingerprint::of(PAY)).await {
                Ok(Begin::Execute(guard)) => {
                    assert_eq!(guard.claim(), expected_claim);
                    asked.wait().await;
                    ok(guard.complete(&receipt(7)).await, "complete");
                    true
                }
                Ok(Begin::InProgress) => {
                    asked.wait().await;
                    false
                }
                Ok(other) => panic!("expected Execute or InProgress, got {other:?}"),
                Err(e) => panic!("expected Execute or InProgress, got the error {e}"),
            }
        });
    }
    let executed = tasks.join_all().await.into_iter().filter(|&e| e).count();
    assert_eq!(executed, 1, "exactly one of {n} requests executes");
    assert_eq!(
        answer(&**store, "", &k, PAY).await,
        Begin::Replay(receipt(7))
    );
}

async fn concurrent_requests_with_one_new_key_execute_once<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    for round in 0..5 {
        race(&t.store, key(&format!("k{round}")), 16, 1).await;
    }
}

async fn concurrent_takeovers_of_a_dead_holders_key_execute_once<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let k = key("k1");
    std::mem::forget(execute(&*t.store, "", &k, PAY).await);
    t.clock.advance(DEFAULT_LEASE);
    race(&t.store, k, 16, 2).await;
}

/// 64 requests at once take over each of 40 keys whose response expired.
/// Exactly one executes and every other is `InProgress`: none replays the expired response and
/// none calls the running payload a mismatch. Half the keys come back with the old payload, half
/// with a new one (the old answer would be `Mismatch`). PostgreSQL's claim statement read the
/// row from its own snapshot, older than the concurrent claim that refused it, and answered
/// from the expired row for 1 to 8 keys of 40.
async fn concurrent_takeovers_of_expired_keys_execute_once_and_the_rest_are_in_progress<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    const KEYS: usize = 40;
    const REQUESTS: usize = 64;
    let keys: Vec<_> = (0..KEYS).map(|i| key(&format!("expired {i}"))).collect();
    for k in &keys {
        let first = execute(&*t.store, "", k, PAY).await;
        ok(first.complete(&receipt(1)).await, "complete");
    }
    t.clock.advance(DEFAULT_TTL);
    for (i, k) in keys.iter().enumerate() {
        let payload = if i % 2 == 0 { PAY } else { OTHER };
        let start = Arc::new(Barrier::new(REQUESTS));
        let asked = Arc::new(Barrier::new(REQUESTS));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..REQUESTS {
            let (store, k) = (Arc::clone(&t.store), k.clone());
            let (start, asked) = (Arc::clone(&start), Arc::clone(&asked));
            tasks.spawn(async move {
                start.wait().await;
                let answer = match store.begin(&k, Fingerprint::of(payload)).await {
                    Ok(Begin::Execute(guard)) => {
                        // Hold the claim until every other request has its answer.
                        asked.wait().await;
                        ok(guard.complete(&receipt(2)).await, "complete");
                        return "Execute".to_owned();
                    }
                    Ok(other) => format!("{other:?}"),
                    Err(e) => format!("Err({e})"),
                };
                asked.wait().await;
                answer
            });
        }
        let answers = tasks.join_all().await;
        let executed = answers.iter().filter(|a| *a == "Execute").count();
        let in_progress = answers.iter().filter(|a| *a == "InProgress").count();
        let wrong: Vec<_> = answers
            .iter()
            .filter(|a| *a != "Execute" && *a != "InProgress")
            .collect();
        assert_eq!(
            (executed, in_progress),
            (1, REQUESTS - 1),
            "key {i}: one Execute and {} InProgress expected; the others: {wrong:?}",
            REQUESTS - 1
        );
        assert_eq!(
            answer(&*t.store, "", k, payload).await,
            Begin::Replay(receipt(2))
        );
    }
}

/// One key rule on every store (1 to 255 characters, no control
/// character), refused with a 400 that states it, before any database work. A 10 KB key was
/// executed by SQLite and memory and failed on PostgreSQL with a 500 (54000), and so did a NUL
/// byte (22021).
async fn keys_follow_one_rule_checked_before_any_database_work<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let too_long = "k".repeat(256);
    let ten_kb = "k".repeat(10 * 1024);
    for bad in [
        "",
        "a\0b",
        "tab\there",
        "line\nbreak",
        "\u{7f}",
        "\u{9b}",
        &too_long,
        &ten_kb,
    ] {
        match t.store.begin(&key(bad), Fingerprint::of(PAY)).await {
            Err(refused @ StoreError::InvalidKey) => {
                assert_eq!(refused.status(), 400);
                assert!(!refused.is_transient());
                assert_eq!(
                    refused.to_string(),
                    "the idempotency key is not valid: a key is 1 to 255 characters of printable \
                     text, without control characters (U+0000 to U+001F, U+007F to U+009F)"
                );
            }
            Ok(other) => panic!("{bad:?}: expected InvalidKey, got {other:?}"),
            Err(e) => panic!("{bad:?}: expected InvalidKey, got {e}"),
        }
    }
    // At the limit, in any script, four bytes a character included.
    for good in [
        "k".repeat(255),
        "é".repeat(255),
        "🔑".repeat(255),
        "Zahlung 4711 für Müller".to_owned(),
    ] {
        let k = key(&good);
        let guard = execute(&*t.store, "", &k, PAY).await;
        ok(guard.complete(&receipt(1)).await, "complete");
        assert_eq!(
            answer(&*t.store, "", &k, PAY).await,
            Begin::Replay(receipt(1)),
            "{good}"
        );
    }
}

/// A `begin` cancelled mid-flight (its future dropped) left a claim that
/// nobody held, and the key answered `InProgress` for a whole lease. `begin` is cancelled here
/// at 60 points from before its first poll to after its statements, 25 µs apart; the clock
/// never moves, so a claim left behind would block the key for good. After every cancellation
/// the key is claimable again at once (within `until_free`'s few milliseconds).
async fn a_cancelled_begin_gives_its_claim_back_at_once<S: IdempotencyStore<Receipt> + 'static>(
    t: Case<S>,
) {
    let mut cancelled = 0;
    for point in 0..60_u32 {
        let k = key(&format!("cancelled {point}"));
        let begin = t.store.begin(&k, Fingerprint::of(PAY));
        if point == 0 {
            drop(begin); // never polled
            cancelled += 1;
        } else {
            let after = Duration::from_micros(25 * u64::from(point - 1));
            let started = Instant::now();
            // Yield to the runtime until the time has come, so that the cancellation falls
            // between the statements' round trips, not on a timer's millisecond.
            let deadline = async {
                while started.elapsed() < after {
                    tokio::task::yield_now().await;
                }
            };
            tokio::select! {
                biased;
                answered = begin => match answered {
                    Ok(Begin::Execute(guard)) => ok(guard.complete(&receipt(0)).await, "complete"),
                    other => panic!("a new key executes, got {other:?}"),
                },
                () = deadline => cancelled += 1,
            }
        }
        match answer_or_guard(&*t.store, &k).await {
            Some(guard) => ok(guard.complete(&receipt(1)).await, "complete"),
            None => assert_eq!(
                answer(&*t.store, "", &k, PAY).await,
                Begin::Replay(receipt(0))
            ),
        }
    }
    // A store whose `begin` is ready at its first poll (one in memory) is cancelled only before
    // it; a store that waits for a database, at many of the points.
    assert!(cancelled >= 1, "begin was cancelled {cancelled} times");
}

/// After a cancelled `begin`: the key is claimable within a few milliseconds (a guard), or it
/// was completed by the `begin` that was not cancelled (`None`).
async fn answer_or_guard<'s, S: IdempotencyStore<Receipt>>(
    store: &'s S,
    k: &IdempotencyKey,
) -> Option<Guard<'s, Receipt, S::Transaction>> {
    match store.begin(k, Fingerprint::of(PAY)).await {
        Ok(Begin::Replay(_)) => None,
        Ok(Begin::Execute(guard)) => Some(guard),
        Ok(Begin::InProgress) => Some(until_free(store, k, PAY).await),
        Ok(other) => panic!("expected the key free or completed, got {other:?}"),
        Err(e) => panic!("expected the key free or completed, got the error {e}"),
    }
}

async fn purge_removes_what_expired_and_nothing_else<S: IdempotencyStore<Receipt> + 'static>(
    t: Case<S>,
) {
    for i in 0..3 {
        let guard = execute(&*t.store, "", &key(&format!("old {i}")), PAY).await;
        ok(guard.complete(&receipt(i)).await, "complete");
    }
    std::mem::forget(execute(&*t.store, "", &key("dead"), PAY).await);
    let alive = execute(&*t.store, "", &key("alive"), PAY).await;
    assert_eq!(ok(t.store.purge_expired().await, "purge"), 0);

    t.clock.advance(DEFAULT_TTL);
    ok(alive.renew().await, "renew");
    assert_eq!(
        ok(t.store.purge_expired().await, "purge"),
        3,
        "the three expired responses"
    );
    let new = execute(&*t.store, "", &key("new"), PAY).await;
    ok(new.complete(&receipt(9)).await, "complete");

    t.clock.advance(DEFAULT_LEASE);
    ok(alive.renew().await, "renew");
    assert_eq!(
        ok(t.store.purge_expired().await, "purge"),
        1,
        "the dead holder's key, a lease and a TTL on"
    );
    assert_eq!(ok(t.store.purge_expired().await, "purge"), 0);
    assert_eq!(
        answer(&*t.store, "", &key("alive"), PAY).await,
        Begin::InProgress
    );
    assert_eq!(
        answer(&*t.store, "", &key("new"), PAY).await,
        Begin::Replay(receipt(9))
    );
    assert_eq!(
        execute(&*t.store, "", &key("dead"), PAY).await.claim(),
        1,
        "deleted, so new"
    );
}

async fn the_store_works_behind_dyn_and_its_futures_are_send<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    fn send<T: Send>(value: T) -> T {
        value
    }
    let store: Arc<dyn IdempotencyStore<Receipt, Transaction = S::Transaction>> = t.store.clone();
    let k = key("k1");
    let begin = send(store.begin(&k, Fingerprint::of(PAY)));
    let Ok(Begin::Execute(mut guard)) = begin.await else {
        panic!("a new key executes")
    };
    ok(send(guard.transaction()).await.map(drop), "transaction");
    ok(send(guard.complete(&receipt(1))).await, "complete");
    // In a spawned task, as an axum handler runs.
    let handler = tokio::spawn(async move {
        match store.begin(&key("k1"), Fingerprint::of(PAY)).await {
            Ok(Begin::Replay(receipt)) => receipt,
            _ => panic!("a repeat replays"),
        }
    });
    match handler.await {
        Ok(replayed) => assert_eq!(replayed, receipt(1)),
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// The one-commit mode (`begin_with(Mode::OneCommit, ..)`) hands out the same guard with its
/// claim in the guard's transaction: a new key executes with claim 1, a dropped guard frees the
/// key at once (no lease to wait for), renewing has nothing to do, a completed key replays in
/// both modes and another payload is a mismatch; a key running in the lease mode is in progress.
async fn the_one_commit_mode_executes_once_and_a_dropped_claim_frees_the_key<
    S: IdempotencyStore<Receipt> + 'static,
>(
    t: Case<S>,
) {
    let once = async |k: &IdempotencyKey, payload: &[u8]| {
        t.store
            .begin_with(Mode::OneCommit, "", k, Fingerprint::of(payload))
            .await
    };
    let k = key("transfer-1");
    let Ok(Begin::Execute(guard)) = once(&k, PAY).await else {
        panic!("a new key executes in the one-commit mode");
    };
    assert_eq!((guard.mode(), guard.claim()), (Mode::OneCommit, 1));
    ok(guard.renew().await, "renew in the one-commit mode");
    drop(guard); // a handler that failed, returned early or was cancelled
    let mut guard = None;
    // The drop is immediate or, on a SQL store, a rollback queued on the claim's connection.
    for _ in 0..1000 {
        match once(&k, PAY).await {
            Ok(Begin::Execute(again)) => {
                guard = Some(again);
                break;
            }
            Ok(Begin::InProgress) => tokio::time::sleep(MS).await,
            other => panic!("a dropped one-commit claim frees the key, not {other:?}"),
        }
    }
    let guard = guard.expect("the key is free again within a second");
    assert_eq!(
        guard.claim(),
        1,
        "the dropped claim left nothing to take over"
    );
    ok(guard.complete(&receipt(1)).await, "complete");
    assert!(matches!(once(&k, PAY).await, Ok(Begin::Replay(r)) if r == receipt(1)));
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(1))
    );
    assert!(matches!(once(&k, OTHER).await, Ok(Begin::Mismatch)));

    let leased = key("transfer-2");
    let holder = execute(&*t.store, "", &leased, PAY).await;
    assert!(
        matches!(once(&leased, PAY).await, Ok(Begin::InProgress)),
        "a key running in the lease mode is in progress"
    );
    ok(holder.release().await, "release");
}

//! The one-commit mode (`IdempotencyStore::begin_with(Mode::OneCommit, ..)`) on both real databases: a
//! SQLite file and a fresh schema of a real PostgreSQL server (from `.ci/postgres.sh`; without
//! one, the PostgreSQL cases print how to run them and pass, unless `CI` is set).
//!
//! The claim is the first statement of the handler's transaction, so the cases check what that
//! promises: the claim is invisible until the one commit; a concurrent duplicate waits for the
//! claimer and replays what it committed (or executes, if it rolled back); a rollback, a dropped
//! guard and a process killed with SIGKILL mid-transaction leave the key free at once, with no
//! lease to wait for; another payload is a 422; and the lease mode's keys are respected.

// The cases are generic functions that the `#[tokio::test]`s call: an unwrap there fails the
// test as it would in the test itself.
#![allow(clippy::unwrap_used)]

use crate::common::databases::{self, TempFile};
use retry_durable::store::{
    Begin, DEFAULT_LEASE, Fingerprint, Guard, IdempotencyStore, Mode, PostgresStore, SqliteStore,
    StoreError,
};
use retry_runtime::IdempotencyKey;
use serde::{Deserialize, Serialize};
use sqlx::{Postgres, Sqlite};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tokio::sync::Barrier;

/// How to run these tests with a server, for the line a test prints without one.
const RUN: &str = ".ci/postgres.sh run cargo test -p retry-tests --test it transactional_stores::";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Receipt {
    number: u32,
}

const PAY: &[u8] = br#"{"from":1,"to":2,"cents":125000}"#;
const OTHER: &[u8] = br#"{"from":1,"to":2,"cents":990000}"#;

/// The handler's own write, in the transaction that holds the claim.
trait Ledger: Send {
    fn pay<'a>(
        &'a mut self,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'a>>;
}

impl Ledger for sqlx::Transaction<'static, Sqlite> {
    fn pay<'a>(
        &'a mut self,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'a>> {
        Box::pin(async move {
            sqlx::query("INSERT INTO ledger (key, cents) VALUES (?1, 125000)")
                .bind(key)
                .execute(&mut **self)
                .await
                .map(drop)
        })
    }
}

impl Ledger for sqlx::Transaction<'static, Postgres> {
    fn pay<'a>(
        &'a mut self,
        key: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'a>> {
        Box::pin(async move {
            sqlx::query("INSERT INTO ledger (key, cents) VALUES ($1, 125000)")
                .bind(key)
                .execute(&mut **self)
                .await
                .map(drop)
        })
    }
}

/// A time the test moves by hand, for the lease-mode cases.
#[derive(Clone, Default)]
struct Clock(Arc<Mutex<Duration>>);

impl Clock {
    fn now(&self) -> SystemTime {
        SystemTime::now() + *self.0.lock().unwrap()
    }

    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

/// A store of both modes on a fresh database with a `ledger` table.
trait TestStore: IdempotencyStore<Receipt> + Sized + 'static {
    /// The store, and where its database is for a child process; `None` without a server.
    fn fresh(test: &str, clock: &Clock) -> impl Future<Output = Option<(Self, String)>>;
    /// How many ledger rows, and how many key rows, another connection sees committed.
    fn committed(&self) -> impl Future<Output = (i64, i64)>;
}

impl TestStore for SqliteStore<Receipt> {
    async fn fresh(test: &str, clock: &Clock) -> Option<(Self, String)> {
        // The file outlives the store: leaked, it is deleted with the temp dir.
        let file = Box::leak(Box::new(TempFile::new(test)));
        let clock = clock.clone();
        let store = SqliteStore::open(file.path())
            .await
            .unwrap()
            .with_clock(move || clock.now());
        store.migrate().await.unwrap();
        sqlx::raw_sql("CREATE TABLE ledger (key TEXT NOT NULL, cents INTEGER NOT NULL)")
            .execute(store.pool())
            .await
            .unwrap();
        Some((store, format!("sqlite|{}", file.path().display())))
    }

    async fn committed(&self) -> (i64, i64) {
        sqlx::query_as(
            "SELECT (SELECT count(*) FROM ledger), (SELECT count(*) FROM retry_idempotency_keys)",
        )
        .fetch_one(self.pool())
        .await
        .unwrap()
    }
}

impl TestStore for PostgresStore<Receipt> {
    async fn fresh(test: &str, clock: &Clock) -> Option<(Self, String)> {
        let url = databases::postgres_url(test, RUN)?;
        let schema = databases::new_schema(&url, test).await;
        let clock = clock.clone();
        let store = PostgresStore::new(databases::pool(databases::on_schema(&url, &schema)))
            .with_clock(move || clock.now());
        store.migrate().await.unwrap();
        sqlx::raw_sql("CREATE TABLE ledger (key TEXT NOT NULL, cents BIGINT NOT NULL)")
            .execute(store.pool())
            .await
            .unwrap();
        Some((store, format!("postgres|{url}#{schema}")))
    }

    async fn committed(&self) -> (i64, i64) {
        sqlx::query_as(
            "SELECT (SELECT count(*) FROM ledger), (SELECT count(*) FROM retry_idempotency_keys)",
        )
        .fetch_one(self.pool())
        .await
        .unwrap()
    }
}

/// The handler's row for `key`, in the transaction that holds the guard's claim.
async fn pay_in<R, T: Ledger>(guard: &mut Guard<'_, R, T>, key: &str) {
    guard.transaction().await.unwrap().pay(key).await.unwrap();
}

/// `begin_with(Mode::OneCommit, ..)` that must claim.
async fn execute<'s, S: TestStore>(
    store: &'s S,
    key: &IdempotencyKey,
    payload: &[u8],
) -> Guard<'s, Receipt, <S as IdempotencyStore<Receipt>>::Transaction> {
    match store
        .begin_with(Mode::OneCommit, "", key, Fingerprint::of(payload))
        .await
    {
        Ok(Begin::Execute(guard)) => {
            assert_eq!(guard.mode(), Mode::OneCommit);
            guard
        }
        Ok(other) => panic!("expected Execute, got {other:?}"),
        Err(e) => panic!("expected Execute, got {e}"),
    }
}

/// `begin_with(Mode::OneCommit, ..)` that must not claim: its answer, with the guard's type erased.
async fn answer<S: TestStore>(
    store: &S,
    key: &IdempotencyKey,
    payload: &[u8],
) -> Begin<'static, Receipt, ()> {
    match store
        .begin_with(Mode::OneCommit, "", key, Fingerprint::of(payload))
        .await
    {
        Ok(Begin::Replay(response)) => Begin::Replay(response),
        Ok(Begin::InProgress) => Begin::InProgress,
        Ok(Begin::Mismatch) => Begin::Mismatch,
        Ok(other) => panic!("expected no execution, got {other:?}"),
        Err(e) => panic!("expected an answer, got {e}"),
    }
}

/// The whole request: claim, pay, complete; or the answer it got instead.
async fn pay_once<S: TestStore>(
    store: &S,
    key: &IdempotencyKey,
    payload: &[u8],
) -> Result<Receipt, Begin<'static, Receipt, ()>>
where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    match store
        .begin_with(Mode::OneCommit, "", key, Fingerprint::of(payload))
        .await
        .unwrap()
    {
        Begin::Execute(mut guard) => {
            pay_in(&mut guard, key.as_str()).await;
            guard.complete(&Receipt { number: 1 }).await.unwrap();
            Ok(Receipt { number: 1 })
        }
        Begin::Replay(receipt) => Err(Begin::Replay(receipt)),
        Begin::InProgress => Err(Begin::InProgress),
        Begin::Mismatch => Err(Begin::Mismatch),
        _ => unreachable!(),
    }
}

/// One module per case, with one test per database: `case::sqlite`, `case::postgres`.
macro_rules! on_databases {
    ($($test:ident),* $(,)?) => {
        $(
            mod $test {
                use super::*;

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() {
                    let clock = Clock::default();
                    let Some((store, at)) =
                        <SqliteStore<Receipt> as TestStore>::fresh(stringify!($test), &clock).await
                    else {
                        return;
                    };
                    super::$test(Arc::new(store), clock, at).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() {
                    let clock = Clock::default();
                    let Some((store, at)) =
                        <PostgresStore<Receipt> as TestStore>::fresh(stringify!($test), &clock).await
                    else {
                        return;
                    };
                    super::$test(Arc::new(store), clock, at).await;
                }
            }
        )*
    };
}

on_databases!(
    a_new_key_executes_once_in_one_commit_and_replays,
    a_concurrent_duplicate_waits_for_the_claimer_then_replays,
    many_concurrent_duplicates_get_one_execution,
    a_rollback_or_a_dropped_guard_leaves_the_key_free_at_once,
    a_duplicate_waiting_on_a_claimer_that_rolls_back_executes,
    another_payload_is_a_mismatch,
    a_process_killed_mid_transaction_leaves_the_key_free_at_once,
    the_lease_mode_keys_are_respected_and_taken_over_after_their_lease,
    a_key_that_breaks_the_key_rule_is_refused_before_any_database_work,
);

async fn a_new_key_executes_once_in_one_commit_and_replays<S: TestStore>(
    store: Arc<S>,
    _: Clock,
    _: String,
) where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    let k = IdempotencyKey::from("transfer-1");
    let mut guard = execute(&*store, &k, PAY).await;
    assert_eq!(guard.claim(), 1);
    pay_in(&mut guard, "transfer-1").await;
    // Neither the claim nor the row is committed before `complete`: one commit for both.
    assert_eq!(store.committed().await, (0, 0));
    guard.complete(&Receipt { number: 1 }).await.unwrap();
    assert_eq!(store.committed().await, (1, 1));
    for _ in 0..2 {
        assert_eq!(
            answer(&*store, &k, PAY).await,
            Begin::Replay(Receipt { number: 1 })
        );
    }
    // The lease mode replays it too: both modes share the table.
    assert_eq!(
        IdempotencyStore::begin(&*store, &k, Fingerprint::of(PAY))
            .await
            .unwrap(),
        Begin::Replay(Receipt { number: 1 })
    );
    assert_eq!(store.committed().await, (1, 1));
}

async fn a_concurrent_duplicate_waits_for_the_claimer_then_replays<S: TestStore>(
    store: Arc<S>,
    _: Clock,
    _: String,
) where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    let k = IdempotencyKey::from("transfer-2");
    let mut guard = execute(&*store, &k, PAY).await;
    pay_in(&mut guard, "transfer-2").await;
    let duplicate = tokio::spawn({
        let (store, k) = (Arc::clone(&store), k.clone());
        async move { answer(&*store, &k, PAY).await }
    });
    // It waits for the claimer's transaction instead of answering 409.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!duplicate.is_finished(), "the duplicate did not wait");
    guard.complete(&Receipt { number: 1 }).await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), duplicate)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answered, Begin::Replay(Receipt { number: 1 }));
    assert_eq!(store.committed().await, (1, 1));
}

async fn many_concurrent_duplicates_get_one_execution<S: TestStore>(
    store: Arc<S>,
    _: Clock,
    _: String,
) where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    const CALLERS: usize = 16;
    for round in 0..5 {
        let k = IdempotencyKey::from(format!("transfer-many-{round}"));
        let barrier = Arc::new(Barrier::new(CALLERS));
        let callers: Vec<_> = (0..CALLERS)
            .map(|_| {
                let (store, k, barrier) = (Arc::clone(&store), k.clone(), Arc::clone(&barrier));
                tokio::spawn(async move {
                    barrier.wait().await;
                    pay_once(&*store, &k, PAY).await
                })
            })
            .collect();
        let mut executed = 0;
        for caller in callers {
            match caller.await.unwrap() {
                Ok(_) => executed += 1,
                Err(Begin::Replay(receipt)) => assert_eq!(receipt, Receipt { number: 1 }),
                Err(other) => panic!("a duplicate got {other:?}, not a replay"),
            }
        }
        assert_eq!(executed, 1, "round {round}");
    }
    assert_eq!(store.committed().await, (5, 5), "one payment per key");
}

async fn a_rollback_or_a_dropped_guard_leaves_the_key_free_at_once<S: TestStore>(
    store: Arc<S>,
    _: Clock,
    _: String,
) where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    let k = IdempotencyKey::from("transfer-3");
    let mut guard = execute(&*store, &k, PAY).await;
    pay_in(&mut guard, "transfer-3").await;
    guard.release().await.unwrap();
    assert_eq!(store.committed().await, (0, 0));

    // No lease to wait for: the next request executes, as the first claim.
    let mut guard = execute(&*store, &k, PAY).await;
    assert_eq!(guard.claim(), 1);
    pay_in(&mut guard, "transfer-3").await;
    drop(guard); // a handler that returned early, panicked or was cancelled
    let mut guard = tokio::time::timeout(Duration::from_secs(10), execute(&*store, &k, PAY))
        .await
        .unwrap();
    assert_eq!(guard.claim(), 1);
    pay_in(&mut guard, "transfer-3").await;
    guard.complete(&Receipt { number: 3 }).await.unwrap();
    assert_eq!(store.committed().await, (1, 1));
}

async fn a_duplicate_waiting_on_a_claimer_that_rolls_back_executes<S: TestStore>(
    store: Arc<S>,
    _: Clock,
    _: String,
) where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    let k = IdempotencyKey::from("transfer-4");
    let mut guard = execute(&*store, &k, PAY).await;
    pay_in(&mut guard, "transfer-4").await;
    let duplicate = tokio::spawn({
        let (store, k) = (Arc::clone(&store), k.clone());
        async move { pay_once(&*store, &k, PAY).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!duplicate.is_finished(), "the duplicate did not wait");
    guard.release().await.unwrap();
    let paid = tokio::time::timeout(Duration::from_secs(10), duplicate)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paid, Ok(Receipt { number: 1 }), "the waiter executed");
    assert_eq!(store.committed().await, (1, 1));
}

async fn another_payload_is_a_mismatch<S: TestStore>(store: Arc<S>, _: Clock, _: String)
where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    let k = IdempotencyKey::from("transfer-5");
    // Waiting on the claimer, then answered from what it committed.
    let mut guard = execute(&*store, &k, PAY).await;
    pay_in(&mut guard, "transfer-5").await;
    let other = tokio::spawn({
        let (store, k) = (Arc::clone(&store), k.clone());
        async move { answer(&*store, &k, OTHER).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.complete(&Receipt { number: 1 }).await.unwrap();
    let answered = other.await.unwrap();
    assert_eq!(answered, Begin::Mismatch);
    assert_eq!(answered.rejection_status(), Some(422));
    // And afterwards, from one read.
    assert_eq!(answer(&*store, &k, OTHER).await, Begin::Mismatch);
    assert_eq!(store.committed().await, (1, 1));
}

/// The key rule of the lease mode (`validate_key`) holds here too: refused with a 400, and
/// nothing is written.
async fn a_key_that_breaks_the_key_rule_is_refused_before_any_database_work<S: TestStore>(
    store: Arc<S>,
    _: Clock,
    _: String,
) where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    for bad in ["", "a\0b", &"k".repeat(256)] {
        let k = IdempotencyKey::from(bad);
        match store
            .begin_with(Mode::OneCommit, "", &k, Fingerprint::of(PAY))
            .await
        {
            Err(refused @ StoreError::InvalidKey) => assert_eq!(refused.status(), 400),
            Ok(_) => panic!("{bad:?}: expected InvalidKey, got an answer"),
            Err(e) => panic!("{bad:?}: expected InvalidKey, got {e}"),
        }
    }
    assert_eq!(store.committed().await, (0, 0));
}

async fn the_lease_mode_keys_are_respected_and_taken_over_after_their_lease<S: TestStore>(
    store: Arc<S>,
    clock: Clock,
    _: String,
) where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    let k = IdempotencyKey::from("transfer-6");
    let Begin::Execute(leased) = IdempotencyStore::begin(&*store, &k, Fingerprint::of(PAY))
        .await
        .unwrap()
    else {
        panic!("a new key executes")
    };
    assert_eq!(answer(&*store, &k, PAY).await, Begin::InProgress);
    assert_eq!(answer(&*store, &k, OTHER).await, Begin::Mismatch);
    // The lease-mode holder is paused past its lease: the one-commit mode takes the key over.
    clock.advance(DEFAULT_LEASE);
    let mut guard = execute(&*store, &k, PAY).await;
    assert_eq!(guard.claim(), 2);
    pay_in(&mut guard, "transfer-6").await;
    guard.complete(&Receipt { number: 2 }).await.unwrap();
    // The stale holder is fenced off.
    let refused = leased.complete(&Receipt { number: 1 }).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Superseded { claim: 1 }),
        "{refused}"
    );
    assert_eq!(
        answer(&*store, &k, PAY).await,
        Begin::Replay(Receipt { number: 2 })
    );
    assert_eq!(store.committed().await, (1, 1));
}

// A real crash: a child process (this test binary, running `tx_crash_child`) claims the key in
// its transaction, writes its payment, says it is ready, and is killed with SIGKILL.

const CRASH_ENV: &str = "RETRY_TEST_TX_CRASH_CHILD";
const READY: &str = "tx crash child: ready to be killed";

#[tokio::test]
#[ignore = "the child process of the crash tests; they run it"]
async fn tx_crash_child() {
    let Ok(at) = std::env::var(CRASH_ENV) else {
        return;
    };
    match at.split_once('|').unwrap() {
        ("sqlite", path) => {
            let store = SqliteStore::<Receipt>::open(path).await.unwrap();
            claim_and_hang(&store).await
        }
        (_, location) => {
            let (url, schema) = location.split_once('#').unwrap();
            let pool = databases::pool(databases::on_schema(url, schema));
            claim_and_hang(&PostgresStore::<Receipt>::new(pool)).await
        }
    }
}

async fn claim_and_hang<S: TestStore>(store: &S)
where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    let mut guard = execute(store, &IdempotencyKey::from("transfer-crash"), PAY).await;
    pay_in(&mut guard, "transfer-crash").await;
    // The harness may have written "test tx_crash_child ... " on the same line before it.
    println!("{READY}");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

async fn a_process_killed_mid_transaction_leaves_the_key_free_at_once<S: TestStore>(
    store: Arc<S>,
    _: Clock,
    at: String,
) where
    <S as IdempotencyStore<Receipt>>::Transaction: Ledger,
{
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let k = IdempotencyKey::from("transfer-crash");
    let (_, module) = module_path!().split_once("::").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            &format!("{module}::tx_crash_child"),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_ENV, &at)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.ends_with(READY));
    // While the child holds the claim, a duplicate waits for it.
    let duplicate = tokio::spawn({
        let (store, k) = (Arc::clone(&store), k.clone());
        async move { pay_once(&*store, &k, PAY).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!duplicate.is_finished(), "the duplicate did not wait");
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(ready, "the child did not get ready: {status}");
    // The database discards the child's claim with its row: the waiter executes, well before
    // any lease would have ended.
    let paid = tokio::time::timeout(Duration::from_secs(10), duplicate)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(paid, Ok(Receipt { number: 1 }));
    assert_eq!(store.committed().await, (1, 1), "paid exactly once");
    assert_eq!(
        answer(&*store, &k, PAY).await,
        Begin::Replay(Receipt { number: 1 })
    );
}

/// At serializable (or repeatable read) isolation, the duplicate's blocked claim fails with a
/// serialization failure when the claimer commits; the store retries the claim whole, and the
/// duplicate replays instead of answering 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_serializable_a_concurrent_duplicate_waits_then_replays() {
    let test = "postgres_serializable_duplicate";
    let Some(url) = databases::postgres_url(test, RUN) else {
        return;
    };
    let schema = databases::new_schema(&url, test).await;
    let options = databases::on_schema(&url, &schema).options([
        ("search_path", schema.as_str()),
        ("default_transaction_isolation", "serializable"),
    ]);
    let store = Arc::new(PostgresStore::<Receipt>::new(databases::pool(options)));
    store.migrate().await.unwrap();
    sqlx::raw_sql("CREATE TABLE ledger (key TEXT NOT NULL, cents BIGINT NOT NULL)")
        .execute(store.pool())
        .await
        .unwrap();
    let level: String = sqlx::query_scalar("SHOW transaction_isolation")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(level, "serializable");
    let k = IdempotencyKey::from("transfer-serializable");
    let mut guard = execute(&*store, &k, PAY).await;
    pay_in(&mut guard, k.as_str()).await;
    let duplicate = tokio::spawn({
        let (store, k) = (Arc::clone(&store), k.clone());
        async move { pay_once(&*store, &k, PAY).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!duplicate.is_finished(), "the duplicate did not wait");
    guard.complete(&Receipt { number: 1 }).await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(10), duplicate)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(answered, Err(Begin::Replay(Receipt { number: 1 })));
    assert_eq!(store.committed().await, (1, 1));
}

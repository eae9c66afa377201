//! The stores' semantics, each case against every store: `MemoryStore`, `SqliteStore` on a
//! fresh file, and `PostgresStore` on a fresh schema of a real PostgreSQL server (from
//! `.ci/postgres.sh`; without one, the PostgreSQL cases print how to run them and pass, unless
//! `CI` is set).
//!
//! Time is a clock each test moves by hand (`with_clock`), never a sleep: a 60 s lease ends
//! when the test says so. Crashes are real: a child process holding a key is killed with
//! SIGKILL.

// The cases are generic functions that the `#[tokio::test]`s call: an unwrap there fails the
// test as it would in the test itself.
#![allow(clippy::unwrap_used)]

use crate::common::databases::{self, TempFile};
use retry_durable::store::{
    Begin, DEFAULT_LEASE, DEFAULT_TTL, Fingerprint, Guard, IdempotencyStore, MemoryStore,
    PostgresStore, SqliteStore, StoreError,
};
use retry_runtime::{IdempotencyKey, Transient};
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgConnectOptions;
use sqlx::{Postgres, Sqlite};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::Barrier;

/// How to run these tests with a server, for the line a test prints without one.
const RUN: &str = ".ci/postgres.sh run cargo test -p retry-tests --test it idempotency_stores::";

/// The stored response of the tests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Receipt {
    number: u32,
    text: String,
}

fn receipt(number: u32) -> Receipt {
    Receipt {
        number,
        text: format!("receipt P-{number}"),
    }
}

const PAY: &[u8] = br#"{"claim":4711,"cents":125000}"#;
const MS: Duration = Duration::from_millis(1);

fn key(text: &str) -> IdempotencyKey {
    IdempotencyKey::from(text)
}

/// The time every store of a test reads: moved only by [`TestClock::advance`].
#[derive(Clone)]
struct TestClock {
    system: SystemTime,
    instant: Instant,
    offset: Arc<Mutex<Duration>>,
}

impl TestClock {
    fn new() -> Self {
        TestClock {
            system: SystemTime::now(),
            instant: Instant::now(),
            offset: Arc::default(),
        }
    }

    fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap() += by;
    }

    fn system_time(&self) -> SystemTime {
        self.system + *self.offset.lock().unwrap()
    }

    fn instant(&self) -> Instant {
        self.instant + *self.offset.lock().unwrap()
    }
}

/// Writes the payout's row in the handler's transaction.
trait Ledger: Send {
    fn pay<'a>(
        &'a mut self,
        key: &'a str,
        cents: i64,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'a>>;
}

impl Ledger for sqlx::Transaction<'static, Sqlite> {
    fn pay<'a>(
        &'a mut self,
        key: &'a str,
        cents: i64,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'a>> {
        Box::pin(async move {
            sqlx::query("INSERT INTO ledger (key, cents) VALUES (?1, ?2)")
                .bind(key)
                .bind(cents)
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
        cents: i64,
    ) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + 'a>> {
        Box::pin(async move {
            sqlx::query("INSERT INTO ledger (key, cents) VALUES ($1, $2)")
                .bind(key)
                .bind(cents)
                .execute(&mut **self)
                .await
                .map(drop)
        })
    }
}

/// Where a test's keys live, so that a second store can open the same: a replica, or the
/// service after a restart.
enum Database {
    Memory,
    Sqlite(TempFile),
    Postgres { url: String, schema: String },
}

/// A store the suite runs on.
trait TestStore: IdempotencyStore<Receipt> + Sized + 'static {
    /// A fresh store on a fresh database, migrated, with a `ledger` table; `None` when the
    /// database is not there (the test then passes after saying how to run it).
    fn open(test: &str, clock: &TestClock) -> impl Future<Output = Option<(Self, Database)>>;
    /// Another store on the same database.
    fn reopen(database: &Database, clock: &TestClock) -> impl Future<Output = Self>;
    /// The ledger's rows for `key`: their amounts.
    fn ledger(&self, key: &str) -> impl Future<Output = Vec<i64>>;
    /// The same database read with another response type.
    fn as_numbers(&self) -> Arc<dyn IdempotencyStore<u64, Transaction = Self::Transaction>>;
}

impl TestStore for MemoryStore<Receipt> {
    async fn open(_: &str, clock: &TestClock) -> Option<(Self, Database)> {
        let clock = clock.clone();
        let store = MemoryStore::new().with_clock(move || clock.instant());
        Some((store, Database::Memory))
    }

    async fn reopen(_: &Database, _: &TestClock) -> Self {
        unreachable!("a MemoryStore is not shared: the suite runs replica cases on the SQL stores")
    }

    async fn ledger(&self, _: &str) -> Vec<i64> {
        unreachable!("a MemoryStore has no transaction for a ledger")
    }

    fn as_numbers(&self) -> Arc<dyn IdempotencyStore<u64, Transaction = ()>> {
        unreachable!("a MemoryStore keeps responses as they are")
    }
}

impl TestStore for SqliteStore<Receipt> {
    async fn open(test: &str, clock: &TestClock) -> Option<(Self, Database)> {
        let file = TempFile::new(test);
        let database = Database::Sqlite(file);
        let store = Self::reopen(&database, clock).await;
        store.migrate().await.expect("migrate");
        sqlx::raw_sql("CREATE TABLE ledger (key TEXT NOT NULL, cents INTEGER NOT NULL)")
            .execute(store.pool())
            .await
            .expect("the ledger table");
        Some((store, database))
    }

    async fn reopen(database: &Database, clock: &TestClock) -> Self {
        let Database::Sqlite(file) = database else {
            unreachable!()
        };
        let clock = clock.clone();
        SqliteStore::open(file.path())
            .await
            .expect("the SQLite file opens")
            .with_clock(move || clock.system_time())
    }

    async fn ledger(&self, key: &str) -> Vec<i64> {
        sqlx::query_scalar("SELECT cents FROM ledger WHERE key = ?1 ORDER BY cents")
            .bind(key)
            .fetch_all(self.pool())
            .await
            .expect("the ledger reads")
    }

    fn as_numbers(&self) -> Arc<dyn IdempotencyStore<u64, Transaction = Self::Transaction>> {
        Arc::new(self.with_response::<u64>())
    }
}

impl TestStore for PostgresStore<Receipt> {
    async fn open(test: &str, clock: &TestClock) -> Option<(Self, Database)> {
        let url = databases::postgres_url(test, RUN)?;
        let schema = databases::new_schema(&url, test).await;
        let database = Database::Postgres { url, schema };
        let store = Self::reopen(&database, clock).await;
        store.migrate().await.expect("migrate");
        sqlx::raw_sql("CREATE TABLE ledger (key TEXT NOT NULL, cents BIGINT NOT NULL)")
            .execute(store.pool())
            .await
            .expect("the ledger table");
        Some((store, database))
    }

    async fn reopen(database: &Database, clock: &TestClock) -> Self {
        let Database::Postgres { url, schema } = database else {
            unreachable!()
        };
        let clock = clock.clone();
        PostgresStore::new(databases::pool(databases::on_schema(url, schema)))
            .with_clock(move || clock.system_time())
    }

    async fn ledger(&self, key: &str) -> Vec<i64> {
        sqlx::query_scalar("SELECT cents FROM ledger WHERE key = $1 ORDER BY cents")
            .bind(key)
            .fetch_all(self.pool())
            .await
            .expect("the ledger reads")
    }

    fn as_numbers(&self) -> Arc<dyn IdempotencyStore<u64, Transaction = Self::Transaction>> {
        Arc::new(self.with_response::<u64>())
    }
}

/// One test's store, its clock and its database.
struct Subject<S> {
    store: Arc<S>,
    clock: TestClock,
    database: Database,
}

impl<S: TestStore> Subject<S> {
    async fn new(test: &str) -> Option<Self> {
        let clock = TestClock::new();
        let (store, database) = S::open(test, &clock).await?;
        Some(Subject {
            store: Arc::new(store),
            clock,
            database,
        })
    }

    /// Another store on the same database: a second replica, or the service after a restart.
    async fn replica(&self) -> S {
        S::reopen(&self.database, &self.clock).await
    }

    async fn ledger(&self, key: &str) -> Vec<i64> {
        self.store.ledger(key).await
    }
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
        Ok(other) => panic!("expected Execute, got {other:?}"),
        Err(e) => panic!("expected Execute, got {e}"),
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
        Ok(other) => panic!("expected no execution, got {other:?}"),
        Err(e) => panic!("expected an answer, got {e}"),
    }
}

/// Asks until the key is free again (a dropped guard releases it in a background task).
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
            Err(e) => panic!("{e}"),
        }
    }
    panic!("the dropped guard's key was not released within 500 tries")
}

/// One module per case, with one test per store: `case::memory`, `case::sqlite`,
/// `case::postgres`.
macro_rules! on_stores {
    ($stores:tt; $($test:ident),* $(,)?) => {
        $( on_stores!(@case $test $stores); )*
    };
    (@case $test:ident [$($store:ident: $ty:ty),*]) => {
        mod $test {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $store() {
                    let name = concat!(stringify!($test), "::", stringify!($store));
                    if let Some(subject) = Subject::<$ty>::new(name).await {
                        super::$test(subject).await;
                    }
                }
            )*
        }
    };
}

on_stores!(
    [sqlite: SqliteStore<Receipt>, postgres: PostgresStore<Receipt>];
    own_writes_and_the_completion_commit_together,
    a_rollback_before_the_commit_leaves_neither,
    a_dropped_guard_rolls_its_writes_back,
    a_superseded_completion_rolls_the_handlers_writes_back,
    keys_survive_a_restart_and_replicas_share_them,
    concurrent_requests_on_two_replicas_execute_once,
    a_response_over_the_limit_is_refused_and_rolled_back,
    a_stored_response_that_no_longer_decodes_is_a_codec_error,
);

#[test]
fn keys_are_kept_a_day_and_leased_a_minute() {
    assert_eq!(DEFAULT_TTL, Duration::from_secs(24 * 60 * 60));
    assert_eq!(DEFAULT_LEASE, Duration::from_secs(60));
}

/// The store contract, from the conformance kit (`retry_durable::store::conformance`), on each
/// store: `conformance::CASE::memory`, `::sqlite`, `::postgres`.
mod conformance {
    use super::*;
    use retry_durable::store::BoxFuture;
    use retry_durable::store::conformance::{ManualClock, Receipt, StoreFactory};

    struct Memory;
    /// Keeps the case's file until the test ends.
    #[derive(Default)]
    struct Sqlite(Mutex<Vec<TempFile>>);
    struct Postgres;

    impl StoreFactory for Memory {
        type Store = MemoryStore<Receipt>;
        fn fresh<'a>(
            &'a self,
            _: &'a str,
            clock: ManualClock,
        ) -> BoxFuture<'a, Option<Self::Store>> {
            Box::pin(async move { Some(MemoryStore::new().with_clock(move || clock.instant())) })
        }
    }

    impl StoreFactory for Sqlite {
        type Store = SqliteStore<Receipt>;
        fn fresh<'a>(
            &'a self,
            case: &'a str,
            clock: ManualClock,
        ) -> BoxFuture<'a, Option<Self::Store>> {
            Box::pin(async move {
                let file = TempFile::new(case);
                let store = SqliteStore::open(file.path())
                    .await
                    .expect("the SQLite file opens")
                    .with_clock(move || clock.system_time());
                self.0.lock().unwrap().push(file);
                store.migrate().await.expect("migrate");
                Some(store)
            })
        }
    }

    impl StoreFactory for Postgres {
        type Store = PostgresStore<Receipt>;
        fn fresh<'a>(
            &'a self,
            case: &'a str,
            clock: ManualClock,
        ) -> BoxFuture<'a, Option<Self::Store>> {
            Box::pin(async move {
                let url = databases::postgres_url(case, RUN)?;
                let schema = databases::new_schema(&url, case).await;
                let store =
                    PostgresStore::new(databases::pool(databases::on_schema(&url, &schema)))
                        .with_clock(move || clock.system_time());
                store.migrate().await.expect("migrate");
                Some(store)
            })
        }
    }

    macro_rules! kit {
        ($($case:ident),* $(,)?) => {
            $(
                mod $case {
                    use super::*;
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn memory() {
                        retry_durable::store::conformance::check(&Memory, stringify!($case)).await;
                    }
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn sqlite() {
                        let factory = Sqlite::default();
                        retry_durable::store::conformance::check(&factory, stringify!($case)).await;
                    }
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    async fn postgres() {
                        retry_durable::store::conformance::check(&Postgres, stringify!($case)).await;
                    }
                }
            )*
            #[test]
            fn every_case_of_the_kit_runs_here() {
                let here: &[&str] = &[$(stringify!($case)),*];
                assert_eq!(here, retry_durable::store::conformance::CASES);
            }
        };
    }

    kit!(
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
}

/// `n` requests with one key, at once, over the stores given (several replicas, or one store
/// several times). Exactly one executes, and holds its claim until every other has answered
/// `InProgress`; then every one replays.
async fn race<S: IdempotencyStore<Receipt> + 'static>(
    stores: Vec<Arc<S>>,
    k: IdempotencyKey,
    n: usize,
    expected_claim: u64,
) {
    let asked = Arc::new(Barrier::new(n));
    let start = Arc::new(Barrier::new(n));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let store = Arc::clone(&stores[i % stores.len()]);
        let (k, asked, start) = (k.clone(), Arc::clone(&asked), Arc::clone(&start));
        tasks.spawn(async move {
            start.wait().await;
            match store.begin(&k, Fingerprint::of(PAY)).await {
                Ok(Begin::Execute(guard)) => {
                    assert_eq!(guard.claim(), expected_claim);
                    asked.wait().await;
                    guard.complete(&receipt(7)).await.unwrap();
                    true
                }
                Ok(Begin::InProgress) => {
                    asked.wait().await;
                    false
                }
                Ok(other) => panic!("expected Execute or InProgress, got {other:?}"),
                Err(e) => panic!("{e}"),
            }
        });
    }
    let executed = tasks.join_all().await.into_iter().filter(|&e| e).count();
    assert_eq!(executed, 1, "exactly one of {n} requests executes");
    for store in &stores {
        assert_eq!(
            answer(&**store, "", &k, PAY).await,
            Begin::Replay(receipt(7))
        );
    }
}

async fn concurrent_requests_on_two_replicas_execute_once<S: TestStore>(t: Subject<S>) {
    let stores = vec![Arc::clone(&t.store), Arc::new(t.replica().await)];
    for round in 0..5 {
        race(stores.clone(), key(&format!("k{round}")), 16, 1).await;
    }
}

async fn own_writes_and_the_completion_commit_together<S>(t: Subject<S>)
where
    S: TestStore,
    S::Transaction: Ledger,
{
    let k = key("k1");
    let mut guard = execute(&*t.store, "", &k, PAY).await;
    guard
        .transaction()
        .await
        .unwrap()
        .pay("k1", 125_000)
        .await
        .unwrap();
    // Until the commit, neither the payout nor the completion is visible to anyone else.
    assert_eq!(t.ledger("k1").await, Vec::<i64>::new());
    assert_eq!(answer(&*t.store, "", &k, PAY).await, Begin::InProgress);
    guard.complete(&receipt(1)).await.unwrap();
    assert_eq!(t.ledger("k1").await, [125_000]);
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(1))
    );
}

async fn a_rollback_before_the_commit_leaves_neither<S>(t: Subject<S>)
where
    S: TestStore,
    S::Transaction: Ledger,
{
    let k = key("k1");
    let mut guard = execute(&*t.store, "", &k, PAY).await;
    guard
        .transaction()
        .await
        .unwrap()
        .pay("k1", 125_000)
        .await
        .unwrap();
    guard.release().await.unwrap(); // the handler gives up before the commit
    assert_eq!(t.ledger("k1").await, Vec::<i64>::new());
    // The retry executes once.
    let mut retry = execute(&*t.store, "", &k, PAY).await;
    retry
        .transaction()
        .await
        .unwrap()
        .pay("k1", 125_000)
        .await
        .unwrap();
    retry.complete(&receipt(1)).await.unwrap();
    assert_eq!(t.ledger("k1").await, [125_000]);
}

async fn a_dropped_guard_rolls_its_writes_back<S>(t: Subject<S>)
where
    S: TestStore,
    S::Transaction: Ledger,
{
    let k = key("k1");
    let mut guard = execute(&*t.store, "", &k, PAY).await;
    guard
        .transaction()
        .await
        .unwrap()
        .pay("k1", 125_000)
        .await
        .unwrap();
    drop(guard); // the handler panicked or was cancelled
    let mut retry = until_free(&*t.store, &k, PAY).await;
    assert_eq!(t.ledger("k1").await, Vec::<i64>::new());
    retry
        .transaction()
        .await
        .unwrap()
        .pay("k1", 125_000)
        .await
        .unwrap();
    retry.complete(&receipt(1)).await.unwrap();
    assert_eq!(t.ledger("k1").await, [125_000]);
}

async fn a_superseded_completion_rolls_the_handlers_writes_back<S>(t: Subject<S>)
where
    S: TestStore,
    S::Transaction: Ledger,
{
    let k = key("k1");
    let mut stale = execute(&*t.store, "", &k, PAY).await;
    t.clock.advance(DEFAULT_LEASE);
    let mut successor = execute(&*t.store, "", &k, PAY).await;
    successor
        .transaction()
        .await
        .unwrap()
        .pay("k1", 2)
        .await
        .unwrap();
    successor.complete(&receipt(2)).await.unwrap();
    // The stale holder wakes up and pays: its completion is refused and its payout undone.
    stale
        .transaction()
        .await
        .unwrap()
        .pay("k1", 1)
        .await
        .unwrap();
    let refused = stale.complete(&receipt(1)).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Superseded { claim: 1 }),
        "{refused}"
    );
    assert_eq!(t.ledger("k1").await, [2], "only the successor's payout");
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(2))
    );
}

async fn keys_survive_a_restart_and_replicas_share_them<S: TestStore>(t: Subject<S>) {
    execute(&*t.store, "", &key("done"), PAY)
        .await
        .complete(&receipt(1))
        .await
        .unwrap();
    let running = execute(&*t.store, "", &key("running"), PAY).await;
    let replica = t.replica().await;
    assert_eq!(
        answer(&replica, "", &key("done"), PAY).await,
        Begin::Replay(receipt(1))
    );
    assert_eq!(
        answer(&replica, "", &key("running"), PAY).await,
        Begin::InProgress
    );
    running.complete(&receipt(2)).await.unwrap();
    assert_eq!(
        answer(&replica, "", &key("running"), PAY).await,
        Begin::Replay(receipt(2))
    );
    // The service restarts: a new pool, nothing in memory.
    let Subject {
        store,
        clock,
        database,
    } = t;
    drop(store);
    let restarted = S::reopen(&database, &clock).await;
    assert_eq!(
        answer(&restarted, "", &key("done"), PAY).await,
        Begin::Replay(receipt(1))
    );
}

async fn a_response_over_the_limit_is_refused_and_rolled_back<S>(t: Subject<S>)
where
    S: TestStore,
    S::Transaction: Ledger,
{
    let k = key("k1");
    let big = Receipt {
        number: 1,
        text: "x".repeat(70_000),
    };
    let mut guard = execute(&*t.store, "", &k, PAY).await;
    guard
        .transaction()
        .await
        .unwrap()
        .pay("k1", 125_000)
        .await
        .unwrap();
    let refused = guard.complete(&big).await.unwrap_err();
    let StoreError::TooLarge { len, limit } = refused else {
        panic!("expected TooLarge, got {refused}")
    };
    assert_eq!((len, limit), (70_022, 64 * 1024)); // the receipt's JSON
    assert_eq!(refused.status(), 500);
    assert!(!refused.is_transient());
    assert_eq!(t.ledger("k1").await, Vec::<i64>::new());
    // Released at once: the retry executes (and fails the same way, which is why it is a 500).
    drop(execute(&*t.store, "", &k, PAY).await);
}

async fn a_stored_response_that_no_longer_decodes_is_a_codec_error<S: TestStore>(t: Subject<S>) {
    let k = key("k1");
    execute(&*t.store, "", &k, PAY)
        .await
        .complete(&receipt(1))
        .await
        .unwrap();
    // A deployment changed the response type without staying compatible.
    let numbers = t.store.as_numbers();
    let Err(error) = numbers.begin(&k, Fingerprint::of(PAY)).await else {
        panic!("a receipt does not decode as a number")
    };
    assert!(matches!(error, StoreError::Codec(_)), "{error}");
    assert_eq!(error.status(), 500);
    assert!(
        error
            .to_string()
            .starts_with("the response could not be converted to or from its stored JSON"),
        "{error}"
    );
}

// Per database: migrations, a database that is down, and crashes of a real process.

#[tokio::test]
async fn sqlite_migrate_is_idempotent_and_safe_from_four_processes_at_once() {
    let file = TempFile::new("sqlite_migrate");
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(SqliteStore::<Receipt>::open(file.path()).await.unwrap());
    }
    let migrated = tokio::join!(
        stores[0].migrate(),
        stores[1].migrate(),
        stores[2].migrate(),
        stores[3].migrate()
    );
    assert!(
        matches!(migrated, (Ok(()), Ok(()), Ok(()), Ok(()))),
        "{migrated:?}"
    );
    stores[0].migrate().await.unwrap();
    let version: i64 = sqlx::query_scalar("SELECT version FROM retry_idempotency_schema")
        .fetch_one(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(version, 1);
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' \
         AND tbl_name = 'retry_idempotency_keys' ORDER BY name",
    )
    .fetch_all(stores[0].pool())
    .await
    .unwrap();
    assert_eq!(
        indexes,
        [
            "retry_idempotency_keys_expires_at",
            "sqlite_autoindex_retry_idempotency_keys_1"
        ]
    );
    execute(&stores[3], "", &key("k"), PAY)
        .await
        .complete(&receipt(1))
        .await
        .unwrap();
}

#[tokio::test]
async fn postgres_migrate_is_idempotent_and_safe_from_four_replicas_at_once() {
    let Some(url) = databases::postgres_url("postgres_migrate", RUN) else {
        return;
    };
    let options = databases::fresh_schema(&url, "postgres_migrate").await;
    let stores: Vec<PostgresStore<Receipt>> = (0..4)
        .map(|_| PostgresStore::new(databases::pool(options.clone())))
        .collect();
    let migrated = tokio::join!(
        stores[0].migrate(),
        stores[1].migrate(),
        stores[2].migrate(),
        stores[3].migrate()
    );
    assert!(
        matches!(migrated, (Ok(()), Ok(()), Ok(()), Ok(()))),
        "{migrated:?}"
    );
    stores[0].migrate().await.unwrap();
    let version: i32 = sqlx::query_scalar("SELECT version FROM retry_idempotency_schema")
        .fetch_one(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(version, 1);
    let indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::TEXT FROM pg_indexes WHERE tablename = 'retry_idempotency_keys' \
         AND schemaname = current_schema() ORDER BY indexname",
    )
    .fetch_all(stores[0].pool())
    .await
    .unwrap();
    assert_eq!(
        indexes,
        [
            "retry_idempotency_keys_expires_at",
            "retry_idempotency_keys_pkey"
        ]
    );
    execute(&stores[3], "", &key("k"), PAY)
        .await
        .complete(&receipt(1))
        .await
        .unwrap();
}

/// Issue 17, defect 3: a stale holder whose transaction runs at `SERIALIZABLE` read the row
/// before the takeover changed it, so its `UPDATE` failed with 40001 and `complete` answered a
/// transient database error (503), telling the client to retry what can never succeed. It is
/// `Superseded` (409), as at read committed, and its payout is rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holder_at_serializable_is_superseded() {
    let name = "a_stale_holder_at_serializable_is_superseded";
    let Some(t) = Subject::<PostgresStore<Receipt>>::new(name).await else {
        return;
    };
    let k = key("k1");
    let mut stale = execute(&*t.store, "", &k, PAY).await;
    let transaction = stale.transaction().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        .execute(&mut **transaction)
        .await
        .unwrap();
    transaction.pay("k1", 1).await.unwrap(); // the transaction's snapshot: the key is its own
    t.clock.advance(DEFAULT_LEASE);
    let mut successor = execute(&*t.store, "", &k, PAY).await;
    let refused = stale.complete(&receipt(1)).await.unwrap_err();
    assert!(
        matches!(refused, StoreError::Superseded { claim: 1 }),
        "{refused}"
    );
    assert_eq!(refused.status(), 409);
    successor
        .transaction()
        .await
        .unwrap()
        .pay("k1", 2)
        .await
        .unwrap();
    successor.complete(&receipt(2)).await.unwrap();
    assert_eq!(t.ledger("k1").await, [2], "only the successor's payout");
    assert_eq!(
        answer(&*t.store, "", &k, PAY).await,
        Begin::Replay(receipt(2))
    );
}

#[tokio::test]
async fn begin_before_migrate_says_what_to_do() {
    let file = TempFile::new("before_migrate");
    let store = SqliteStore::<Receipt>::open(file.path()).await.unwrap();
    let error = store
        .begin(&key("k"), Fingerprint::of(PAY))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Schema(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("call `store.migrate().await` once at startup"),
        "{error}"
    );

    let Some(url) = databases::postgres_url("before_migrate", RUN) else {
        return;
    };
    let options = databases::fresh_schema(&url, "before_migrate").await;
    let store = PostgresStore::<Receipt>::new(databases::pool(options));
    let error = store
        .begin(&key("k"), Fingerprint::of(PAY))
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::Schema(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("call `store.migrate().await` once at startup"),
        "{error}"
    );
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let file = TempFile::new("newer_schema");
    let store = SqliteStore::<Receipt>::open(file.path()).await.unwrap();
    store.migrate().await.unwrap();
    sqlx::query("UPDATE retry_idempotency_schema SET version = 99")
        .execute(store.pool())
        .await
        .unwrap();
    let error = store.migrate().await.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("the idempotency store's schema is version 99, newer than version 1"),
        "{error}"
    );
}

#[tokio::test]
async fn sqlite_locked_by_another_process_fails_begin_with_a_transient_error() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    use sqlx::{ConnectOptions, Connection};
    let file = TempFile::new("sqlite_locked");
    SqliteStore::<Receipt>::open(file.path())
        .await
        .unwrap()
        .migrate()
        .await
        .unwrap();
    let options = SqliteConnectOptions::new()
        .filename(file.path())
        .busy_timeout(Duration::from_millis(50));
    let pool = SqlitePoolOptions::new()
        .connect_with(options.clone())
        .await
        .unwrap();
    let store = SqliteStore::<Receipt>::new(pool);
    // Another process holds the database's write lock (a long migration, a backup).
    let mut other = options.connect().await.unwrap();
    sqlx::raw_sql("BEGIN EXCLUSIVE")
        .execute(&mut other)
        .await
        .unwrap();

    let error = store
        .begin(&key("k"), Fingerprint::of(PAY))
        .await
        .unwrap_err();
    let StoreError::Database { transient, .. } = &error else {
        panic!("expected a database error, got {error}")
    };
    assert!(transient, "SQLITE_BUSY is passing: {error}");
    assert_eq!(error.status(), 503);
    assert!(
        error
            .to_string()
            .starts_with("the idempotency store is unavailable"),
        "{error}"
    );

    sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    other.close().await.unwrap();
    // Nothing was recorded while it was locked: the request executes now, once.
    let guard = execute(&store, "", &key("k"), PAY).await;
    assert_eq!(guard.claim(), 1);
}

#[tokio::test]
async fn postgres_down_fails_begin_with_a_transient_error_and_nothing_is_lost() {
    let Some(cluster) = databases::PrivateCluster::start("postgres_down", RUN) else {
        return;
    };
    let options: PgConnectOptions = cluster.url().parse().unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(500))
        .connect_lazy_with(options);
    let store = PostgresStore::<Receipt>::new(pool);
    store.migrate().await.unwrap();
    execute(&store, "", &key("before"), PAY)
        .await
        .complete(&receipt(1))
        .await
        .unwrap();
    let running = execute(&store, "", &key("running"), PAY).await;

    cluster.stop();
    let error = store
        .begin(&key("during"), Fingerprint::of(PAY))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::Database {
                transient: true,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.status(), 503);
    let error = running.complete(&receipt(2)).await.unwrap_err();
    assert!(error.is_transient(), "{error}");

    cluster.start_again();
    assert_eq!(
        answer(&store, "", &key("before"), PAY).await,
        Begin::Replay(receipt(1))
    );
    let during = execute(&store, "", &key("during"), PAY).await;
    assert_eq!(
        during.claim(),
        1,
        "nothing was recorded while the database was down"
    );
    // The completion that failed did not commit; the guard released the key in the background.
    let retried = until_free(&store, &key("running"), PAY).await;
    assert_eq!(retried.claim(), 1);
}

#[tokio::test]
async fn a_store_on_a_closed_port_fails_begin_with_a_transient_error() {
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        databases::free_port()
    );
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_millis(200))
        .connect_lazy(&url)
        .unwrap();
    let store = PostgresStore::<Receipt>::new(pool);
    let error = store
        .begin(&key("k"), Fingerprint::of(PAY))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            StoreError::Database {
                transient: true,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(error.status(), 503);
}

// A real crash: a child process (this test binary, running `crash_child`) claims the key,
// writes its payout in the transaction, says it is ready, and is killed with SIGKILL.

const CRASH_ENV: &str = "RETRY_TEST_CRASH_CHILD";
const READY: &str = "crash child: ready to be killed";

/// What the child does before it is killed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    /// The payout is written in the transaction, not committed.
    BeforeCommit,
    /// The payout and the completion are committed; the response is not sent.
    AfterCommit,
}

#[tokio::test]
#[ignore = "the child process of the crash tests; they run it"]
async fn crash_child() {
    let Ok(spec) = std::env::var(CRASH_ENV) else {
        return;
    };
    let [database, location, step, now_ms] = spec.splitn(4, '|').collect::<Vec<_>>()[..] else {
        panic!("bad {CRASH_ENV}: {spec}")
    };
    let now = SystemTime::UNIX_EPOCH + Duration::from_millis(now_ms.parse().unwrap());
    let after_commit = step == "AfterCommit";
    match database {
        "sqlite" => {
            let store = SqliteStore::<Receipt>::open(location)
                .await
                .unwrap()
                .with_clock(move || now);
            crash_after(&store, after_commit).await
        }
        _ => {
            let (url, schema) = location.split_once('#').unwrap();
            let store =
                PostgresStore::<Receipt>::new(databases::pool(databases::on_schema(url, schema)))
                    .with_clock(move || now);
            crash_after(&store, after_commit).await
        }
    }
}

async fn crash_after<S>(store: &S, after_commit: bool)
where
    S: IdempotencyStore<Receipt>,
    S::Transaction: Ledger,
{
    let mut guard = execute(store, "", &key("crash"), PAY).await;
    guard
        .transaction()
        .await
        .unwrap()
        .pay("crash", 125_000)
        .await
        .unwrap();
    if after_commit {
        guard.complete(&receipt(1)).await.unwrap();
    } else {
        std::mem::forget(guard);
    }
    // The harness may have written "test crash_child ... " on the same line before it.
    println!("{READY}");
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Runs the child against `database` until it says it is ready, then kills it with SIGKILL.
fn crash_a_child(database: &str, location: &str, step: Step, clock: &TestClock) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let now_ms = clock
        .system_time()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    // The child's test name in this binary: this module's path without the crate's name.
    let (_, module) = module_path!().split_once("::").unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            &format!("{module}::crash_child"),
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            CRASH_ENV,
            format!("{database}|{location}|{step:?}|{now_ms}"),
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let ready = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .any(|line| line.ends_with(READY));
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(ready, "the child did not get ready: {status}");
}

async fn after_a_crash<S>(t: Subject<S>, database: &str, location: &str, step: Step)
where
    S: TestStore,
    S::Transaction: Ledger,
{
    crash_a_child(database, location, step, &t.clock);
    let k = key("crash");
    match step {
        Step::BeforeCommit => {
            // Neither the payout nor a completed key; the dead holder's lease still runs.
            assert_eq!(t.ledger("crash").await, Vec::<i64>::new());
            assert_eq!(answer(&*t.store, "", &k, PAY).await, Begin::InProgress);
            t.clock.advance(DEFAULT_LEASE);
            let mut retry = execute(&*t.store, "", &k, PAY).await;
            assert_eq!(retry.claim(), 2);
            retry
                .transaction()
                .await
                .unwrap()
                .pay("crash", 125_000)
                .await
                .unwrap();
            retry.complete(&receipt(2)).await.unwrap();
            assert_eq!(t.ledger("crash").await, [125_000], "paid exactly once");
        }
        Step::AfterCommit => {
            // Both: the retry gets the stored receipt, and nothing is paid again.
            assert_eq!(
                answer(&*t.store, "", &k, PAY).await,
                Begin::Replay(receipt(1))
            );
            assert_eq!(t.ledger("crash").await, [125_000]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_crash_before_the_commit_leaves_neither_and_after_it_both() {
    for step in [Step::BeforeCommit, Step::AfterCommit] {
        let t = Subject::<SqliteStore<Receipt>>::new("sqlite_crash")
            .await
            .unwrap();
        let Database::Sqlite(file) = &t.database else {
            unreachable!()
        };
        let path = file.path().display().to_string();
        after_a_crash(t, "sqlite", &path, step).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_crash_before_the_commit_leaves_neither_and_after_it_both() {
    for step in [Step::BeforeCommit, Step::AfterCommit] {
        let Some(t) = Subject::<PostgresStore<Receipt>>::new("postgres_crash").await else {
            return;
        };
        let Database::Postgres { url, schema } = &t.database else {
            unreachable!()
        };
        let location = format!("{url}#{schema}");
        after_a_crash(t, "postgres", &location, step).await;
    }
}

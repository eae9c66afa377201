//! `Transient for sqlx::Error` and `Transient for tokio_postgres::Error` against a real
//! PostgreSQL server: each row of the table with an error the server really sends, and
//! `#[retry]` through a serialization conflict, a unique violation and a server restart.
//!
//! The server comes from `.ci/postgres.sh` (a fresh schema per test); the restart tests run a
//! private cluster of their own, so that restarting it disturbs no other test. Without a server
//! each test prints how to run it and passes, unless `CI` is set.

// Helpers shared by the tests: an unwrap there fails the test as it would in the test itself.
#![allow(clippy::unwrap_used)]

use crate::common::databases;
use retry_runtime::{RetryEvent, Transient, retry};
use sqlx::{Connection, PgPool};
use std::error::Error as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Barrier;
use tokio_postgres::NoTls;

/// How to run these tests with a server, for the line a test prints without one.
const RUN: &str = ".ci/postgres.sh run cargo test -p retry-tests --test it database_errors::";

async fn fresh_pool(test: &str) -> Option<PgPool> {
    let url = databases::postgres_url(test, RUN)?;
    Some(databases::pool(databases::fresh_schema(&url, test).await))
}

fn sqlstate(error: &sqlx::Error) -> Option<String> {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.into_owned())
}

// sqlx: a serialization conflict, a unique violation.

/// Moves 60 cents out of `account` if the two accounts together keep at least 100: a read of
/// both rows, then a write of one, in a `SERIALIZABLE` transaction. Two of these on the two
/// accounts at once are a write skew that PostgreSQL refuses with `40001` for one of them.
/// The first attempt waits at `both_read` until the other has read too.
#[retry(max = 3, base = "5ms", jitter = full)]
async fn withdraw(
    pool: &PgPool,
    account: i32,
    both_read: &Barrier,
    calls: &AtomicU32,
    codes: &Mutex<Vec<String>>,
) -> Result<(), sqlx::Error> {
    calls.fetch_add(1, Ordering::SeqCst);
    let attempt = retry_runtime::attempt().number();
    let result = async {
        let mut tx = pool.begin().await?;
        sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            .execute(&mut *tx)
            .await?;
        let total: i64 = sqlx::query_scalar("SELECT sum(cents)::BIGINT FROM accounts")
            .fetch_one(&mut *tx)
            .await?;
        if attempt == 1 {
            both_read.wait().await;
        }
        if total - 60 >= 100 {
            sqlx::query("UPDATE accounts SET cents = cents - 60 WHERE id = $1")
                .bind(account)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }
    .await;
    if let Err(error) = &result {
        codes
            .lock()
            .unwrap()
            .push(sqlstate(error).unwrap_or_default());
    }
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_conflicting_serializable_transactions_both_commit_after_a_retry() {
    let Some(pool) = fresh_pool("serializable_conflict").await else {
        return;
    };
    sqlx::raw_sql(
        "CREATE TABLE accounts (id INTEGER PRIMARY KEY, cents BIGINT NOT NULL); \
         INSERT INTO accounts VALUES (1, 100), (2, 100);",
    )
    .execute(&pool)
    .await
    .unwrap();
    let (both_read, calls, codes) = (Barrier::new(2), AtomicU32::new(0), Mutex::default());
    let (first, second) = tokio::join!(
        withdraw(&pool, 1, &both_read, &calls, &codes),
        withdraw(&pool, 2, &both_read, &calls, &codes),
    );
    assert!(first.is_ok(), "{first:?}");
    assert!(second.is_ok(), "{second:?}");
    assert_eq!(
        *codes.lock().unwrap(),
        ["40001"],
        "one serialization failure"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3, "two calls and one retry");
    // The retry read the first one's write and withdrew nothing: without the conflict both
    // would have withdrawn, leaving 80.
    let total: i64 = sqlx::query_scalar("SELECT sum(cents)::BIGINT FROM accounts")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(total, 140);
}

#[retry(max = 3, base = "1ms")]
async fn insert_payout(pool: &PgPool, key: &str, calls: &AtomicU32) -> Result<(), sqlx::Error> {
    calls.fetch_add(1, Ordering::SeqCst);
    sqlx::query("INSERT INTO payouts (key) VALUES ($1)")
        .bind(key)
        .execute(pool)
        .await
        .map(drop)
}

#[tokio::test]
async fn a_unique_violation_is_returned_after_one_call() {
    let Some(pool) = fresh_pool("unique_violation").await else {
        return;
    };
    sqlx::raw_sql("CREATE TABLE payouts (key TEXT PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    let calls = AtomicU32::new(0);
    insert_payout(&pool, "k-1", &calls).await.unwrap();
    let error = insert_payout(&pool, "k-1", &calls).await.unwrap_err();
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one call each, no retry");
    assert_eq!(sqlstate(&error).as_deref(), Some("23505"));
    assert!(!error.is_transient());
}

#[tokio::test]
async fn sqlx_errors_the_server_sends_are_classified_by_the_table() {
    let Some(pool) = fresh_pool("sqlx_table").await else {
        return;
    };
    let permanent = [
        ("SELEC 1", "42601"),                     // syntax error
        ("SELECT * FROM no_such_table", "42P01"), // undefined table
        ("SELECT 1 / 0", "22012"),                // division by zero
        (
            "CREATE TABLE t (v INT CHECK (v > 0)); INSERT INTO t VALUES (0)",
            "23514",
        ),
    ];
    for (sql, code) in permanent {
        let error = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&pool)
            .await
            .unwrap_err();
        assert_eq!(sqlstate(&error).as_deref(), Some(code), "{sql}");
        assert!(!error.is_transient(), "{sql}: {error}");
    }
    let error = sqlx::query("SELECT 1 WHERE false")
        .fetch_one(&pool)
        .await
        .unwrap_err();
    assert!(matches!(error, sqlx::Error::RowNotFound));
    assert!(!error.is_transient());
    let error = sqlx::query_scalar::<_, i32>("SELECT 'text'")
        .fetch_one(&pool)
        .await
        .unwrap_err();
    assert!(
        matches!(error, sqlx::Error::ColumnDecode { .. }),
        "{error:?}"
    );
    assert!(!error.is_transient());

    // A connection the server terminates: 57P01 for the statement it was running, or the
    // connection's end for the next one.
    let mut victim = pool.acquire().await.unwrap();
    let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *victim)
        .await
        .unwrap();
    let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(terminated);
    let error = sqlx::query("SELECT 1")
        .execute(&mut *victim)
        .await
        .unwrap_err();
    assert!(error.is_transient(), "{error:?}");
}

#[tokio::test]
async fn sqlite_busy_is_transient_and_a_constraint_is_not() {
    use sqlx::ConnectOptions;
    use sqlx::sqlite::SqliteConnectOptions;
    let file = databases::TempFile::new("sqlite_busy");
    let options = SqliteConnectOptions::new()
        .filename(file.path())
        .create_if_missing(true)
        .busy_timeout(Duration::from_millis(20));
    let mut holder = options.connect().await.unwrap();
    let mut other = options.connect().await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE t (k TEXT PRIMARY KEY); BEGIN EXCLUSIVE; INSERT INTO t VALUES ('a')",
    )
    .execute(&mut holder)
    .await
    .unwrap();
    let busy = sqlx::raw_sql("INSERT INTO t VALUES ('b')")
        .execute(&mut other)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&busy).as_deref(), Some("5"), "{busy}");
    assert!(busy.is_transient());
    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
    let duplicate = sqlx::raw_sql("INSERT INTO t VALUES ('a')")
        .execute(&mut other)
        .await
        .unwrap_err();
    assert_eq!(sqlstate(&duplicate).as_deref(), Some("1555"), "{duplicate}"); // PRIMARYKEY
    assert!(!duplicate.is_transient());
    holder.close().await.unwrap();
}

// tokio-postgres: each row with an error the real server sends.

async fn connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

#[tokio::test]
async fn tokio_postgres_errors_are_classified_by_the_table() {
    // Refused: nothing listens on the port. The I/O cause is in the source chain.
    let closed_port = format!(
        "host=127.0.0.1 port={} user=postgres",
        databases::free_port()
    );
    let refused = connect(&closed_port).await.unwrap_err();
    let io = refused
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>());
    assert_eq!(
        io.map(std::io::Error::kind),
        Some(std::io::ErrorKind::ConnectionRefused)
    );
    assert!(refused.is_transient(), "{refused:?}");

    let Some(url) = databases::postgres_url("tokio_postgres_table", RUN) else {
        return;
    };
    let client = connect(&url).await.unwrap();
    for (sql, code) in [("SELEC 1", "42601"), ("SELECT 1 / 0", "22012")] {
        let error = client.batch_execute(sql).await.unwrap_err();
        assert_eq!(error.code().map(|c| c.code()), Some(code));
        assert!(!error.is_transient(), "{sql}: {error}");
    }
    let schema = databases::new_schema(&url, "tokio_postgres_table").await;
    client
        .batch_execute(&format!(
            "CREATE TABLE {schema}.payouts (key TEXT PRIMARY KEY); \
             INSERT INTO {schema}.payouts VALUES ('k')"
        ))
        .await
        .unwrap();
    let duplicate = client
        .batch_execute(&format!("INSERT INTO {schema}.payouts VALUES ('k')"))
        .await
        .unwrap_err();
    assert_eq!(duplicate.code().map(|c| c.code()), Some("23505"));
    assert!(!duplicate.is_transient());

    // The server terminates the session: 57P01, then a closed connection.
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let admin = connect(&url).await.unwrap();
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..100 {
        match client.simple_query("SELECT 1").await {
            Err(error) => {
                assert!(error.is_transient(), "{error:?}");
                let closed = error.is_closed();
                seen.push(
                    error
                        .code()
                        .map(|c| c.code().to_owned())
                        .unwrap_or_default(),
                );
                if closed {
                    break;
                }
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    assert!(client.is_closed(), "the terminated session ends: {seen:?}");
    let closed = client.simple_query("SELECT 1").await.unwrap_err();
    assert!(closed.is_closed() && closed.is_transient(), "{closed:?}");
    // Why the docs recommend the feature: a closed connection has no I/O cause, so a classifier
    // by I/O cause alone would return it to the caller.
    assert!(
        !retry_runtime::has_transient_io_cause(&closed),
        "{closed:?}"
    );
}

// With the `sqlx` feature on, the attribute recognises `sqlx::Result<T>` as the client's and
// classifies its errors by the feature's table, with no `on`.

#[retry(max = 2, base = "1ms", jitter = none)]
fn from_the_pool(answers: &std::cell::RefCell<Vec<sqlx::Result<u32>>>) -> sqlx::Result<u32> {
    answers.borrow_mut().remove(0)
}

#[test]
fn sqlx_result_needs_no_classifier_with_the_feature() {
    let answers = std::cell::RefCell::new(vec![Err(sqlx::Error::PoolTimedOut), Ok(7)]);
    let (result, pauses) = retry_runtime::testing::record(|| from_the_pool(&answers));
    assert_eq!((result.ok(), pauses.len()), (Some(7), 1));
    assert!(answers.borrow().is_empty());
}

/// Every Markdown file of the repository (the README, the guides, the crates' pages), outside
/// the build's and git's directories.
fn markdown_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                markdown_files(&path, found);
            }
        } else if name.ends_with(".md") && name != "CHANGELOG.md" {
            found.push(path);
        }
    }
}

#[test]
fn the_docs_recommend_the_tokio_postgres_feature_not_the_io_cause_helper() {
    // Through `pg_ctl restart`, a classifier by I/O cause let 60–90 errors per run reach the
    // callers (57P01, 57P03, a closed connection); the feature's `Transient`, none. The README
    // recommended the first (issue 20 §3).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    markdown_files(&root, &mut files);
    assert!(files.iter().any(|f| f.ends_with("README.md")), "{files:?}");
    let mut feature_named = false;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            assert!(
                !(line.contains("tokio_postgres::Error")
                    && line.contains("has_transient_io_cause")),
                "{}:{}: recommends `has_transient_io_cause` for `tokio_postgres::Error`; \
                 recommend the `tokio-postgres` feature's `Transient`: {line}",
                file.display(),
                n + 1
            );
        }
        feature_named |= text.contains(r#"features = ["tokio-postgres"]"#);
    }
    assert!(
        feature_named,
        "no Markdown file shows `features = [\"tokio-postgres\"]`"
    );
}

// A server restart in the middle of a run of calls: every call succeeds.

/// The errors a `#[retry]` heard, with whether each was transient.
type Heard = Arc<Mutex<Vec<(String, bool)>>>;

fn hear<E: std::error::Error + Transient + 'static>(
    heard: &Heard,
) -> impl Fn(&E, &RetryEvent) + '_ {
    move |error, _| {
        // The error and its causes: tokio-postgres says "db error" and puts the server's
        // message in the source.
        let mut text = error.to_string();
        let mut cause = error.source();
        while let Some(error) = cause {
            text = format!("{text}: {error}");
            cause = error.source();
        }
        heard.lock().unwrap().push((text, error.is_transient()))
    }
}

#[retry(max = 30, base = "20ms", max_delay = "200ms", jitter = full, notify = hear(heard))]
async fn count_with_sqlx(pool: &PgPool, heard: &Heard) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM pg_class")
        .fetch_one(pool)
        .await
}

/// A client that reconnects when its connection is gone, as a pool of `tokio_postgres` clients
/// (`deadpool-postgres`) does.
struct Reconnecting {
    url: String,
    client: tokio::sync::Mutex<Option<tokio_postgres::Client>>,
}

#[retry(max = 30, base = "20ms", max_delay = "200ms", jitter = full, notify = hear(heard))]
async fn count_with_tokio_postgres(
    db: &Reconnecting,
    heard: &Heard,
) -> Result<i64, tokio_postgres::Error> {
    let mut slot = db.client.lock().await;
    let client = match slot.take() {
        Some(client) if !client.is_closed() => client,
        _ => connect(&db.url).await?,
    };
    let row = client
        .query_one("SELECT count(*) FROM pg_class", &[])
        .await?;
    *slot = Some(client);
    Ok(row.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_while_the_server_restarts_succeeds_once_it_is_back() {
    let Some(cluster) = databases::PrivateCluster::start("restart", RUN) else {
        return;
    };
    let url = cluster.url();
    // No ping before each use and a short wait for a connection, so that the restart reaches
    // the annotated function instead of being absorbed by the pool.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .acquire_timeout(Duration::from_millis(100))
        .connect_lazy(&url)
        .unwrap();
    let db = Reconnecting {
        url: url.clone(),
        client: tokio::sync::Mutex::new(None),
    };
    let (sqlx_heard, tokio_postgres_heard): (Heard, Heard) = Default::default();
    count_with_sqlx(&pool, &sqlx_heard).await.unwrap();
    count_with_tokio_postgres(&db, &tokio_postgres_heard)
        .await
        .unwrap();

    // Calls back to back on both clients while the server restarts, and a few after.
    let cluster = Arc::new(cluster);
    let restart = tokio::task::spawn_blocking({
        let cluster = Arc::clone(&cluster);
        move || {
            std::thread::sleep(Duration::from_millis(50));
            cluster.restart();
        }
    });
    // Each client in a loop of its own, so that both are calling while the server is down.
    let sqlx_calls = async {
        let mut calls = 0;
        while !restart.is_finished() || calls < 40 {
            count_with_sqlx(&pool, &sqlx_heard).await.unwrap();
            calls += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let tokio_postgres_calls = async {
        let mut calls = 0;
        while !restart.is_finished() || calls < 40 {
            count_with_tokio_postgres(&db, &tokio_postgres_heard)
                .await
                .unwrap();
            calls += 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::join!(sqlx_calls, tokio_postgres_calls);
    restart.await.unwrap();

    for (client, heard) in [
        ("sqlx", &sqlx_heard),
        ("tokio-postgres", &tokio_postgres_heard),
    ] {
        let heard = heard.lock().unwrap();
        let mut kinds: Vec<&str> = heard.iter().map(|(error, _)| error.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        println!(
            "{client} heard {} errors during the restart: {kinds:#?}",
            heard.len()
        );
        assert!(!heard.is_empty(), "{client} saw the restart");
        assert!(
            heard.iter().all(|(_, transient)| *transient),
            "{client}: {heard:?}"
        );
    }
}

// The `Retrier` around a transaction on a `&mut tokio_postgres::Client` (issue 29, item 2):
// `run_async_mut` takes an async closure, whose attempts borrow the client mutably.

#[tokio::test]
async fn retrier_runs_a_serializable_transaction_on_a_mut_client() {
    use retry_runtime::{Jitter, Policy, Retrier, attempt};
    use tokio_postgres::IsolationLevel;

    let Some(url) = databases::postgres_url("retrier_mut_client", RUN) else {
        return;
    };
    let schema = databases::new_schema(&url, "retrier_mut_client").await;
    let mut client = connect(&url).await.unwrap();
    let mut other = connect(&url).await.unwrap();
    client
        .batch_execute(&format!(
            "CREATE TABLE {schema}.accounts (id INT PRIMARY KEY, cents BIGINT NOT NULL); \
             INSERT INTO {schema}.accounts VALUES (1, 100), (2, 100)"
        ))
        .await
        .unwrap();
    let sum = format!("SELECT sum(cents)::BIGINT FROM {schema}.accounts");
    let take = |id: i32| format!("UPDATE {schema}.accounts SET cents = cents - 60 WHERE id = {id}");
    let policy = Policy::new()
        .max(3)
        .base(Duration::from_millis(5))
        .jitter(Jitter::None);
    let codes = Mutex::new(Vec::new());
    // Takes 60 from account 1 if both together keep at least 100 afterwards.
    let withdrawn = Retrier::new(&policy)
        .notify(|error: &tokio_postgres::Error, _: &RetryEvent| {
            let code = error.code().map(|c| c.code().to_owned());
            codes.lock().unwrap().push(code.unwrap_or_default());
        })
        .run_async_mut(async || {
            let tx = client
                .build_transaction()
                .isolation_level(IsolationLevel::Serializable)
                .start()
                .await?;
            let total: i64 = tx.query_one(&sum, &[]).await?.get(0);
            if attempt().number() == 1 {
                // Meanwhile another session takes 60 from account 2 on the same reading: a
                // write skew, which PostgreSQL refuses to this transaction with 40001.
                let theirs = other
                    .build_transaction()
                    .isolation_level(IsolationLevel::Serializable)
                    .start()
                    .await?;
                theirs.query_one(&sum, &[]).await?;
                theirs.execute(&take(2), &[]).await?;
                theirs.commit().await?;
            }
            if total - 60 < 100 {
                return Ok(false);
            }
            tx.execute(&take(1), &[]).await?;
            tx.commit().await?;
            Ok(true)
        })
        .await;
    // The retry read the other session's withdrawal and refused this one: nothing overdrawn.
    assert!(!withdrawn.unwrap());
    assert_eq!(*codes.lock().unwrap(), ["40001"]);
    let total: i64 = client.query_one(&sum, &[]).await.unwrap().get(0);
    assert_eq!(total, 140);
}

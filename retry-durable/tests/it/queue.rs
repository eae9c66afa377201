//! The queue's rules, each on SQLite and on PostgreSQL: one job per key, one holder per job, a
//! lease that hands the job of a dead worker over and fences the old holder out, attempts with
//! their backoff in `run_at`, the dead state with its error; and the worker's bounds:
//! concurrency, pace, and the circuit breaker.

use crate::common::{Database, Engine};
use retry_durable::queue::{Claim, Job, Outcome, Queue, QueueError, Retried, State, Worker};
use retry_durable::store::Backend;
use retry_runtime::{BreakerState, CircuitBreaker, Policy};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Task {
    name: String,
}

fn task(name: &str) -> Task {
    Task {
        name: name.to_owned(),
    }
}

/// Each test on both engines; a PostgreSQL test without a server skips (or fails in CI).
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name::<sqlx::Sqlite>(super::Engine::Sqlite).await;
            }
        )*}
        mod postgres {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                super::$name::<sqlx::Postgres>(super::Engine::Postgres).await;
            }
        )*}
    };
}

on_both!(
    a_key_is_enqueued_once,
    a_job_is_handed_to_one_claimer_at_a_time,
    an_ended_lease_hands_the_job_over_and_fences_the_old_holder_out,
    a_failed_attempt_waits_its_backoff_and_the_last_one_is_dead,
    a_snoozed_attempt_does_not_count,
    a_killed_job_keeps_its_error,
    a_job_abandoned_on_its_last_attempt_is_buried,
    the_worker_keeps_its_concurrency,
    a_handler_holding_a_transaction_across_renewals_is_not_stalled,
    the_worker_keeps_its_pace,
    the_worker_retries_passing_failures_and_buries_permanent_ones,
    the_worker_waits_for_the_breaker_and_sends_the_trial_alone,
    a_table_made_before_versions_is_adopted_and_a_newer_one_refused,
);

/// What two cases do beside the queue, on either engine: statements of their own, which
/// [`Backend`] alone does not let generic code run.
trait Raw: Backend {
    /// Runs `sql` (statements without parameters) on `connection`.
    async fn run(connection: &mut Self::Connection, sql: &str);
    /// Runs `sql` on `pool`.
    async fn run_on(pool: &sqlx::Pool<Self>, sql: &str) -> Result<u64, sqlx::Error>;
    /// The number the query `sql` answers on `pool`.
    async fn number(pool: &sqlx::Pool<Self>, sql: &str) -> Result<i64, sqlx::Error>;
}

macro_rules! raw {
    ($($db:ty),*) => {$(
        impl Raw for $db {
            async fn run(connection: &mut Self::Connection, sql: &str) {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                    .execute(connection)
                    .await
                    .expect("the statements run");
            }
            async fn run_on(pool: &sqlx::Pool<Self>, sql: &str) -> Result<u64, sqlx::Error> {
                let done = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(pool).await?;
                Ok(done.rows_affected())
            }
            async fn number(pool: &sqlx::Pool<Self>, sql: &str) -> Result<i64, sqlx::Error> {
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(pool).await
            }
        }
    )*};
}

raw!(sqlx::Sqlite, sqlx::Postgres);

async fn open<B: Backend>(engine: Engine, test: &str) -> Option<(Database, Queue<B>)> {
    let database = Database::fresh(engine, test).await?;
    let queue = Queue::open(&database.url, "tasks")
        .await
        .expect("the queue opens");
    Some((database, queue))
}

async fn claim<B: Backend>(queue: &Queue<B>, lease_ms: u64) -> Option<(Job<Task>, Claim<B>)> {
    queue
        .claim::<Task>("test", Duration::from_millis(lease_ms))
        .await
        .expect("the claim runs")
        .map(|claimed| claimed.into_parts())
}

async fn a_key_is_enqueued_once<B: Raw>(engine: Engine) {
    let Some((db, queue)) = open::<B>(engine, "a_key_is_enqueued_once").await else {
        return;
    };
    let first = queue.enqueue("k1", &task("a")).await.expect("enqueued");
    let again = queue.enqueue("k1", &task("a")).await.expect("enqueued");
    assert!(first.new && !again.new);
    assert_eq!(first.job, again.job);
    let reused = queue.enqueue("k1", &task("b")).await;
    assert!(
        matches!(reused, Err(QueueError::KeyReused { .. })),
        "{reused:?}"
    );
    // Another queue in the same table has its own keys.
    let other = Queue::<B>::open(&db.url, "other")
        .await
        .expect("the queue opens");
    assert!(other.enqueue("k1", &task("b")).await.expect("enqueued").new);
    // A job enqueued in a transaction that rolls back was never there.
    let mut tx = queue.begin().await.expect("a transaction");
    queue
        .enqueue_in(&mut tx, "k2", &task("c"))
        .await
        .expect("enqueued");
    tx.rollback().await.expect("rolled back");
    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!((jobs[0].state, jobs[0].attempts), (State::Available, 0));
}

async fn a_job_is_handed_to_one_claimer_at_a_time<B: Raw>(engine: Engine) {
    let Some((db, queue)) = open::<B>(engine, "a_job_is_handed_to_one_claimer").await else {
        return;
    };
    for n in 0..20 {
        queue
            .enqueue(&format!("k{n}"), &task(&format!("t{n}")))
            .await
            .expect("enqueued");
    }
    // Four workers, each with a pool of its own, claim as fast as they can.
    let claimers = (0..4).map(|_| {
        let url = db.url.clone();
        tokio::spawn(async move {
            let queue = Queue::<B>::open(&url, "tasks")
                .await
                .expect("the queue opens");
            let mut got = Vec::new();
            while let Some((job, _claim)) = claim(&queue, 60_000).await {
                got.push(job.id);
            }
            got
        })
    });
    let mut all = Vec::new();
    for claimer in claimers {
        all.extend(claimer.await.expect("the claimer finishes"));
    }
    let distinct: HashSet<_> = all.iter().collect();
    assert_eq!((all.len(), distinct.len()), (20, 20), "{all:?}");
}

async fn an_ended_lease_hands_the_job_over_and_fences_the_old_holder_out<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "an_ended_lease_hands_the_job_over").await else {
        return;
    };
    queue.enqueue("k", &task("a")).await.expect("enqueued");
    let (job, stale) = claim(&queue, 50).await.expect("a job");
    assert_eq!(job.attempt, 1);
    assert!(claim(&queue, 50).await.is_none(), "held under its lease");
    tokio::time::sleep(Duration::from_millis(80)).await;
    let (again, successor) = claim(&queue, 60_000).await.expect("taken over");
    assert_eq!(
        (again.id, again.attempt, again.key.as_str()),
        (job.id, 2, "k")
    );
    // The old holder was paused, not dead: everything it tries now is refused, and its own rows
    // roll back with its completion.
    assert!(matches!(
        stale.renew(Duration::from_secs(1)).await,
        Err(QueueError::Superseded { .. })
    ));
    let mut tx = queue.begin().await.expect("a transaction");
    B::run(
        &mut tx,
        "CREATE TABLE IF NOT EXISTS mine (n BIGINT); INSERT INTO mine (n) VALUES (1)",
    )
    .await;
    let refused = stale.clone().complete_in(tx, &"stale").await;
    assert!(
        matches!(refused, Err(QueueError::Superseded { .. })),
        "{refused:?}"
    );
    let mine = B::number(queue.pool(), "SELECT COUNT(*) FROM mine").await;
    assert!(
        mine.is_err() || mine.is_ok_and(|rows| rows == 0),
        "rolled back"
    );
    assert!(matches!(
        stale.kill("stale").await,
        Err(QueueError::Superseded { .. })
    ));
    successor
        .complete(&"fresh")
        .await
        .expect("the successor completes");
    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!(
        (jobs[0].state, jobs[0].result.as_deref()),
        (State::Done, Some("\"fresh\""))
    );
}

async fn a_failed_attempt_waits_its_backoff_and_the_last_one_is_dead<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "a_failed_attempt_waits_its_backoff").await else {
        return;
    };
    let queue = queue.with_max_attempts(3);
    queue.enqueue("k", &task("a")).await.expect("enqueued");
    let (_, first) = claim(&queue, 60_000).await.expect("a job");
    let pause = Duration::from_millis(300);
    assert_eq!(
        first
            .retry_later("overloaded", pause)
            .await
            .expect("put back"),
        Retried::Later
    );
    // Not claimable during its backoff, which the table keeps as run_at.
    assert!(claim(&queue, 60_000).await.is_none());
    let due = queue
        .next_due()
        .await
        .expect("the next due")
        .expect("one job");
    assert!(due > Duration::from_millis(200) && due <= pause, "{due:?}");
    tokio::time::sleep(due + Duration::from_millis(20)).await;
    let (job, second) = claim(&queue, 60_000).await.expect("due again");
    assert_eq!(job.attempt, 2);
    assert_eq!(
        second
            .retry_later("overloaded", Duration::ZERO)
            .await
            .expect("put back"),
        Retried::Later
    );
    let (job, third) = claim(&queue, 60_000).await.expect("due at once");
    assert_eq!(job.attempt, 3);
    assert_eq!(
        third
            .retry_later("still overloaded", Duration::ZERO)
            .await
            .expect("recorded"),
        Retried::Dead
    );
    assert!(
        claim(&queue, 60_000).await.is_none(),
        "dead jobs are never claimed"
    );
    assert_eq!(queue.next_due().await.expect("the next due"), None);
    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!(jobs[0].state, State::Dead);
    assert_eq!(jobs[0].attempts, 3);
    assert_eq!(jobs[0].last_error.as_deref(), Some("still overloaded"));
}

async fn a_snoozed_attempt_does_not_count<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "a_snoozed_attempt_does_not_count").await else {
        return;
    };
    queue.enqueue("k", &task("a")).await.expect("enqueued");
    let (_, held) = claim(&queue, 60_000).await.expect("a job");
    held.snooze(Duration::ZERO, "circuit open")
        .await
        .expect("snoozed");
    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!((jobs[0].state, jobs[0].attempts), (State::Available, 0));
    assert_eq!(jobs[0].last_error.as_deref(), Some("circuit open"));
    let (job, _) = claim(&queue, 60_000).await.expect("again");
    assert_eq!(job.attempt, 1);
}

async fn a_killed_job_keeps_its_error<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "a_killed_job_keeps_its_error").await else {
        return;
    };
    queue.enqueue("k", &task("a")).await.expect("enqueued");
    let (_, held) = claim(&queue, 60_000).await.expect("a job");
    held.kill("no claim 4791 on record").await.expect("killed");
    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!((jobs[0].state, jobs[0].attempts), (State::Dead, 1));
    assert_eq!(
        jobs[0].last_error.as_deref(),
        Some("no claim 4791 on record")
    );
    assert!(claim(&queue, 60_000).await.is_none());
}

async fn a_job_abandoned_on_its_last_attempt_is_buried<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "a_job_abandoned_on_its_last_attempt").await else {
        return;
    };
    let queue = queue.with_max_attempts(1);
    queue.enqueue("k", &task("a")).await.expect("enqueued");
    let (_, _abandoned) = claim(&queue, 20).await.expect("a job");
    tokio::time::sleep(Duration::from_millis(40)).await;
    assert!(claim(&queue, 60_000).await.is_none(), "no attempt left");
    assert_eq!(queue.bury_abandoned().await.expect("buried"), 1);
    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!(jobs[0].state, State::Dead);
    let error = jobs[0].last_error.as_deref().unwrap_or_default();
    assert!(
        error.starts_with("the lease of its last attempt ended"),
        "{error}"
    );
}

/// A handler that holds its transaction open across two renewals of its lease (it has written,
/// so on SQLite it holds the file's write lock, which each renewal's `UPDATE` waits for): the
/// worker keeps polling it while a renewal waits, so it commits, and the renewal after it, at
/// once. Before, the worker awaited each renewal alone, the handler unpolled, and the job was
/// done only after SQLite's busy timeout (5 s), with its lease long over.
async fn a_handler_holding_a_transaction_across_renewals_is_not_stalled<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "a_handler_holding_a_transaction").await else {
        return;
    };
    queue.enqueue("k", &task("t")).await.expect("enqueued");
    const LEASE: Duration = Duration::from_millis(300);
    let handler = {
        let queue = queue.clone();
        move |job: Job<Task>| {
            let queue = queue.clone();
            async move {
                let mut tx = queue.begin().await.expect("a transaction");
                queue
                    .enqueue_in(&mut tx, "written by the handler", &job.payload)
                    .await
                    .expect("the handler's write");
                // Two renewals (at a third and two thirds of the lease) while it is open.
                tokio::time::sleep(LEASE * 5 / 6).await;
                Outcome::DoneIn(tx, job.payload.name)
            }
        }
    };
    let started = Instant::now();
    let worker = Worker::new("w")
        .lease(LEASE)
        .per_second(f64::INFINITY)
        .poll(Duration::from_millis(10))
        .until_empty();
    let drained = tokio::time::timeout(Duration::from_secs(60), worker.run(&queue, handler))
        .await
        .expect("the worker ends")
        .expect("the worker runs");
    let took = started.elapsed();
    assert_eq!(drained.done, 2, "the job and the one its handler wrote");
    // 2.5 s: half the busy timeout the stall waited out, ten times the handler's 250 ms.
    assert!(
        took < Duration::from_millis(2_500),
        "the handler was stalled: {took:?} for a handler of {:?}",
        LEASE * 5 / 6
    );
    let jobs = queue.jobs().await.expect("the jobs");
    assert!(
        jobs.iter()
            .all(|job| job.state == State::Done && job.attempts == 1),
        "{jobs:?}"
    );
}

async fn the_worker_keeps_its_concurrency<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "the_worker_keeps_its_concurrency").await else {
        return;
    };
    for n in 0..12 {
        queue
            .enqueue(&format!("k{n}"), &task(&format!("t{n}")))
            .await
            .expect("enqueued");
    }
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (running, most) = (running.clone(), most.clone());
        move |job: Job<Task>| {
            let (running, most) = (running.clone(), most.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Outcome::Done(job.payload.name)
            }
        }
    };
    let drained = Worker::new("w")
        .concurrency(3)
        .per_second(f64::INFINITY)
        .poll(Duration::from_millis(10))
        .until_empty()
        .run(&queue, handler)
        .await
        .expect("the worker runs");
    assert_eq!(drained.done, 12);
    assert_eq!(
        most.load(Ordering::SeqCst),
        3,
        "at most 3 at a time, and 3 reached"
    );
    let jobs = queue.jobs().await.expect("the jobs");
    assert!(
        jobs.iter()
            .all(|job| job.state == State::Done && job.attempts == 1)
    );
}

async fn the_worker_keeps_its_pace<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "the_worker_keeps_its_pace").await else {
        return;
    };
    for n in 0..6 {
        queue
            .enqueue(&format!("k{n}"), &task(&format!("t{n}")))
            .await
            .expect("enqueued");
    }
    let worker = Worker::new("w")
        .concurrency(6)
        .per_second(10.0)
        .poll(Duration::from_millis(10))
        .until_empty();
    let started = Instant::now();
    let drained = worker
        .run(&queue, |job: Job<Task>| async move {
            Outcome::Done(job.payload.name)
        })
        .await
        .expect("the worker runs");
    // 10 claims a second: the 6th claim comes at least 5 × 100 ms after the first, however fast
    // the jobs are (without a pace the six take about 20 to 250 ms, the commits' flushes).
    assert_eq!(drained.done, 6);
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(500), "{took:?}");
}

async fn the_worker_retries_passing_failures_and_buries_permanent_ones<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "the_worker_retries_passing_failures").await else {
        return;
    };
    queue
        .enqueue("flaky", &task("flaky"))
        .await
        .expect("enqueued");
    queue
        .enqueue("broken", &task("broken"))
        .await
        .expect("enqueued");
    let calls = Arc::new(AtomicU32::new(0));
    let handler = {
        let calls = calls.clone();
        move |job: Job<Task>| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                match (job.payload.name.as_str(), job.attempt) {
                    ("flaky", 1 | 2) => Outcome::RetryLater("overloaded".to_owned()),
                    ("flaky", _) => Outcome::Done("covered"),
                    _ => Outcome::Dead("no claim 4791 on record".to_owned()),
                }
            }
        }
    };
    let drained = Worker::new("w")
        .per_second(f64::INFINITY)
        .poll(Duration::from_millis(10))
        .backoff(Policy::new().base(Duration::from_millis(20)))
        .until_empty()
        .run(&queue, handler)
        .await
        .expect("the worker runs");
    assert_eq!((drained.done, drained.retried, drained.dead), (1, 2, 1));
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!((jobs[0].state, jobs[0].attempts), (State::Done, 3));
    assert_eq!(
        jobs[0].last_error.as_deref(),
        Some("overloaded"),
        "the last failure is kept"
    );
    assert_eq!((jobs[1].state, jobs[1].attempts), (State::Dead, 1));
    assert_eq!(
        jobs[1].last_error.as_deref(),
        Some("no claim 4791 on record")
    );
}

static SQLITE_BREAKER: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(1)
    .open_for(Duration::from_millis(300));
static POSTGRES_BREAKER: CircuitBreaker = CircuitBreaker::new()
    .consecutive_failures(1)
    .open_for(Duration::from_millis(300));

async fn the_worker_waits_for_the_breaker_and_sends_the_trial_alone<B: Raw>(engine: Engine) {
    let Some((_db, queue)) = open::<B>(engine, "the_worker_waits_for_the_breaker").await else {
        return;
    };
    let breaker = match engine {
        Engine::Sqlite => &SQLITE_BREAKER,
        Engine::Postgres => &POSTGRES_BREAKER,
    };
    for n in 0..4 {
        queue
            .enqueue(&format!("k{n}"), &task(&format!("t{n}")))
            .await
            .expect("enqueued");
    }
    // The service failed once: the breaker is open for 300 ms.
    let opened = Instant::now();
    breaker
        .admit(opened.into_std())
        .expect("closed")
        .record(false, opened.into_std());
    assert!(matches!(
        breaker.state(opened.into_std()),
        BreakerState::Open { .. }
    ));
    let spans = Arc::new(Mutex::new(Vec::new()));
    let handler = {
        let spans = spans.clone();
        move |job: Job<Task>| {
            let spans = spans.clone();
            async move {
                let start = Instant::now();
                // The job's call goes through the breaker: the first is the trial, and closes it.
                let call = breaker.admit(start.into_std());
                tokio::time::sleep(Duration::from_millis(30)).await;
                let outcome = match call {
                    Ok(call) => {
                        call.record(true, Instant::now().into_std());
                        Outcome::Done(job.payload.name)
                    }
                    Err(open) => Outcome::Snooze {
                        pause: Duration::from_millis(10),
                        reason: open.to_string(),
                    },
                };
                spans
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push((start, Instant::now()));
                outcome
            }
        }
    };
    let drained = Worker::new("w")
        .concurrency(4)
        .per_second(f64::INFINITY)
        .poll(Duration::from_millis(20))
        .breaker(breaker)
        .until_empty()
        .run(&queue, handler)
        .await
        .expect("the worker runs");
    assert_eq!((drained.done, drained.snoozed), (4, 0), "{drained:?}");
    let mut spans = spans.lock().unwrap_or_else(PoisonError::into_inner).clone();
    spans.sort();
    let (trial_start, trial_end) = spans[0];
    assert!(
        trial_start - opened >= Duration::from_millis(290),
        "nothing claimed while open"
    );
    assert!(
        spans[1..].iter().all(|(start, _)| *start >= trial_end),
        "the trial ran alone: {spans:?}"
    );
}

/// The table as the queue created it before it kept a version (`CREATE … IF NOT EXISTS` at
/// every open), word for word.
fn table_before_versions(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => {
            "BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS retry_jobs (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    queue        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('available', 'running', 'done', 'dead')),
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    run_at       INTEGER NOT NULL,
    token        INTEGER,
    worker       TEXT,
    last_error   TEXT,
    result       TEXT,
    created_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    UNIQUE (queue, key)
);
CREATE INDEX IF NOT EXISTS retry_jobs_due ON retry_jobs (queue, run_at)
    WHERE state IN ('available', 'running');
COMMIT;"
        }
        Engine::Postgres => {
            "SELECT pg_advisory_xact_lock(7411);
CREATE TABLE IF NOT EXISTS retry_jobs (
    id           BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('available', 'running', 'done', 'dead')),
    attempts     BIGINT  NOT NULL,
    max_attempts BIGINT  NOT NULL,
    run_at       BIGINT  NOT NULL,
    token        BIGINT,
    worker       TEXT,
    last_error   TEXT,
    result       TEXT,
    created_at   BIGINT  NOT NULL,
    finished_at  BIGINT,
    UNIQUE (queue, key)
);
CREATE INDEX IF NOT EXISTS retry_jobs_due ON retry_jobs (queue, run_at)
    WHERE state IN ('available', 'running');"
        }
    }
}

async fn a_table_made_before_versions_is_adopted_and_a_newer_one_refused<B: Raw>(engine: Engine) {
    let Some(db) = Database::fresh(engine, "a_table_made_before_versions").await else {
        return;
    };
    let pool = Queue::<B>::open(&db.url, "probe")
        .await
        .expect("a pool")
        .pool()
        .clone();
    B::run_on(&pool, "DROP TABLE retry_jobs; DROP TABLE retry_jobs_schema")
        .await
        .expect("a database as an older release left it");
    B::run_on(&pool, table_before_versions(engine))
        .await
        .expect("the table of an older release");
    B::run_on(
        &pool,
        "INSERT INTO retry_jobs (queue, key, payload, state, attempts, max_attempts, run_at, \
         created_at) VALUES ('tasks', 'k', '{\"name\":\"old\"}', 'available', 0, 3, 0, 0)",
    )
    .await
    .expect("a job enqueued by an older release");

    // Opened by this release, twice: the table and its job are taken as version 1.
    for _ in 0..2 {
        Queue::<B>::open(&db.url, "tasks")
            .await
            .expect("the queue opens");
    }
    let version = B::number(
        &pool,
        "SELECT CAST(version AS BIGINT) FROM retry_jobs_schema",
    )
    .await
    .expect("the version row");
    assert_eq!(version, 1);
    let queue = Queue::<B>::open(&db.url, "tasks")
        .await
        .expect("the queue opens");
    let (job, claim) = claim(&queue, 60_000).await.expect("the old job");
    assert_eq!(
        (job.key.as_str(), job.payload, job.max_attempts),
        ("k", task("old"), 3)
    );
    claim.complete(&"done").await.expect("completed");

    // A table from a newer release is refused, with what to do.
    B::run_on(&pool, "UPDATE retry_jobs_schema SET version = 2")
        .await
        .expect("a newer version");
    let refused = Queue::<B>::open(&db.url, "tasks").await;
    let Err(QueueError::Schema(message)) = &refused else {
        panic!("a newer table is refused: {refused:?}");
    };
    assert!(
        message.starts_with("the job queue's schema is version 2, newer than version 1"),
        "{message}"
    );
}

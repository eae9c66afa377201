//! A durable job queue in one table, on SQLite or PostgreSQL: where the portal puts a coverage
//! check that cannot be made now, and where a [`Worker`] finds it when the contract service is
//! back.
//!
//! It is built the way River (Go), Oban (Elixir) and good_job (Ruby) build theirs: one row per
//! job; a claim that hands a due row to exactly one worker (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL; SQLite runs one writer at a time); a lease, so that the job of a worker that died
//! comes back; an attempt count with the backoff stored as the row's `run_at`; and a `dead` state
//! that keeps the last error instead of retrying forever. Why not apalis is in the
//! [queue guide](crate::guide::queue).
//!
//! # The table
//!
//! [`Queue::open`] creates it, or brings it to this version, in one transaction that processes
//! starting together take one after the other (`BEGIN IMMEDIATE` on SQLite, an advisory lock on
//! PostgreSQL), with the version kept in `retry_jobs_schema`, as the idempotency stores keep
//! theirs. A table made before the queue had versions is taken as version 1. PostgreSQL's
//! types are `BIGINT` where SQLite's are `INTEGER`:
//!
//! ```sql
//! CREATE TABLE retry_jobs (
//!     id           INTEGER PRIMARY KEY AUTOINCREMENT,
//!     queue        TEXT    NOT NULL,  -- several queues share the table
//!     key          TEXT    NOT NULL,  -- the idempotency key: one job per key and queue
//!     payload      TEXT    NOT NULL,  -- JSON
//!     state        TEXT    NOT NULL CHECK (state IN ('available', 'running', 'done', 'dead')),
//!     attempts     INTEGER NOT NULL,  -- claims so far, the running one included
//!     max_attempts INTEGER NOT NULL,
//!     run_at       INTEGER NOT NULL,  -- ms since the epoch, the database's clock: available:
//!                                     -- not before; running: the lease ends
//!     token        INTEGER,           -- running: the holder's random token (fencing)
//!     worker       TEXT,              -- who claimed it last
//!     last_error   TEXT,              -- why the last attempt failed; why it is dead
//!     result       TEXT,              -- done: the handler's result, JSON
//!     created_at   INTEGER NOT NULL,
//!     finished_at  INTEGER,           -- done or dead
//!     UNIQUE (queue, key)
//! );
//! CREATE INDEX retry_jobs_due ON retry_jobs (queue, run_at)
//!     WHERE state IN ('available', 'running');
//! ```
//!
//! # A job's life
//!
//! ```text
//!            enqueue                claim (attempt + 1)            complete
//!   (new key) ──────▶ available ─────────────────────▶ running ──────────────▶ done
//!                       ▲   ▲                             │ │ │
//!                       │   └── retry_later (backoff) ────┘ │ └── kill, or retry_later
//!                       └────── snooze (attempt given back) ┘     on the last attempt ──▶ dead
//!
//!   running, lease ended (the worker died): claimed again like an available job (attempt + 1);
//!   dead instead if that was its last attempt.
//! ```
//!
//! Every change a holder makes names its claim's random token, and a job that was taken over has
//! another: a worker that was paused past its lease (not dead) can no longer complete, retry or
//! kill the job ([`QueueError::Superseded`]), so its successor's outcome stands. A [`Worker`]
//! renews the lease while its handler runs, so only a worker that stopped loses its jobs.
//!
//! Delivery is at least once: a worker that dies after its call to another system and before
//! `complete` commits leaves a job that runs again. The job carries the idempotency key, so that
//! the other system recognises the repeat (the contract service keeps its answers by key), and
//! the handler's own rows commit in the same transaction as the completion
//! ([`Outcome::DoneIn`]), so they are written exactly once.

#![warn(missing_docs)]

mod metrics;
mod sql;
mod worker;

pub use metrics::QueueStats;
pub use worker::{Drained, Outcome, Worker};

use crate::sql::{Dialect, Generic, MigrateError, Run};
use retry_runtime::Transient;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sql::Statements;
use sqlx::any::AnyPoolOptions;
use sqlx::{Any, AnyConnection, AnyPool, Executor, Row, Transaction};
use std::fmt;
use std::sync::{Arc, LazyLock, Once};
use std::time::Duration;

/// A transaction on the queue's database, for the caller's own rows next to a job: the claim that
/// `save_for_later` saves, or the e-mail a worker sends with a result.
pub type Tx = Transaction<'static, Any>;

/// Attempts a job gets by default before it is dead.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;

/// The database engine behind a [`Queue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A file on this machine (sqlx's bundled SQLite): no server; processes on this machine
    /// share it.
    Sqlite,
    /// A PostgreSQL database: every replica of the portal shares it.
    Postgres,
}

impl Engine {
    /// The engine's SQL, from the layer the stores share.
    fn dialect(self) -> &'static Dialect {
        match self {
            Engine::Sqlite => &crate::sql::SQLITE,
            Engine::Postgres => &crate::sql::POSTGRES,
        }
    }
}

/// Where a queue lives: a PostgreSQL URL, or a SQLite file.
///
/// ```
/// use retry_durable::queue::{Engine, Location};
///
/// assert_eq!(Location::parse("postgres://portal@db/claims").engine(), Engine::Postgres);
/// assert_eq!(Location::parse("/var/lib/portal/queue.db").engine(), Engine::Sqlite);
/// assert_eq!(Location::parse("sqlite:///var/lib/portal/queue.db").engine(), Engine::Sqlite);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    engine: Engine,
    url: String,
}

impl Location {
    /// `postgres://...` or `postgresql://...` is PostgreSQL; a `sqlite:` URL or anything else is
    /// a SQLite file, created if it is missing.
    pub fn parse(database: &str) -> Self {
        if database.starts_with("postgres://") || database.starts_with("postgresql://") {
            return Location {
                engine: Engine::Postgres,
                url: database.to_owned(),
            };
        }
        let url = if database.starts_with("sqlite:") {
            database.to_owned()
        } else {
            format!("sqlite://{database}")
        };
        let separator = if url.contains('?') { '&' } else { '?' };
        Location {
            engine: Engine::Sqlite,
            url: format!("{url}{separator}mode=rwc"),
        }
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The URL sqlx connects to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// Opens a pool on `location`. A SQLite file is created if it is missing and set up for several
/// processes: write-ahead logging (readers never wait for the writer), `synchronous = FULL` (a
/// commit is on disk when it returns), and a busy timeout of 5 s (a writer waits that long for
/// another).
pub async fn connect(location: &Location) -> Result<AnyPool, QueueError> {
    static DRIVERS: Once = Once::new();
    DRIVERS.call_once(sqlx::any::install_default_drivers);
    let options = AnyPoolOptions::new()
        .max_connections(8)
        .acquire_timeout(Duration::from_secs(10));
    let options = match location.engine {
        Engine::Sqlite => {
            options.after_connect(|connection, _| Box::pin(sqlite_pragmas(connection)))
        }
        Engine::Postgres => options,
    };
    let pool = options.connect(location.url()).await?;
    Ok(pool)
}

async fn sqlite_pragmas(connection: &mut AnyConnection) -> Result<(), sqlx::Error> {
    connection
        .execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000")
        .await?;
    Ok(())
}

/// A named queue in the `retry_jobs` table: cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct Queue {
    pool: AnyPool,
    engine: Engine,
    name: Arc<str>,
    max_attempts: u32,
}

impl Queue {
    /// Connects to `database` (see [`Location::parse`]) and creates the table, or brings it to
    /// this version.
    pub async fn open(database: &str, name: &str) -> Result<Self, QueueError> {
        let location = Location::parse(database);
        let pool = connect(&location).await?;
        Self::on(pool, location.engine(), name).await
    }

    /// The queue `name` on an open pool; creates the table, or brings it to this version.
    ///
    /// # Errors
    ///
    /// [`QueueError::Schema`] if the database's table is newer than this library's.
    pub async fn on(pool: AnyPool, engine: Engine, name: &str) -> Result<Self, QueueError> {
        let queue = Queue {
            pool,
            engine,
            name: name.into(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        };
        <Generic as Run<Any>>::migrate(&queue.pool, engine.dialect(), &sql::SCHEMA).await?;
        Ok(queue)
    }

    /// The attempts each job enqueued from now on gets before it is dead (at least 1).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The queue's name: jobs of other queues in the same table are never claimed from this one.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The pool, for the caller's own tables in the same database.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    fn sql(&self) -> &'static Statements {
        static SQLITE: LazyLock<Statements> =
            LazyLock::new(|| Statements::new(Engine::Sqlite.dialect()));
        static POSTGRES: LazyLock<Statements> =
            LazyLock::new(|| Statements::new(Engine::Postgres.dialect()));
        match self.engine {
            Engine::Sqlite => &SQLITE,
            Engine::Postgres => &POSTGRES,
        }
    }

    /// A transaction on the queue's database. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so that it never fails halfway for want of it.
    pub async fn begin(&self) -> Result<Tx, QueueError> {
        Ok(self.pool.begin_with(self.engine.dialect().begin).await?)
    }

    /// Enqueues a job for `payload` under `key`, in a transaction of its own.
    pub async fn enqueue<P: Serialize>(
        &self,
        key: &str,
        payload: &P,
    ) -> Result<Enqueued, QueueError> {
        let mut tx = self.begin().await?;
        let enqueued = self.enqueue_in(&mut tx, key, payload).await?;
        tx.commit().await?;
        Ok(enqueued)
    }

    /// Enqueues a job for `payload` under `key` in the caller's transaction, so that it commits
    /// together with the caller's rows, or not at all. The job is available at once.
    ///
    /// A key already in the queue adds nothing: the answer names the job that has it, whatever
    /// its state, so that enqueueing is safe to repeat. The same key with another payload is
    /// [`QueueError::KeyReused`].
    pub async fn enqueue_in<P: Serialize>(
        &self,
        tx: &mut Tx,
        key: &str,
        payload: &P,
    ) -> Result<Enqueued, QueueError> {
        let payload = serde_json::to_string(payload).map_err(QueueError::Codec)?;
        let inserted = sqlx::query(self.sql().enqueue.as_str())
            .bind(&*self.name)
            .bind(key)
            .bind(&payload)
            .bind(i64::from(self.max_attempts))
            .execute(&mut **tx)
            .await?
            .rows_affected();
        let row = sqlx::query(self.sql().find.as_str())
            .bind(&*self.name)
            .bind(key)
            .fetch_one(&mut **tx)
            .await?;
        let stored: String = row.try_get("payload")?;
        if stored != payload {
            return Err(QueueError::KeyReused { key: key.into() });
        }
        Ok(Enqueued {
            job: JobId(row.try_get("id")?),
            new: inserted == 1,
        })
    }

    /// Hands the oldest due job to `worker` for `lease`: an available job whose `run_at` has
    /// come, or a running one whose lease ended (its worker died). `None` when nothing is due.
    pub async fn claim<P: DeserializeOwned>(
        &self,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<Claimed<P>>, QueueError> {
        let token = crate::sql::new_token();
        let Some(row) = sqlx::query(self.sql().claim.as_str())
            .bind(&*self.name)
            .bind(crate::sql::capped_ms(lease))
            .bind(token)
            .bind(worker)
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let id = JobId(row.try_get("id")?);
        let payload: String = row.try_get("payload")?;
        let claim = Claim {
            queue: self.clone(),
            id,
            token,
        };
        let payload = match serde_json::from_str(&payload) {
            Ok(payload) => payload,
            Err(e) => {
                // A payload this build cannot read will not become readable by waiting.
                let error = format!("the payload cannot be read as this worker's job: {e}");
                claim.kill(&error).await?;
                return Err(QueueError::Codec(e));
            }
        };
        Ok(Some(Claimed {
            job: Job {
                id,
                key: row.try_get("key")?,
                payload,
                attempt: count(row.try_get("attempts")?),
                max_attempts: count(row.try_get("max_attempts")?),
            },
            claim,
        }))
    }

    /// Running jobs whose lease ended on their last attempt go dead, with the reason; returns
    /// how many. A worker calls it when it finds nothing to claim.
    pub async fn bury_abandoned(&self) -> Result<u64, QueueError> {
        let buried = sqlx::query(self.sql().bury.as_str())
            .bind(&*self.name)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(buried)
    }

    /// How long until the next available or running job is due: `Some(ZERO)` when one is due
    /// now, `None` when the queue has none (every job is done or dead).
    pub async fn next_due(&self) -> Result<Option<Duration>, QueueError> {
        let row = sqlx::query(self.sql().next_due.as_str())
            .bind(&*self.name)
            .fetch_one(&self.pool)
            .await?;
        let gap: Option<i64> = row.try_get(0)?;
        Ok(gap.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    /// Every job of this queue, oldest first.
    pub async fn jobs(&self) -> Result<Vec<JobRecord>, QueueError> {
        let rows = sqlx::query(self.sql().list.as_str())
            .bind(&*self.name)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let state: String = row.try_get("state")?;
                Ok(JobRecord {
                    id: JobId(row.try_get("id")?),
                    key: row.try_get("key")?,
                    payload: row.try_get("payload")?,
                    state: State::parse(&state)?,
                    attempts: count(row.try_get("attempts")?),
                    max_attempts: count(row.try_get("max_attempts")?),
                    last_error: row.try_get("last_error")?,
                    result: row.try_get("result")?,
                })
            })
            .collect()
    }
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("engine", &self.engine)
            .field("name", &self.name)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

/// A job's number in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What [`Queue::enqueue_in`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enqueued {
    /// The job with the key.
    pub job: JobId,
    /// Whether this call added it (`false`: the key was already in the queue).
    pub new: bool,
}

/// A job as a handler sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job<P> {
    /// Its number.
    pub id: JobId,
    /// The idempotency key it was enqueued with: pass it on to every system the job calls.
    pub key: String,
    /// What it carries.
    pub payload: P,
    /// This attempt's number: 1 for the first claim, one more for each claim after a failed
    /// attempt or an ended lease.
    pub attempt: u32,
    /// The attempts it gets before it is dead.
    pub max_attempts: u32,
}

/// A job this worker holds, and the claim that lets it finish the job.
#[derive(Debug)]
pub struct Claimed<P> {
    /// The job.
    pub job: Job<P>,
    claim: Claim,
}

impl<P> Claimed<P> {
    /// Splits off the claim, which finishes the job, from the job itself.
    pub fn into_parts(self) -> (Job<P>, Claim) {
        (self.job, self.claim)
    }
}

/// The right to finish one job: its id and this claim's token. Every method is refused with
/// [`QueueError::Superseded`] once another worker has taken the job over.
#[derive(Clone)]
pub struct Claim {
    queue: Queue,
    id: JobId,
    token: i64,
}

impl Claim {
    fn sql(&self) -> &'static Statements {
        self.queue.sql()
    }

    /// The job it is for.
    pub fn job(&self) -> JobId {
        self.id
    }

    /// A full `lease` from now.
    pub async fn renew(&self, lease: Duration) -> Result<(), QueueError> {
        let renewed = sqlx::query(self.sql().renew.as_str())
            .bind(self.id.0)
            .bind(self.token)
            .bind(crate::sql::capped_ms(lease))
            .execute(&self.queue.pool)
            .await?
            .rows_affected();
        self.held(renewed)
    }

    /// Done, with `result`, in a transaction of its own.
    pub async fn complete<R: Serialize>(self, result: &R) -> Result<(), QueueError> {
        let tx = self.queue.begin().await?;
        self.complete_in(tx, result).await
    }

    /// Done, with `result`, in `tx`, which holds the handler's own rows; commits. When the job
    /// was taken over, the transaction rolls back, so the handler's rows are undone too.
    pub async fn complete_in<R: Serialize>(self, mut tx: Tx, result: &R) -> Result<(), QueueError> {
        let result = serde_json::to_string(result).map_err(QueueError::Codec)?;
        let completed = sqlx::query(self.sql().complete.as_str())
            .bind(self.id.0)
            .bind(self.token)
            .bind(result)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        // Dropping `tx` without a commit rolls it back.
        self.held(completed)?;
        tx.commit().await?;
        Ok(())
    }

    /// The attempt failed with `error`: available again after `pause`, or dead with the error
    /// when it was the last attempt.
    pub async fn retry_later(self, error: &str, pause: Duration) -> Result<Retried, QueueError> {
        let row = sqlx::query(self.sql().retry.as_str())
            .bind(self.id.0)
            .bind(self.token)
            .bind(crate::sql::capped_ms(pause))
            .bind(error)
            .fetch_optional(&self.queue.pool)
            .await?;
        let Some(row) = row else {
            return Err(QueueError::Superseded { job: self.id });
        };
        let state: String = row.try_get("state")?;
        Ok(if state == "dead" {
            Retried::Dead
        } else {
            Retried::Later
        })
    }

    /// Not now, for a reason that is not the job's (the breaker refused the call, so the service
    /// was never asked): available again after `pause`, and the attempt does not count.
    pub async fn snooze(self, pause: Duration, reason: &str) -> Result<(), QueueError> {
        let snoozed = sqlx::query(self.sql().snooze.as_str())
            .bind(self.id.0)
            .bind(self.token)
            .bind(crate::sql::capped_ms(pause))
            .bind(reason)
            .execute(&self.queue.pool)
            .await?
            .rows_affected();
        self.held(snoozed)
    }

    /// Dead, with `error`: a permanent failure that no retry will get past.
    pub async fn kill(self, error: &str) -> Result<(), QueueError> {
        let killed = sqlx::query(self.sql().kill.as_str())
            .bind(self.id.0)
            .bind(self.token)
            .bind(error)
            .execute(&self.queue.pool)
            .await?
            .rows_affected();
        self.held(killed)
    }

    fn held(&self, rows: u64) -> Result<(), QueueError> {
        if rows == 1 {
            Ok(())
        } else {
            Err(QueueError::Superseded { job: self.id })
        }
    }
}

impl fmt::Debug for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Claim")
            .field("queue", &self.queue.name)
            .field("job", &self.id)
            .finish_non_exhaustive()
    }
}

/// What [`Claim::retry_later`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retried {
    /// Available again after the pause.
    Later,
    /// That was the last attempt: dead, with the error.
    Dead,
}

/// A job's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// Waiting for its `run_at`, or due.
    Available,
    /// Held by a worker until its lease ends.
    Running,
    /// Finished, with a result.
    Done,
    /// Given up on, with the last error: for a person to look at.
    Dead,
}

impl State {
    fn parse(state: &str) -> Result<Self, QueueError> {
        Ok(match state {
            "available" => State::Available,
            "running" => State::Running,
            "done" => State::Done,
            "dead" => State::Dead,
            other => {
                return Err(QueueError::Codec(serde::de::Error::custom(format!(
                    "unknown job state {other:?}"
                ))));
            }
        })
    }
}

/// A job's row, for reports and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    /// Its number.
    pub id: JobId,
    /// Its idempotency key.
    pub key: String,
    /// What it carries, as JSON.
    pub payload: String,
    /// Its state.
    pub state: State,
    /// Claims so far.
    pub attempts: u32,
    /// Attempts it gets.
    pub max_attempts: u32,
    /// Why the last attempt failed, or why it is dead.
    pub last_error: Option<String>,
    /// Done: the result, as JSON.
    pub result: Option<String>,
}

/// Why the queue could not do what was asked.
#[derive(Debug)]
#[non_exhaustive]
pub enum QueueError {
    /// The database could not run a statement (down, busy, or it refused it).
    Database(sqlx::Error),
    /// The job was taken over by another worker after this claim's lease ended (or it was
    /// finished already): nothing was changed, and the caller's transaction was rolled back.
    Superseded {
        /// The job.
        job: JobId,
    },
    /// The key is already in the queue with another payload.
    KeyReused {
        /// The key.
        key: String,
    },
    /// A payload or result could not be converted to or from JSON.
    Codec(serde_json::Error),
    /// The database's table is newer than this library: the message says what to do.
    Schema(String),
}

impl From<MigrateError> for QueueError {
    fn from(error: MigrateError) -> Self {
        match error {
            MigrateError::Database(e) => QueueError::Database(e),
            MigrateError::Newer(message) => QueueError::Schema(message),
        }
    }
}

impl From<sqlx::Error> for QueueError {
    fn from(error: sqlx::Error) -> Self {
        QueueError::Database(error)
    }
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::Database(e) => write!(f, "the job queue's database failed: {e}"),
            QueueError::Superseded { job } => write!(
                f,
                "job {job} was taken over by another worker after this one's lease ended; \
                 nothing was changed"
            ),
            QueueError::KeyReused { key } => write!(
                f,
                "the key {key:?} is already in the queue with another payload; use a new key \
                 for another job"
            ),
            QueueError::Codec(e) => write!(f, "a job's JSON could not be converted: {e}"),
            QueueError::Schema(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for QueueError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QueueError::Database(e) => Some(e),
            QueueError::Codec(e) => Some(e),
            _ => None,
        }
    }
}

/// A database error as `Transient for sqlx::Error` classifies it; the rest will recur.
impl Transient for QueueError {
    fn is_transient(&self) -> bool {
        matches!(self, QueueError::Database(e) if e.is_transient())
    }
}

fn count(value: i64) -> u32 {
    u32::try_from(value).unwrap_or(u32::MAX)
}

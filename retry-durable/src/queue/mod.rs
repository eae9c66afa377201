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
//! [`Queue::on`] (and [`Queue::open`]) creates it, or brings it to this version, in one
//! transaction that processes
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
//! # One database, one transaction type
//!
//! A `Queue<B>` runs on the same typed pool as the idempotency stores (`sqlx::Pool<Sqlite>` or
//! `sqlx::Pool<Postgres>`), and [`Queue::enqueue_in`] takes the same `sqlx::Transaction` a
//! store's [`Guard::transaction`](crate::store::Guard::transaction) hands out, or any other of
//! the caller's: the key's completion, the handler's rows and the job commit together or not at
//! all, as River and Oban insert jobs in the caller's transaction.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use retry_runtime::IdempotencyKey;
//! use retry_durable::queue::Queue;
//! use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, Mode, SqliteStore};
//!
//! # let dir = std::env::temp_dir().join(format!("retry-doc-{}", IdempotencyKey::new()));
//! # std::fs::create_dir_all(&dir)?;
//! let store = SqliteStore::<String>::open(dir.join("payments.db")).await?;
//! store.migrate().await?;
//! let mails = Queue::on(store.pool().clone(), "receipt-mails").await?; // the same pool
//!
//! let key = IdempotencyKey::from("payout-4711");
//! if let Begin::Execute(mut guard) = store.begin_with(Mode::OneCommit, "", &key, Fingerprint::of(b"4711")).await? {
//!     let tx = guard.transaction().await?;
//!     // ... the handler's rows in `tx` ...
//!     mails.enqueue_in(tx, key.as_str(), &"receipt R-1 to hanna@example.com").await?;
//!     guard.complete(&"201 R-1".to_owned()).await?; // the claim, the rows, the job: one commit
//! }
//! assert_eq!(mails.jobs().await?.len(), 1);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```
//!
//! # Delivery
//!
//! Delivery is at least once: a worker that dies after its call to another system and before
//! `complete` commits leaves a job that runs again. The job carries the idempotency key, so that
//! the other system recognises the repeat (the contract service keeps its answers by key), and
//! the handler's own rows commit in the same transaction as the completion
//! ([`Outcome::DoneIn`]), so they are written exactly once.

#![warn(missing_docs)]

mod metrics;
pub(crate) mod sql;
mod worker;

pub use metrics::QueueStats;
pub use worker::{Drained, Outcome, Worker};

use crate::sql::{Backend, MigrateError, Run};
use retry_runtime::Transient;
use serde::Serialize;
use serde::de::DeserializeOwned;
use sql::{RunQueue, Statements};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A transaction on the queue's database (a `sqlx::Transaction`, the type a store's guard
/// hands out too), for the caller's own rows next to a job: the claim that `save_for_later`
/// saves, or the e-mail a worker sends with a result.
pub type Tx<B> = sqlx::Transaction<'static, B>;

/// The queue's statements on engine `B`.
type RunOn<B> = <B as crate::sql::sealed::Engine>::Queue;

/// Attempts a job gets by default before it is dead.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;

/// A database engine, for a program that chooses one at run time ([`Location::engine`]) and then
/// calls code generic over [`Backend`] with `sqlx::Sqlite` or `sqlx::Postgres`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A file on this machine (sqlx's bundled SQLite): no server; processes on this machine
    /// share it.
    Sqlite,
    /// A PostgreSQL database: every replica shares it.
    Postgres,
}

/// Where a queue lives, as a program's command line or environment says it: a PostgreSQL URL,
/// or a SQLite file.
///
/// ```
/// use retry_durable::queue::{Engine, Location};
///
/// assert_eq!(Location::parse("postgres://portal@db/claims").engine(), Engine::Postgres);
/// assert_eq!(Location::parse("/var/lib/portal/queue.db").engine(), Engine::Sqlite);
/// assert_eq!(Location::parse("sqlite:///var/lib/portal/queue.db").engine(), Engine::Sqlite);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A SQLite file, created if it is missing.
    Sqlite(PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl Location {
    /// `postgres://...` or `postgresql://...` is PostgreSQL; a `sqlite:` URL (its path) or
    /// anything else is a SQLite file.
    pub fn parse(database: &str) -> Self {
        if database.starts_with("postgres://") || database.starts_with("postgresql://") {
            return Location::Postgres(database.to_owned());
        }
        let path = database
            .strip_prefix("sqlite://")
            .or_else(|| database.strip_prefix("sqlite:"))
            .unwrap_or(database);
        let path = path.split_once('?').map_or(path, |(path, _)| path);
        Location::Sqlite(PathBuf::from(path))
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        match self {
            Location::Sqlite(_) => Engine::Sqlite,
            Location::Postgres(_) => Engine::Postgres,
        }
    }
}

/// A named queue in the `retry_jobs` table, on engine `B` (`sqlx::Sqlite` or `sqlx::Postgres`):
/// cheap to clone (the pool is shared).
pub struct Queue<B: Backend> {
    pool: sqlx::Pool<B>,
    name: Arc<str>,
    max_attempts: u32,
}

impl<B: Backend> Clone for Queue<B> {
    fn clone(&self) -> Self {
        Queue {
            pool: self.pool.clone(),
            name: Arc::clone(&self.name),
            max_attempts: self.max_attempts,
        }
    }
}

impl<B: Backend> Queue<B> {
    /// The queue `name` on `pool` (the pool of the service's stores and tables, so that a job
    /// can commit with them); creates the table, or brings it to this version.
    ///
    /// # Errors
    ///
    /// [`QueueError::Schema`] if the database's table is newer than this library's.
    pub async fn on(pool: sqlx::Pool<B>, name: &str) -> Result<Self, QueueError> {
        let queue = Queue {
            pool,
            name: name.into(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        };
        <B::Run as Run<B>>::migrate(&queue.pool, B::DIALECT, &sql::SCHEMA).await?;
        Ok(queue)
    }

    /// Opens a pool on `database` the way the stores do (a SQLite file, created if missing, with
    /// write-ahead logging, `synchronous = FULL` and a busy timeout of 5 s; a PostgreSQL URL,
    /// connected on first use, with an acquire timeout of 3 s), then [`on`](Queue::on).
    ///
    /// # Errors
    ///
    /// [`QueueError::Database`] if `database` is not a location of engine `B` (a PostgreSQL URL
    /// for `Queue<Sqlite>`) or cannot be opened.
    pub async fn open(database: &str, name: &str) -> Result<Self, QueueError> {
        let pool = B::connect(&Location::parse(database)).await?;
        Self::on(pool, name).await
    }

    /// The attempts each job enqueued from now on gets before it is dead (at least 1).
    #[must_use]
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The queue's name: jobs of other queues in the same table are never claimed from this one.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The pool, for the caller's own tables in the same database.
    pub fn pool(&self) -> &sqlx::Pool<B> {
        &self.pool
    }

    fn sql(&self) -> &'static Statements {
        Statements::of(B::DIALECT)
    }

    /// A transaction on the queue's database. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so that it never fails halfway for want of it.
    pub async fn begin(&self) -> Result<Tx<B>, QueueError> {
        Ok(self.pool.begin_with(B::DIALECT.begin).await?)
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

    /// Enqueues a job for `payload` under `key` in the caller's transaction (a store guard's,
    /// or any other on the queue's database), so that it commits together with the caller's
    /// rows, or not at all. The job is available once that transaction commits.
    ///
    /// A key already in the queue adds nothing: the answer names the job that has it, whatever
    /// its state, so that enqueueing is safe to repeat. The same key with another payload is
    /// [`QueueError::KeyReused`].
    pub async fn enqueue_in<P: Serialize>(
        &self,
        tx: &mut sqlx::Transaction<'_, B>,
        key: &str,
        payload: &P,
    ) -> Result<Enqueued, QueueError> {
        let payload = serde_json::to_string(payload).map_err(QueueError::Codec)?;
        let (new, id, stored) = RunOn::<B>::enqueue_in(
            &mut **tx,
            self.sql(),
            &self.name,
            key,
            &payload,
            i64::from(self.max_attempts),
        )
        .await?;
        if stored != payload {
            return Err(QueueError::KeyReused { key: key.into() });
        }
        Ok(Enqueued {
            job: JobId(id),
            new,
        })
    }

    /// Hands the oldest due job to `worker` for `lease`: an available job whose `run_at` has
    /// come, or a running one whose lease ended (its worker died). `None` when nothing is due.
    pub async fn claim<P: DeserializeOwned>(
        &self,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<Claimed<P, B>>, QueueError> {
        let token = crate::sql::new_token();
        let lease = crate::sql::capped_ms(lease);
        let claimed =
            RunOn::<B>::claim(&self.pool, self.sql(), &self.name, lease, token, worker).await?;
        let Some((id, key, payload, attempts, max_attempts)) = claimed else {
            return Ok(None);
        };
        let id = JobId(id);
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
                key,
                payload,
                attempt: count(attempts),
                max_attempts: count(max_attempts),
            },
            claim,
        }))
    }

    /// Running jobs whose lease ended on their last attempt go dead, with the reason; returns
    /// how many. A worker calls it when it finds nothing to claim.
    pub async fn bury_abandoned(&self) -> Result<u64, QueueError> {
        Ok(RunOn::<B>::on_queue(&self.pool, &self.sql().bury, &self.name).await?)
    }

    /// How long until the next available or running job is due: `Some(ZERO)` when one is due
    /// now, `None` when the queue has none (every job is done or dead).
    pub async fn next_due(&self) -> Result<Option<Duration>, QueueError> {
        let (_, gap) = RunOn::<B>::numbers(&self.pool, &self.sql().next_due, &self.name).await?;
        Ok(gap.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))))
    }

    /// Every job of this queue, oldest first.
    pub async fn jobs(&self) -> Result<Vec<JobRecord>, QueueError> {
        let rows = RunOn::<B>::list(&self.pool, self.sql(), &self.name).await?;
        rows.into_iter()
            .map(
                |(id, key, payload, state, attempts, max_attempts, last_error, result)| {
                    Ok(JobRecord {
                        id: JobId(id),
                        key,
                        payload,
                        state: State::parse(&state)?,
                        attempts: count(attempts),
                        max_attempts: count(max_attempts),
                        last_error,
                        result,
                    })
                },
            )
            .collect()
    }
}

impl<B: Backend> fmt::Debug for Queue<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("engine", &B::LABEL)
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
pub struct Claimed<P, B: Backend> {
    /// The job.
    pub job: Job<P>,
    claim: Claim<B>,
}

impl<P, B: Backend> Claimed<P, B> {
    /// Splits off the claim, which finishes the job, from the job itself.
    pub fn into_parts(self) -> (Job<P>, Claim<B>) {
        (self.job, self.claim)
    }
}

/// The right to finish one job: its id and this claim's token. Every method is refused with
/// [`QueueError::Superseded`] once another worker has taken the job over.
pub struct Claim<B: Backend> {
    queue: Queue<B>,
    id: JobId,
    token: i64,
}

impl<B: Backend> Clone for Claim<B> {
    fn clone(&self) -> Self {
        Claim {
            queue: self.queue.clone(),
            id: self.id,
            token: self.token,
        }
    }
}

impl<B: Backend> Claim<B> {
    fn sql(&self) -> &'static Statements {
        self.queue.sql()
    }

    /// The job it is for.
    pub fn job(&self) -> JobId {
        self.id
    }

    /// A full `lease` from now.
    pub async fn renew(&self, lease: Duration) -> Result<(), QueueError> {
        let lease = crate::sql::capped_ms(lease);
        let renewed = self.change(&self.sql().renew, Some(lease), None).await?;
        self.held(renewed)
    }

    /// Done, with `result`, in a transaction of its own.
    pub async fn complete<R: Serialize>(self, result: &R) -> Result<(), QueueError> {
        let tx = self.queue.begin().await?;
        self.complete_in(tx, result).await
    }

    /// Done, with `result`, in `tx`, which holds the handler's own rows; commits. When the job
    /// was taken over, the transaction rolls back, so the handler's rows are undone too.
    pub async fn complete_in<R: Serialize>(
        self,
        mut tx: Tx<B>,
        result: &R,
    ) -> Result<(), QueueError> {
        let result = serde_json::to_string(result).map_err(QueueError::Codec)?;
        let completed =
            RunOn::<B>::complete_in(&mut *tx, self.sql(), self.id.0, self.token, &result).await?;
        // Dropping `tx` without a commit rolls it back.
        self.held(completed)?;
        tx.commit().await?;
        Ok(())
    }

    /// The attempt failed with `error`: available again after `pause`, or dead with the error
    /// when it was the last attempt.
    pub async fn retry_later(self, error: &str, pause: Duration) -> Result<Retried, QueueError> {
        let pause = crate::sql::capped_ms(pause);
        let state = RunOn::<B>::retry(
            &self.queue.pool,
            self.sql(),
            self.id.0,
            self.token,
            pause,
            error,
        )
        .await?;
        match state.as_deref() {
            None => Err(QueueError::Superseded { job: self.id }),
            Some("dead") => Ok(Retried::Dead),
            Some(_) => Ok(Retried::Later),
        }
    }

    /// Not now, for a reason that is not the job's (the breaker refused the call, so the service
    /// was never asked): available again after `pause`, and the attempt does not count.
    pub async fn snooze(self, pause: Duration, reason: &str) -> Result<(), QueueError> {
        let pause = crate::sql::capped_ms(pause);
        let snoozed = self
            .change(&self.sql().snooze, Some(pause), Some(reason))
            .await?;
        self.held(snoozed)
    }

    /// Dead, with `error`: a permanent failure that no retry will get past.
    pub async fn kill(self, error: &str) -> Result<(), QueueError> {
        let killed = self.change(&self.sql().kill, None, Some(error)).await?;
        self.held(killed)
    }

    async fn change(
        &self,
        statement: &'static str,
        number: Option<i64>,
        text: Option<&str>,
    ) -> Result<u64, sqlx::Error> {
        RunOn::<B>::change(
            &self.queue.pool,
            statement,
            self.id.0,
            self.token,
            (number, text),
        )
        .await
    }

    fn held(&self, rows: u64) -> Result<(), QueueError> {
        if rows == 1 {
            Ok(())
        } else {
            Err(QueueError::Superseded { job: self.id })
        }
    }
}

impl<B: Backend> fmt::Debug for Claim<B> {
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

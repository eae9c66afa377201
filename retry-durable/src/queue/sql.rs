//! The queue's statements, written once and rendered for each engine by the SQL layer
//! ([`render`]): the two differ only in the schema's types, in how the database reads its
//! clock, and in `FOR UPDATE SKIP LOCKED`, which PostgreSQL needs so that workers on several
//! replicas skip each other's rows instead of waiting for them (SQLite has one writer at a
//! time, so one claiming statement never races another).
//!
//! Every time is milliseconds since the Unix epoch from the database's clock, never from the
//! process's: on PostgreSQL every replica then agrees on when a lease ended, whatever its own
//! clock says.

use crate::sql::{Affected, Dialect, Generic, Schema, render};
use sqlx::{Pool, Row};
use std::future::Future;
use std::sync::LazyLock;

/// The table, version by version. Version 1 is the table that the queue created before it had
/// versions (`CREATE … IF NOT EXISTS`), so a database made then is adopted as it is.
pub(super) const SCHEMA: Schema = Schema {
    what: "the job queue",
    table: "retry_jobs",
    versions: "retry_jobs_schema",
    migrations: &["
CREATE TABLE IF NOT EXISTS retry_jobs (
    id           {serial},
    queue        TEXT  NOT NULL,
    key          TEXT  NOT NULL,
    payload      TEXT  NOT NULL,
    state        TEXT  NOT NULL CHECK (state IN ('available', 'running', 'done', 'dead')),
    attempts     {int} NOT NULL,
    max_attempts {int} NOT NULL,
    run_at       {int} NOT NULL,
    token        {int},
    worker       TEXT,
    last_error   TEXT,
    result       TEXT,
    created_at   {int} NOT NULL,
    finished_at  {int},
    UNIQUE (queue, key)
);
CREATE INDEX IF NOT EXISTS retry_jobs_due ON retry_jobs (queue, run_at)
    WHERE state IN ('available', 'running');
"],
};

/// One engine's statements.
#[derive(Debug)]
pub struct Statements {
    /// `$1` queue, `$2` key, `$3` payload, `$4` max attempts: a new available job, or nothing
    /// when the key is already in the queue.
    pub(super) enqueue: String,
    /// `$1` queue, `$2` key: the job with this key.
    pub(super) find: String,
    /// `$1` queue, `$2` lease in ms, `$3` token, `$4` worker: hands the oldest due job (available
    /// and due, or running with its lease ended) to this worker, counting the attempt.
    pub(super) claim: String,
    /// `$1` queue: running jobs whose lease ended on their last attempt go dead.
    pub(super) bury: String,
    /// `$1` id, `$2` token, `$3` lease in ms: a full lease from now, if the token still holds.
    pub(super) renew: String,
    /// `$1` id, `$2` token, `$3` result: done, if the token still holds.
    pub(super) complete: String,
    /// `$1` id, `$2` token, `$3` pause in ms, `$4` error: available again after the pause, or
    /// dead with the error when that was the last attempt.
    pub(super) retry: String,
    /// `$1` id, `$2` token, `$3` pause in ms, `$4` reason: available again after the pause, the
    /// attempt given back.
    pub(super) snooze: String,
    /// `$1` id, `$2` token, `$3` error: dead.
    pub(super) kill: String,
    /// `$1` queue: milliseconds until the next available or running job is due (negative when
    /// overdue), NULL when there is none.
    pub(super) next_due: String,
    /// `$1` queue: every job, oldest first.
    pub(super) list: String,
    /// `$1` queue: the waiting jobs, and the earliest `run_at` against the clock.
    pub(super) observe: String,
}

impl Statements {
    /// The statements in `dialect` (one of the layer's two), rendered on first use.
    pub fn of(dialect: &'static Dialect) -> &'static Self {
        static SQLITE: LazyLock<Statements> =
            LazyLock::new(|| Statements::new(&crate::sql::SQLITE));
        static POSTGRES: LazyLock<Statements> =
            LazyLock::new(|| Statements::new(&crate::sql::POSTGRES));
        if std::ptr::eq(dialect, &crate::sql::SQLITE) {
            &SQLITE
        } else {
            &POSTGRES
        }
    }

    fn new(dialect: &Dialect) -> Self {
        let sql = |template: &str| render(template, dialect);
        Statements {
            enqueue: sql(
                "INSERT INTO retry_jobs (queue, key, payload, state, attempts, max_attempts, run_at, created_at) \
                 VALUES ($1, $2, $3, 'available', 0, $4, {clock}, {clock}) \
                 ON CONFLICT (queue, key) DO NOTHING",
            ),
            find: sql("SELECT id, payload FROM retry_jobs WHERE queue = $1 AND key = $2"),
            claim: sql("UPDATE retry_jobs \
                 SET state = 'running', attempts = attempts + 1, run_at = {clock} + $2, \
                     token = $3, worker = $4 \
                 WHERE id IN ( \
                     SELECT id FROM retry_jobs \
                     WHERE queue = $1 AND state IN ('available', 'running') AND run_at <= {clock} \
                       AND attempts < max_attempts \
                     ORDER BY run_at, id \
                     LIMIT 1 {skip_locked}) \
                 RETURNING id, key, payload, attempts, max_attempts"),
            bury: sql("UPDATE retry_jobs \
                 SET state = 'dead', token = NULL, finished_at = {clock}, \
                     last_error = 'the lease of its last attempt ended without an outcome (the \
                     worker stopped or died)' || COALESCE('; the attempt before failed: ' || last_error, '') \
                 WHERE queue = $1 AND state = 'running' AND run_at <= {clock} AND attempts >= max_attempts"),
            renew: sql("UPDATE retry_jobs SET run_at = {clock} + $3 \
                 WHERE id = $1 AND token = $2 AND state = 'running'"),
            complete: sql(
                "UPDATE retry_jobs SET state = 'done', result = $3, token = NULL, finished_at = {clock} \
                 WHERE id = $1 AND token = $2 AND state = 'running'",
            ),
            retry: sql("UPDATE retry_jobs \
                 SET state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'available' END, \
                     finished_at = CASE WHEN attempts >= max_attempts THEN {clock} END, \
                     run_at = {clock} + $3, token = NULL, last_error = $4 \
                 WHERE id = $1 AND token = $2 AND state = 'running' \
                 RETURNING state"),
            snooze: sql("UPDATE retry_jobs \
                 SET state = 'available', attempts = attempts - 1, run_at = {clock} + $3, \
                     token = NULL, last_error = $4 \
                 WHERE id = $1 AND token = $2 AND state = 'running'"),
            kill: sql(
                "UPDATE retry_jobs SET state = 'dead', token = NULL, last_error = $3, finished_at = {clock} \
                 WHERE id = $1 AND token = $2 AND state = 'running'",
            ),
            next_due: sql("SELECT MIN(run_at) - {clock} FROM retry_jobs \
                 WHERE queue = $1 AND state IN ('available', 'running')"),
            list: sql(
                "SELECT id, key, payload, state, attempts, max_attempts, last_error, result \
                 FROM retry_jobs WHERE queue = $1 ORDER BY id",
            ),
            observe: sql("SELECT COUNT(*), MIN(run_at) - {clock} \
                 FROM retry_jobs WHERE queue = $1 AND state = 'available'"),
        }
    }
}

/// A claimed job's row: id, key, payload, attempts, max attempts.
pub type ClaimedRow = (i64, String, String, i64, i64);

/// A job's row as [`super::Queue::jobs`] lists it: id, key, payload, state, attempts, max
/// attempts, last error, result.
pub type JobRow = (
    i64,
    String,
    String,
    String,
    i64,
    i64,
    Option<String>,
    Option<String>,
);

/// The queue's statements on one driver, written once ([`Generic`] for every driver that has
/// what they need), as the stores' are ([`crate::sql::Run`]).
pub trait RunQueue<DB: sqlx::Database> {
    /// Enqueues in the caller's transaction, then reads the job with the key: whether this
    /// statement added it, its id and its stored payload.
    fn enqueue_in(
        connection: &mut DB::Connection,
        sql: &'static Statements,
        queue: &str,
        key: &str,
        payload: &str,
        max_attempts: i64,
    ) -> impl Future<Output = Result<(bool, i64, String), sqlx::Error>> + Send;

    /// Hands the oldest due job to `worker`.
    fn claim(
        pool: &Pool<DB>,
        sql: &'static Statements,
        queue: &str,
        lease: i64,
        token: i64,
        worker: &str,
    ) -> impl Future<Output = Result<Option<ClaimedRow>, sqlx::Error>> + Send;

    /// A statement on one job of its holder (`$1` id, `$2` token, then `rest`): the rows it
    /// changed.
    fn change(
        pool: &Pool<DB>,
        statement: &'static str,
        id: i64,
        token: i64,
        rest: (Option<i64>, Option<&str>),
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Completes the job in the caller's transaction: the rows it changed.
    fn complete_in(
        connection: &mut DB::Connection,
        sql: &'static Statements,
        id: i64,
        token: i64,
        result: &str,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// The retry statement: the job's new state, or `None` when the token no longer holds it.
    fn retry(
        pool: &Pool<DB>,
        sql: &'static Statements,
        id: i64,
        token: i64,
        pause: i64,
        error: &str,
    ) -> impl Future<Output = Result<Option<String>, sqlx::Error>> + Send;

    /// A statement on the whole queue (`$1` queue): the rows it changed.
    fn on_queue(
        pool: &Pool<DB>,
        statement: &'static str,
        queue: &str,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Two numbers about the queue (`$1` queue): the first column (if the statement has two)
    /// and the last, `NULL` as `None`.
    fn numbers(
        pool: &Pool<DB>,
        statement: &'static str,
        queue: &str,
    ) -> impl Future<Output = Result<(Option<i64>, Option<i64>), sqlx::Error>> + Send;

    /// Every job of the queue, oldest first.
    fn list(
        pool: &Pool<DB>,
        sql: &'static Statements,
        queue: &str,
    ) -> impl Future<Output = Result<Vec<JobRow>, sqlx::Error>> + Send;
}

impl<DB> RunQueue<DB> for Generic
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<i64>: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<&'q str>: sqlx::Encode<'q, DB>,
    for<'q> String: sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<String>: sqlx::Decode<'q, DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    DB::QueryResult: Affected,
{
    async fn enqueue_in(
        connection: &mut DB::Connection,
        sql: &'static Statements,
        queue: &str,
        key: &str,
        payload: &str,
        max_attempts: i64,
    ) -> Result<(bool, i64, String), sqlx::Error> {
        let inserted = sqlx::query(sql.enqueue.as_str())
            .bind(queue)
            .bind(key)
            .bind(payload)
            .bind(max_attempts)
            .execute(&mut *connection)
            .await?
            .rows();
        let row = sqlx::query(sql.find.as_str())
            .bind(queue)
            .bind(key)
            .fetch_one(&mut *connection)
            .await?;
        Ok((inserted == 1, row.try_get(0)?, row.try_get(1)?))
    }

    async fn claim(
        pool: &Pool<DB>,
        sql: &'static Statements,
        queue: &str,
        lease: i64,
        token: i64,
        worker: &str,
    ) -> Result<Option<ClaimedRow>, sqlx::Error> {
        let row = sqlx::query(sql.claim.as_str())
            .bind(queue)
            .bind(lease)
            .bind(token)
            .bind(worker)
            .fetch_optional(pool)
            .await?;
        row.map(|row| {
            Ok((
                row.try_get(0)?,
                row.try_get(1)?,
                row.try_get(2)?,
                row.try_get(3)?,
                row.try_get(4)?,
            ))
        })
        .transpose()
    }

    async fn change(
        pool: &Pool<DB>,
        statement: &'static str,
        id: i64,
        token: i64,
        (number, text): (Option<i64>, Option<&str>),
    ) -> Result<u64, sqlx::Error> {
        let mut query = sqlx::query(statement).bind(id).bind(token);
        if let Some(number) = number {
            query = query.bind(number);
        }
        if let Some(text) = text {
            query = query.bind(text);
        }
        Ok(query.execute(pool).await?.rows())
    }

    async fn complete_in(
        connection: &mut DB::Connection,
        sql: &'static Statements,
        id: i64,
        token: i64,
        result: &str,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(sql.complete.as_str())
            .bind(id)
            .bind(token)
            .bind(result)
            .execute(connection)
            .await?;
        Ok(done.rows())
    }

    async fn retry(
        pool: &Pool<DB>,
        sql: &'static Statements,
        id: i64,
        token: i64,
        pause: i64,
        error: &str,
    ) -> Result<Option<String>, sqlx::Error> {
        let row = sqlx::query(sql.retry.as_str())
            .bind(id)
            .bind(token)
            .bind(pause)
            .bind(error)
            .fetch_optional(pool)
            .await?;
        row.map(|row| row.try_get(0)).transpose()
    }

    async fn on_queue(
        pool: &Pool<DB>,
        statement: &'static str,
        queue: &str,
    ) -> Result<u64, sqlx::Error> {
        Ok(sqlx::query(statement)
            .bind(queue)
            .execute(pool)
            .await?
            .rows())
    }

    async fn numbers(
        pool: &Pool<DB>,
        statement: &'static str,
        queue: &str,
    ) -> Result<(Option<i64>, Option<i64>), sqlx::Error> {
        let row = sqlx::query(statement).bind(queue).fetch_one(pool).await?;
        let last = row.len() - 1;
        let first = if last > 0 { row.try_get(0)? } else { None };
        Ok((first, row.try_get(last)?))
    }

    async fn list(
        pool: &Pool<DB>,
        sql: &'static Statements,
        queue: &str,
    ) -> Result<Vec<JobRow>, sqlx::Error> {
        let rows = sqlx::query(sql.list.as_str())
            .bind(queue)
            .fetch_all(pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get(0)?,
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                    row.try_get(4)?,
                    row.try_get(5)?,
                    row.try_get(6)?,
                    row.try_get(7)?,
                ))
            })
            .collect()
    }
}

//! The queue's statements, written once and rendered for each engine by the SQL layer
//! ([`render`]): the two differ only in the schema's types, in how the database reads its
//! clock, and in `FOR UPDATE SKIP LOCKED`, which PostgreSQL needs so that workers on several
//! replicas skip each other's rows instead of waiting for them (SQLite has one writer at a
//! time, so one claiming statement never races another).
//!
//! Every time is milliseconds since the Unix epoch from the database's clock, never from the
//! process's: on PostgreSQL every replica then agrees on when a lease ended, whatever its own
//! clock says.

use crate::sql::{Dialect, Schema, render};

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
pub(super) struct Statements {
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
}

impl Statements {
    pub(super) fn new(dialect: &Dialect) -> Self {
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
        }
    }
}

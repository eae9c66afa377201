//! The queue's statements, written once and instantiated per engine: the two differ only in
//! the schema's types, in how the database reads its clock, and in `FOR UPDATE SKIP LOCKED`,
//! which PostgreSQL needs so that workers on several replicas skip each other's rows instead of
//! waiting for them (SQLite has one writer at a time, so one claiming statement never races
//! another).
//!
//! Every time is milliseconds since the Unix epoch from the database's clock, never from the
//! process's: on PostgreSQL every replica then agrees on when a lease ended, whatever its own
//! clock says. Parameters are `$1`, `$2`, ... in both dialects (sqlx numbers SQLite's `$N` as
//! PostgreSQL does).

/// One engine's statements.
#[derive(Debug)]
pub(super) struct Statements {
    /// Creates the table and its index; idempotent, and serialized between processes that start
    /// together.
    pub(super) schema: &'static str,
    /// `$1` queue, `$2` key, `$3` payload, `$4` max attempts: a new available job, or nothing
    /// when the key is already in the queue.
    pub(super) enqueue: &'static str,
    /// `$1` queue, `$2` key: the job with this key.
    pub(super) find: &'static str,
    /// `$1` queue, `$2` lease in ms, `$3` token, `$4` worker: hands the oldest due job (available
    /// and due, or running with its lease ended) to this worker, counting the attempt.
    pub(super) claim: &'static str,
    /// `$1` queue: running jobs whose lease ended on their last attempt go dead.
    pub(super) bury: &'static str,
    /// `$1` id, `$2` token, `$3` lease in ms: a full lease from now, if the token still holds.
    pub(super) renew: &'static str,
    /// `$1` id, `$2` token, `$3` result: done, if the token still holds.
    pub(super) complete: &'static str,
    /// `$1` id, `$2` token, `$3` pause in ms, `$4` error: available again after the pause, or
    /// dead with the error when that was the last attempt.
    pub(super) retry: &'static str,
    /// `$1` id, `$2` token, `$3` pause in ms, `$4` reason: available again after the pause, the
    /// attempt given back.
    pub(super) snooze: &'static str,
    /// `$1` id, `$2` token, `$3` error: dead.
    pub(super) kill: &'static str,
    /// `$1` queue: milliseconds until the next available or running job is due (negative when
    /// overdue), NULL when there is none.
    pub(super) next_due: &'static str,
    /// `$1` queue: every job, oldest first.
    pub(super) list: &'static str,
}

/// The statements, with `$now` the engine's expression for the current time in milliseconds and
/// `$skip_locked` what follows the claim's row selection.
macro_rules! statements {
    (schema: $schema:expr, now: $now:literal, skip_locked: $skip_locked:literal $(,)?) => {
        Statements {
            schema: $schema,
            enqueue: concat!(
                "INSERT INTO retry_jobs (queue, key, payload, state, attempts, max_attempts, run_at, created_at) \
                 VALUES ($1, $2, $3, 'available', 0, $4, ", $now, ", ", $now, ") \
                 ON CONFLICT (queue, key) DO NOTHING"
            ),
            find: "SELECT id, payload FROM retry_jobs WHERE queue = $1 AND key = $2",
            claim: concat!(
                "UPDATE retry_jobs \
                 SET state = 'running', attempts = attempts + 1, run_at = ", $now, " + $2, \
                     token = $3, worker = $4 \
                 WHERE id IN ( \
                     SELECT id FROM retry_jobs \
                     WHERE queue = $1 AND state IN ('available', 'running') AND run_at <= ", $now, " \
                       AND attempts < max_attempts \
                     ORDER BY run_at, id \
                     LIMIT 1 ", $skip_locked, ") \
                 RETURNING id, key, payload, attempts, max_attempts"
            ),
            bury: concat!(
                "UPDATE retry_jobs \
                 SET state = 'dead', token = NULL, finished_at = ", $now, ", \
                     last_error = 'the lease of its last attempt ended without an outcome (the \
                     worker stopped or died)' || COALESCE('; the attempt before failed: ' || last_error, '') \
                 WHERE queue = $1 AND state = 'running' AND run_at <= ", $now, " AND attempts >= max_attempts"
            ),
            renew: concat!(
                "UPDATE retry_jobs SET run_at = ", $now, " + $3 \
                 WHERE id = $1 AND token = $2 AND state = 'running'"
            ),
            complete: concat!(
                "UPDATE retry_jobs SET state = 'done', result = $3, token = NULL, finished_at = ", $now, " \
                 WHERE id = $1 AND token = $2 AND state = 'running'"
            ),
            retry: concat!(
                "UPDATE retry_jobs \
                 SET state = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'available' END, \
                     finished_at = CASE WHEN attempts >= max_attempts THEN ", $now, " END, \
                     run_at = ", $now, " + $3, token = NULL, last_error = $4 \
                 WHERE id = $1 AND token = $2 AND state = 'running' \
                 RETURNING state"
            ),
            snooze: concat!(
                "UPDATE retry_jobs \
                 SET state = 'available', attempts = attempts - 1, run_at = ", $now, " + $3, \
                     token = NULL, last_error = $4 \
                 WHERE id = $1 AND token = $2 AND state = 'running'"
            ),
            kill: concat!(
                "UPDATE retry_jobs SET state = 'dead', token = NULL, last_error = $3, finished_at = ", $now, " \
                 WHERE id = $1 AND token = $2 AND state = 'running'"
            ),
            next_due: concat!(
                "SELECT MIN(run_at) - ", $now, " FROM retry_jobs \
                 WHERE queue = $1 AND state IN ('available', 'running')"
            ),
            list: "SELECT id, key, payload, state, attempts, max_attempts, last_error, result \
                   FROM retry_jobs WHERE queue = $1 ORDER BY id",
        }
    };
}

/// The table on SQLite. `BEGIN IMMEDIATE` takes the write lock first, so two processes that
/// start together create it one after the other.
pub(super) const SQLITE: Statements = statements! {
    schema: "BEGIN IMMEDIATE;
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
COMMIT;",
    now: "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
    skip_locked: "",
};

/// The table on PostgreSQL. The statements run as one implicit transaction that holds an
/// advisory lock, so replicas that start together create it one after the other.
pub(super) const POSTGRES: Statements = statements! {
    schema: "SELECT pg_advisory_xact_lock(7411);
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
    WHERE state IN ('available', 'running');",
    now: "CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000 AS BIGINT)",
    skip_locked: "FOR UPDATE SKIP LOCKED",
};

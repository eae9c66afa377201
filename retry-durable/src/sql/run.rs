//! The statements, written once over any sqlx driver that encodes and decodes what they use
//! ([`Run`], implemented by [`Generic`] for every such driver): the versioned migration that the
//! stores and the queue share, and the statements of the idempotency stores.

use super::{Dialect, MigrateError, Schema, render, retry_own_statement};
use crate::store::{BoxFuture, Claim, Mode};
use retry_runtime::retry;
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Pool, Row, Transaction};
use std::future::Future;
use std::sync::LazyLock;

/// The store's table, version by version (see `SqliteStore`'s and `PostgresStore`'s docs).
pub const STORE_SCHEMA: Schema = Schema {
    what: "the idempotency store",
    table: "retry_idempotency_keys",
    versions: "retry_idempotency_schema",
    migrations: &["
CREATE TABLE retry_idempotency_keys (
    scope        TEXT  NOT NULL,
    key          TEXT  NOT NULL,
    fingerprint  {int} NOT NULL,
    state        TEXT  NOT NULL CHECK (state IN ('running', 'completed')),
    claim        {int} NOT NULL,
    token        {int} NOT NULL,
    claimed_at   {int} NOT NULL,
    lease_until  {int},
    completed_at {int},
    expires_at   {int} NOT NULL,
    response     {blob},
    PRIMARY KEY (scope, key)
);
CREATE INDEX retry_idempotency_keys_expires_at ON retry_idempotency_keys (expires_at);
"],
};

/// Now in milliseconds, as the CTE `now`: `$n` when the store has an injected clock, else the
/// database's.
fn now(param: &str) -> String {
    format!("WITH now AS (SELECT COALESCE(CAST({param} AS BIGINT), {{clock}}) AS ms)")
}

/// The claim, after `now`: a new row, the same claim again (a statement retried after its
/// answer was lost, recognised by its token), or the takeover of a free row (its TTL has passed,
/// or it is running with an ended lease and the same fingerprint). `$1` scope, `$2` key, `$3`
/// fingerprint, `$4` token, `$6` lease, `$7` TTL. (A transactional claim's token is new to the
/// table, so there the first case never holds.)
///
/// A row that the statement's snapshot shows taken (completed, running under its lease, another
/// payload) is not inserted against at all (`{unless_taken}`): `ON CONFLICT DO UPDATE` locks the
/// conflicting row even when its `WHERE` refuses the update, and on PostgreSQL that lock gives
/// the statement a transaction id and its commit a flushed WAL record. So a replay takes no row
/// lock and writes no WAL; a row that is free or missing in the snapshot is claimed as before,
/// and `ON CONFLICT` decides against the newest committed row.
const CLAIM: &str = "
INSERT INTO retry_idempotency_keys AS k
    (scope, key, fingerprint, state, claim, token, claimed_at, lease_until, completed_at,
     expires_at, response)
SELECT $1, $2, $3, 'running', 1, $4, now.ms, now.ms + $6, NULL, now.ms + $6 + $7, NULL
FROM now WHERE NOT EXISTS (
    SELECT 1 FROM retry_idempotency_keys WHERE scope = $1 AND key = $2 AND NOT {unless_taken})
ON CONFLICT (scope, key) DO UPDATE SET
    fingerprint = excluded.fingerprint,
    state = 'running',
    claim = CASE WHEN k.token = excluded.token THEN k.claim ELSE k.claim + 1 END,
    token = excluded.token,
    claimed_at = excluded.claimed_at,
    lease_until = excluded.lease_until,
    completed_at = NULL,
    expires_at = excluded.expires_at,
    response = NULL
WHERE k.token = excluded.token
   OR k.expires_at <= excluded.claimed_at
   OR (k.state = 'running' AND k.lease_until <= excluded.claimed_at
       AND k.fingerprint = excluded.fingerprint)
RETURNING claim";

/// Whether a row may be claimed at `now.ms` by a claim with these fingerprint and token (the
/// claim's `WHERE`): a claim retried after its answer was lost finds its own row free.
fn free(fingerprint: &str, token: &str) -> String {
    format!(
        "(token = {token} OR expires_at <= now.ms OR (state = 'running' \
         AND lease_until <= now.ms AND fingerprint = {fingerprint}))"
    )
}

/// The store's statements in one dialect.
#[derive(Debug)]
pub struct StoreStatements {
    /// The claim alone; `$5` the injected time.
    claim: String,
    /// Where a statement may write in a CTE: the claim, and when it claimed nothing the row as
    /// this statement's snapshot has it, if that row is not free. One round trip.
    claim_or_read: Option<String>,
    /// `$1` scope, `$2` key, `$3` injected time, `$4` fingerprint, `$5` token: the row and
    /// whether it is free.
    read: String,
    /// `$1` scope, `$2` key, `$3` token, `$4` response, `$5` injected time, `$6` TTL.
    complete: String,
    /// The one-commit mode's completion: `$1` to `$5` as in `complete`. Its claim set the
    /// expiry already (the claim and the completion are one transaction), so it changes no
    /// indexed column, and on PostgreSQL the update is a heap-only tuple (no index entries, less
    /// WAL).
    complete_once: String,
    /// `$1` scope, `$2` key, `$3` token, `$4` injected time, `$5` lease, `$6` TTL.
    renew: String,
    /// `$1` scope, `$2` key, `$3` token: whether the token holds the key.
    holds: String,
    /// `$1` scope, `$2` key, `$3` token: deletes the claim's running row.
    release: String,
    /// `$1` injected time, `$2` batch: deletes expired rows. The time is read once (on
    /// PostgreSQL an init plan), so that the index on `expires_at` serves the scan.
    purge: String,
}

impl StoreStatements {
    /// The statements in `dialect` (one of the layer's two), rendered on first use.
    pub fn of(dialect: &'static Dialect) -> &'static Self {
        static SQLITE: LazyLock<StoreStatements> =
            LazyLock::new(|| StoreStatements::new(&super::SQLITE));
        static POSTGRES: LazyLock<StoreStatements> =
            LazyLock::new(|| StoreStatements::new(&super::POSTGRES));
        if std::ptr::eq(dialect, &super::SQLITE) {
            &SQLITE
        } else {
            &POSTGRES
        }
    }

    fn new(dialect: &Dialect) -> Self {
        let claim = CLAIM.replace("{unless_taken}", &free("$3", "$4"));
        let claim_or_read = format!(
            "{now}, claimed AS ({claim})
SELECT TRUE AS claimed, claim, NULL::BIGINT AS fingerprint, NULL::TEXT AS state,
       NULL::BYTEA AS response
FROM claimed
UNION ALL
SELECT FALSE, claim, fingerprint, state, response
FROM retry_idempotency_keys, now
WHERE scope = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM claimed) AND NOT {free}",
            now = now("$5"),
            free = free("$3", "$4"),
        );
        let statements = [
            format!("{} {claim}", now("$5")),
            format!(
                "{} SELECT fingerprint, state, response, {} AS free
FROM retry_idempotency_keys, now WHERE scope = $1 AND key = $2",
                now("$3"),
                free("$4", "$5")
            ),
            format!(
                "{} UPDATE retry_idempotency_keys
SET state = 'completed', response = $4, completed_at = now.ms, lease_until = NULL,
    expires_at = now.ms + $6
FROM now WHERE scope = $1 AND key = $2 AND token = $3",
                now("$5")
            ),
            format!(
                "{} UPDATE retry_idempotency_keys
SET state = 'completed', response = $4, completed_at = now.ms, lease_until = NULL
FROM now WHERE scope = $1 AND key = $2 AND token = $3",
                now("$5")
            ),
            format!(
                "{} UPDATE retry_idempotency_keys
SET lease_until = now.ms + $5, expires_at = now.ms + $5 + $6
FROM now WHERE scope = $1 AND key = $2 AND token = $3 AND state = 'running'",
                now("$4")
            ),
            format!(
                "{} DELETE FROM retry_idempotency_keys WHERE (scope, key) IN (
    SELECT scope, key FROM retry_idempotency_keys
    WHERE expires_at <= (SELECT ms FROM now) LIMIT $2 {{skip_locked}})",
                now("$1")
            ),
        ]
        .map(|template| render(&template, dialect));
        let [claim, read, complete, complete_once, renew, purge] = statements;
        StoreStatements {
            claim,
            claim_or_read: dialect
                .writes_in_cte
                .then(|| render(&claim_or_read, dialect)),
            read,
            complete,
            complete_once,
            renew,
            holds: "SELECT COUNT(*) FROM retry_idempotency_keys \
                    WHERE scope = $1 AND key = $2 AND token = $3"
                .to_owned(),
            release: "DELETE FROM retry_idempotency_keys \
                      WHERE scope = $1 AND key = $2 AND token = $3 AND state = 'running'"
                .to_owned(),
            purge,
        }
    }
}

/// The arguments of a claim.
#[derive(Clone, Copy, Debug)]
pub struct ClaimRow<'a> {
    pub scope: &'a str,
    pub key: &'a str,
    pub fingerprint: i64,
    pub token: i64,
    /// The injected time, or `None` for the database's clock.
    pub now: Option<i64>,
    pub lease: i64,
    pub ttl: i64,
}

/// A row that a claim may not take: its fingerprint, state and response.
pub type Taken = (i64, String, Option<Vec<u8>>);

/// What a claim found: claimed (with its number, and in the one-commit mode the transaction
/// that holds it), or the row another claim holds or completed, or nothing it could claim or
/// answer from (claimed by another request after this statement's snapshot, or released in
/// between): claim again.
pub enum Claimed<M = i64> {
    Mine(M),
    Other(Taken),
    Unseen,
}

/// The statements on one driver. The methods that take a pool retry a passing failure twice
/// ([`retry_own_statement`]).
pub trait Run<DB: sqlx::Database> {
    /// Creates `schema`'s tables or brings them to its newest version, in one transaction that
    /// waits for any other migration of them.
    fn migrate(
        pool: &Pool<DB>,
        dialect: &Dialect,
        schema: &Schema,
    ) -> impl Future<Output = Result<(), MigrateError>> + Send;

    /// Opens a transaction that writes ([`Dialect::begin`]).
    fn begin(
        pool: &Pool<DB>,
        dialect: &Dialect,
    ) -> impl Future<Output = Result<Transaction<'static, DB>, sqlx::Error>> + Send;

    /// The lease mode's claim, on the connection `in_flight` holds (so that a release after a
    /// cancellation runs after it). Retried with the same token, so that a claim that committed
    /// before its answer was lost is recognised as its own.
    fn claim(
        in_flight: &mut InFlight<DB>,
        sql: &'static StoreStatements,
        row: &ClaimRow<'_>,
    ) -> impl Future<Output = Result<Claimed, sqlx::Error>> + Send;

    /// The key's row if a claim may not take it; `None` when it is missing or free.
    fn read(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        row: &ClaimRow<'_>,
    ) -> impl Future<Output = Result<Option<Taken>, sqlx::Error>> + Send;

    /// The one-commit mode's claim: the row if a claim may not take it; else a transaction
    /// whose first statement claims it, with the claim number; or `Unseen` (the transaction
    /// rolled back) when another transaction claimed it meanwhile. Retried whole: a failure
    /// leaves nothing committed.
    fn claim_in_transaction(
        pool: &Pool<DB>,
        dialect: &Dialect,
        sql: &'static StoreStatements,
        row: &ClaimRow<'_>,
    ) -> impl Future<Output = Result<Claimed<(Transaction<'static, DB>, i64)>, sqlx::Error>> + Send;

    /// Completes the claim's row in `transaction`: the rows it changed.
    fn complete_in(
        transaction: &mut Transaction<'static, DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
        response: Vec<u8>,
        now: Option<i64>,
        ttl: i64,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Completes the claim's row on the pool: the rows it changed.
    fn complete(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
        response: &[u8],
        now: Option<i64>,
        ttl: i64,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Whether `claim`'s token still holds the key (running or completed by it), read afresh.
    fn holds(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send;

    /// A full lease from now for the claim's running row: the rows it changed.
    fn renew(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
        now: Option<i64>,
        lease: i64,
        ttl: i64,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Deletes the claim's running row: the rows it deleted.
    fn release(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Deletes up to `batch` expired rows: how many.
    fn purge(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        now: Option<i64>,
        batch: i64,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Gives back the claim of a `begin` that was dropped (see [`InFlight`]): on the connection
    /// that ran the claim statement if there is one, after that statement, else on the pool.
    fn give_back(
        connection: Option<PoolConnection<DB>>,
        pool: Pool<DB>,
        sql: &'static StoreStatements,
        claim: Claim,
    ) -> BoxFuture<'static, ()>;
}

/// [`Run`] for every driver that has what the statements need.
#[derive(Debug)]
pub struct Generic;

impl<DB> Run<DB> for Generic
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'q> i64: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    for<'q> Option<i64>: sqlx::Encode<'q, DB>,
    for<'q> &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    for<'q> String: sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    for<'q> Vec<u8>: sqlx::Encode<'q, DB> + sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    for<'q> bool: sqlx::Decode<'q, DB> + sqlx::Type<DB>,
    usize: sqlx::ColumnIndex<DB::Row>,
    DB::QueryResult: Affected,
{
    async fn migrate(
        pool: &Pool<DB>,
        dialect: &Dialect,
        schema: &Schema,
    ) -> Result<(), MigrateError> {
        let mut tx = pool.begin_with(dialect.begin).await?;
        if let Some(lock) = dialect.migration_lock {
            let lock = lock.replace("{table}", schema.table);
            sqlx::raw_sql(AssertSqlSafe(lock)).execute(&mut *tx).await?;
        }
        let versions = schema.versions;
        sqlx::raw_sql(AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS {versions} \
             (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )))
        .execute(&mut *tx)
        .await?;
        let found = sqlx::query(AssertSqlSafe(format!(
            "SELECT CAST(version AS BIGINT) FROM {versions} WHERE id = 1"
        )))
        .fetch_optional(&mut *tx)
        .await?;
        let found: i64 = match found {
            Some(row) => row.try_get(0)?,
            None => 0,
        };
        if found > schema.version() {
            return Err(MigrateError::newer(schema, found));
        }
        for migration in schema.migrations.iter().skip(found as usize) {
            sqlx::raw_sql(AssertSqlSafe(render(migration, dialect)))
                .execute(&mut *tx)
                .await?;
        }
        sqlx::raw_sql(AssertSqlSafe(format!(
            "INSERT INTO {versions} (id, version) VALUES (1, {}) \
             ON CONFLICT (id) DO UPDATE SET version = excluded.version",
            schema.version()
        )))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn begin(
        pool: &Pool<DB>,
        dialect: &Dialect,
    ) -> Result<Transaction<'static, DB>, sqlx::Error> {
        pool.begin_with(dialect.begin).await
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn claim(
        in_flight: &mut InFlight<DB>,
        sql: &'static StoreStatements,
        row: &ClaimRow<'_>,
    ) -> Result<Claimed, sqlx::Error> {
        let Some(claim_or_read) = &sql.claim_or_read else {
            // A read first answers every case that does not execute, without the write lock
            // that a handler's transaction may hold (SQLite's readers never wait for its
            // writer). Only the claim below decides an execution.
            if let Some(taken) = <Self as Run<DB>>::read(&in_flight.pool, sql, row).await? {
                return Ok(Claimed::Other(taken));
            }
            let claimed = bind_claim(sqlx::query(sql.claim.as_str()), row)
                .fetch_optional(in_flight.connection().await?)
                .await;
            in_flight.statement_ended();
            return match claimed? {
                Some(claimed) => Ok(Claimed::Mine(claimed.try_get(0)?)),
                None => Ok(Claimed::Unseen),
            };
        };
        let found = bind_claim(sqlx::query(claim_or_read.as_str()), row)
            .fetch_optional(in_flight.connection().await?)
            .await;
        in_flight.statement_ended();
        claim_or_read_answer(found?)
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn read(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        row: &ClaimRow<'_>,
    ) -> Result<Option<Taken>, sqlx::Error> {
        let found = sqlx::query(sql.read.as_str())
            .bind(row.scope)
            .bind(row.key)
            .bind(row.now)
            .bind(row.fingerprint)
            .bind(row.token)
            .fetch_optional(pool)
            .await?;
        match found {
            Some(found) if !found.try_get::<bool, _>(3)? => Ok(Some((
                found.try_get(0)?,
                found.try_get(1)?,
                found.try_get(2)?,
            ))),
            _ => Ok(None),
        }
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn claim_in_transaction(
        pool: &Pool<DB>,
        dialect: &Dialect,
        sql: &'static StoreStatements,
        row: &ClaimRow<'_>,
    ) -> Result<Claimed<(Transaction<'static, DB>, i64)>, sqlx::Error> {
        if let Some(claim_or_read) = &sql.claim_or_read {
            // PostgreSQL: the transaction's first statement claims, or reads the row it may not
            // claim (a replay, a mismatch, a key running in the lease mode) without locking it:
            // one connection, `BEGIN` and one statement. A transaction that claimed nothing
            // wrote nothing; it is dropped, and its `ROLLBACK` goes out with the connection's
            // next message, off the request's path.
            let mut transaction = pool.begin_with(dialect.begin).await?;
            let found = bind_claim(sqlx::query(claim_or_read.as_str()), row)
                .fetch_optional(&mut *transaction)
                .await?;
            return Ok(match claim_or_read_answer(found)? {
                Claimed::Mine(number) => Claimed::Mine((transaction, number)),
                Claimed::Other(taken) => Claimed::Other(taken),
                Claimed::Unseen => Claimed::Unseen,
            });
        }
        // SQLite: a read first answers every case that does not execute, without the write lock
        // that `BEGIN IMMEDIATE` takes and that every other writer holds in turn.
        if let Some(taken) = <Self as Run<DB>>::read(pool, sql, row).await? {
            return Ok(Claimed::Other(taken));
        }
        let mut transaction = pool.begin_with(dialect.begin).await?;
        let claimed = bind_claim(sqlx::query(sql.claim.as_str()), row)
            .fetch_optional(&mut *transaction)
            .await?;
        match claimed {
            Some(claimed) => {
                let number = claimed.try_get(0)?;
                Ok(Claimed::Mine((transaction, number)))
            }
            // Claimed and committed by another transaction after the read: read it again.
            None => Ok(Claimed::Unseen),
        }
    }

    async fn complete_in(
        transaction: &mut Transaction<'static, DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
        response: Vec<u8>,
        now: Option<i64>,
        ttl: i64,
    ) -> Result<u64, sqlx::Error> {
        let done = bind_complete(sql, claim, response, now, ttl)
            .execute(&mut **transaction)
            .await?;
        Ok(done.rows())
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn complete(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
        response: &[u8],
        now: Option<i64>,
        ttl: i64,
    ) -> Result<u64, sqlx::Error> {
        let done = bind_complete(sql, claim, response.to_vec(), now, ttl)
            .execute(pool)
            .await?;
        Ok(done.rows())
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn holds(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
    ) -> Result<bool, sqlx::Error> {
        let rows: i64 = bind_token(sqlx::query(sql.holds.as_str()), claim)
            .fetch_one(pool)
            .await?
            .try_get(0)?;
        Ok(rows > 0)
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn renew(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
        now: Option<i64>,
        lease: i64,
        ttl: i64,
    ) -> Result<u64, sqlx::Error> {
        let done = bind_token(sqlx::query(sql.renew.as_str()), claim)
            .bind(now)
            .bind(lease)
            .bind(ttl)
            .execute(pool)
            .await?;
        Ok(done.rows())
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn release(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        claim: &Claim,
    ) -> Result<u64, sqlx::Error> {
        let done = bind_token(sqlx::query(sql.release.as_str()), claim)
            .execute(pool)
            .await?;
        Ok(done.rows())
    }

    #[retry(max = 2, base = "10ms", jitter = full, on = retry_own_statement)]
    async fn purge(
        pool: &Pool<DB>,
        sql: &'static StoreStatements,
        now: Option<i64>,
        batch: i64,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(sql.purge.as_str())
            .bind(now)
            .bind(batch)
            .execute(pool)
            .await?;
        Ok(done.rows())
    }

    fn give_back(
        connection: Option<PoolConnection<DB>>,
        pool: Pool<DB>,
        sql: &'static StoreStatements,
        claim: Claim,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            if let Some(mut connection) = connection {
                // Runs after the claim statement, which the connection may still be finishing.
                let released = bind_token(sqlx::query(sql.release.as_str()), &claim)
                    .execute(&mut *connection)
                    .await;
                if released.is_ok() {
                    return;
                }
            }
            let _ = <Self as Run<DB>>::release(&pool, sql, &claim).await;
        })
    }
}

/// What the claim-or-read statement found: the claim, the row it may not claim, or nothing.
fn claim_or_read_answer<R>(found: Option<R>) -> Result<Claimed, sqlx::Error>
where
    R: Row,
    usize: sqlx::ColumnIndex<R>,
    for<'q> i64: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> String: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Vec<u8>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> bool: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
{
    let Some(found) = found else {
        return Ok(Claimed::Unseen);
    };
    if found.try_get::<bool, _>(0)? {
        return Ok(Claimed::Mine(found.try_get(1)?));
    }
    Ok(Claimed::Other((
        found.try_get(2)?,
        found.try_get(3)?,
        found.try_get(4)?,
    )))
}

/// How many rows a statement changed: each driver's query result, under one name.
pub trait Affected {
    /// The rows the statement inserted, updated or deleted.
    fn rows(&self) -> u64;
}

#[cfg(feature = "sqlite")]
impl Affected for sqlx::sqlite::SqliteQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

#[cfg(feature = "postgres")]
impl Affected for sqlx::postgres::PgQueryResult {
    fn rows(&self) -> u64 {
        self.rows_affected()
    }
}

/// A statement with its arguments so far.
type Query<'q, DB> = sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>;

/// The claim's arguments, `$1` to `$7`.
fn bind_claim<'q, DB>(query: Query<'q, DB>, row: &ClaimRow<'q>) -> Query<'q, DB>
where
    DB: sqlx::Database,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i64>: sqlx::Encode<'q, DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    query
        .bind(row.scope)
        .bind(row.key)
        .bind(row.fingerprint)
        .bind(row.token)
        .bind(row.now)
        .bind(row.lease)
        .bind(row.ttl)
}

/// The completion, with its arguments.
fn bind_complete<'q, DB>(
    sql: &'static StoreStatements,
    claim: &'q Claim,
    response: Vec<u8>,
    now: Option<i64>,
    ttl: i64,
) -> Query<'q, DB>
where
    DB: sqlx::Database,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i64>: sqlx::Encode<'q, DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Vec<u8>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    if claim.mode() == Mode::OneCommit {
        return bind_token(sqlx::query(sql.complete_once.as_str()), claim)
            .bind(response)
            .bind(now);
    }
    bind_token(sqlx::query(sql.complete.as_str()), claim)
        .bind(response)
        .bind(now)
        .bind(ttl)
}

/// A claim's scope, key and token, `$1` to `$3`.
fn bind_token<'q, DB>(query: Query<'q, DB>, claim: &'q Claim) -> Query<'q, DB>
where
    DB: sqlx::Database,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    query
        .bind(claim.scope())
        .bind(claim.key().as_str())
        .bind(claim.token() as i64)
}

/// A claim statement in flight: the connection it runs on and the claim it may write. Dropped
/// before [`settled`](InFlight::settled) (the `begin` future was cancelled, or it failed after
/// the statement may have committed), it gives the claim back in a background task that runs
/// on the same connection, after the statement, so that the release cannot overtake the claim.
/// A claim that was never written is not found by its random token: the release changes
/// nothing.
pub struct InFlight<DB: sqlx::Database> {
    pool: Pool<DB>,
    connection: Option<PoolConnection<DB>>,
    claim: Option<Claim>,
    sql: &'static StoreStatements,
    give_back: GiveBack<DB>,
}

/// [`Run::give_back`] on one driver.
type GiveBack<DB> = fn(
    Option<PoolConnection<DB>>,
    Pool<DB>,
    &'static StoreStatements,
    Claim,
) -> BoxFuture<'static, ()>;

impl<DB: sqlx::Database> InFlight<DB> {
    /// Armed for `claim` (its number is not known yet and does not matter to a release).
    pub fn new<Q: Run<DB>>(pool: &Pool<DB>, sql: &'static StoreStatements, claim: Claim) -> Self {
        InFlight {
            pool: pool.clone(),
            connection: None,
            claim: Some(claim),
            sql,
            give_back: Q::give_back,
        }
    }

    /// The connection the claim statement runs on, held while it runs, so that a release
    /// after a cancellation queues behind the statement.
    async fn connection(&mut self) -> Result<&mut DB::Connection, sqlx::Error> {
        let connection = match self.connection.take() {
            Some(connection) => connection,
            None => self.pool.acquire().await?,
        };
        Ok(&mut **self.connection.insert(connection))
    }

    /// The claim statement has ended (answered or failed): its connection goes back to the
    /// pool, since nothing on it can overtake a release any more, and so that `begin`'s next
    /// round (SQLite's read) never waits for a connection its own claim holds.
    fn statement_ended(&mut self) {
        self.connection = None;
    }

    /// `begin` has its answer: a guard holds the claim, or no claim was written.
    pub fn settled(&mut self) {
        self.claim = None;
    }
}

impl<DB: sqlx::Database> Drop for InFlight<DB> {
    fn drop(&mut self) {
        // Without a runtime the lease returns the key.
        if let Some(claim) = self.claim.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn((self.give_back)(
                self.connection.take(),
                self.pool.clone(),
                self.sql,
                claim,
            ));
        }
    }
}

//! [`SqliteStore`]: the keys in a SQLite file (feature `sqlite`).

use super::sql::{self, CLAIM_ROUNDS, Decision, InFlight, PURGE_BATCH, SCHEMA_VERSION, Settings};
use super::{Begin, BoxFuture, Claim, Fingerprint, Guard, IdempotencyStore, StoreError};
use retry_runtime::{IdempotencyKey, retry};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Row, Sqlite, SqlitePool};
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// An [`IdempotencyStore`] in a SQLite file: the embedded default. It survives a restart of the
/// service, and processes on one machine can share the file; the handler's own rows go in the
/// same file, in the same transaction as the key's completion.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use retry_runtime::IdempotencyKey;
/// use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, SqliteStore};
///
/// # let dir = std::env::temp_dir().join(format!("retry-doc-{}", IdempotencyKey::new()));
/// # std::fs::create_dir_all(&dir)?;
/// # let path = dir.join("payments.db");
/// let store = SqliteStore::<String>::open(&path).await?; // creates the file if it is missing
/// store.migrate().await?; // creates the tables; idempotent
/// sqlx::query("CREATE TABLE IF NOT EXISTS ledger (key TEXT PRIMARY KEY, cents INTEGER NOT NULL)")
///     .execute(store.pool())
///     .await?;
///
/// let key = IdempotencyKey::from("payout-4711");
/// let body = br#"{"claim":4711,"cents":125000}"#;
/// match store.begin(&key, Fingerprint::of(body)).await? {
///     Begin::Execute(mut guard) => {
///         // The payout's row and the key's completion commit together, or neither does.
///         let tx = guard.transaction().await?;
///         sqlx::query("INSERT INTO ledger (key, cents) VALUES (?, ?)")
///             .bind(key.as_str())
///             .bind(125_000_i64)
///             .execute(&mut **tx)
///             .await?;
///         guard.complete(&"201 receipt P-1".to_owned()).await?;
///     }
///     other => panic!("a new key executes, not {other:?}"),
/// }
///
/// // The repeat is answered from the file, also after a restart of the service.
/// let reopened = SqliteStore::<String>::open(&path).await?;
/// let repeat = reopened.begin(&key, Fingerprint::of(body)).await?;
/// assert_eq!(repeat, Begin::Replay("201 receipt P-1".to_owned()));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
///
/// # The schema
///
/// [`migrate`](SqliteStore::migrate) creates it in one `BEGIN IMMEDIATE` transaction, which
/// serializes two processes that start together; the version is kept in
/// `retry_idempotency_schema` (not in sqlx's `_sqlx_migrations`, so that the service's own sqlx
/// migrations never see these):
///
/// ```sql
/// CREATE TABLE retry_idempotency_keys (
///     scope        TEXT    NOT NULL,  -- the caller's scope, '' for `begin`
///     key          TEXT    NOT NULL,
///     fingerprint  INTEGER NOT NULL,  -- `Fingerprint::as_u64` as a signed 64-bit number
///     state        TEXT    NOT NULL CHECK (state IN ('running', 'completed')),
///     claim        INTEGER NOT NULL,  -- 1 for the first execution, +1 per takeover
///     token        INTEGER NOT NULL,  -- random, names the claim (fencing)
///     claimed_at   INTEGER NOT NULL,  -- all times: milliseconds since the Unix epoch
///     lease_until  INTEGER,           -- running: another request may take over after this
///     completed_at INTEGER,
///     expires_at   INTEGER NOT NULL,  -- completed: + TTL; running: lease_until + TTL
///     response     BLOB,              -- the response's JSON, once completed
///     PRIMARY KEY (scope, key)
/// );
/// CREATE INDEX retry_idempotency_keys_expires_at ON retry_idempotency_keys (expires_at);
/// CREATE TABLE retry_idempotency_schema (
///     id      INTEGER PRIMARY KEY CHECK (id = 1),
///     version INTEGER NOT NULL
/// );
/// ```
///
/// # The statements
///
/// `begin` first reads the key's row: a completed key (replay), a running one (in progress) and a
/// mismatch are answered from that read, which in write-ahead-log mode never waits for a writer.
/// Only when the row is missing or free does it claim, with one `INSERT … ON CONFLICT (scope,
/// key) DO UPDATE … WHERE <free> RETURNING claim`, where a row is free when its TTL has passed,
/// or it is running with an ended lease and the same fingerprint. The read decides nothing about
/// an execution: the claim statement decides it alone, and SQLite runs one writer at a time, so
/// two processes cannot both claim. When it claims nothing (another request was faster), `begin`
/// reads again.
///
/// [`Guard::transaction`] opens `BEGIN IMMEDIATE`; `complete` runs an `UPDATE … WHERE token = ?`
/// in it and commits, or rolls back when the token no longer holds the key. SQLite has one
/// writer at a time: while a handler's transaction is open, the claim of another new key waits
/// for it (up to the busy timeout, then `begin` fails with a transient error). Keep the
/// transaction short: make calls to other systems before opening it.
///
/// Times come from the system clock, or from [`with_clock`](SqliteStore::with_clock) in tests.
///
/// [`open`](SqliteStore::open) sets the file up for this: write-ahead logging (readers do not
/// wait for the writer), `synchronous = FULL` (a commit is on disk before `complete` returns),
/// and a busy timeout of 5 s (a writer waits that long for another).
pub struct SqliteStore<R> {
    pool: SqlitePool,
    settings: Settings,
    response: PhantomData<fn() -> R>,
}

const MIGRATIONS: [&str; 1] = [r"
CREATE TABLE retry_idempotency_keys (
    scope        TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    fingerprint  INTEGER NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('running', 'completed')),
    claim        INTEGER NOT NULL,
    token        INTEGER NOT NULL,
    claimed_at   INTEGER NOT NULL,
    lease_until  INTEGER,
    completed_at INTEGER,
    expires_at   INTEGER NOT NULL,
    response     BLOB,
    PRIMARY KEY (scope, key)
);
CREATE INDEX retry_idempotency_keys_expires_at ON retry_idempotency_keys (expires_at);
"];

const CLAIM: &str = r"
INSERT INTO retry_idempotency_keys AS k
    (scope, key, fingerprint, state, claim, token, claimed_at, lease_until, completed_at,
     expires_at, response)
VALUES (?1, ?2, ?3, 'running', 1, ?4, ?5, ?5 + ?6, NULL, ?5 + ?6 + ?7, NULL)
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

const READ: &str = r"
SELECT fingerprint, state, response, lease_until, expires_at
FROM retry_idempotency_keys WHERE scope = ?1 AND key = ?2";

const COMPLETE: &str = r"
UPDATE retry_idempotency_keys
SET state = 'completed', response = ?1, completed_at = ?2, lease_until = NULL,
    expires_at = ?2 + ?3
WHERE scope = ?4 AND key = ?5 AND token = ?6";

const RENEW: &str = r"
UPDATE retry_idempotency_keys SET lease_until = ?1 + ?2, expires_at = ?1 + ?2 + ?3
WHERE scope = ?4 AND key = ?5 AND token = ?6 AND state = 'running'";

const HOLDS: &str = r"
SELECT COUNT(*) FROM retry_idempotency_keys WHERE scope = ?1 AND key = ?2 AND token = ?3";

const RELEASE: &str = r"
DELETE FROM retry_idempotency_keys
WHERE scope = ?1 AND key = ?2 AND token = ?3 AND state = 'running'";

const PURGE: &str = r"
DELETE FROM retry_idempotency_keys WHERE rowid IN
    (SELECT rowid FROM retry_idempotency_keys WHERE expires_at <= ?1 LIMIT ?2)";

impl<R> SqliteStore<R> {
    /// A store on `pool`, with the default TTL, lease and size limit. The pool may be the
    /// service's own, so that its tables and the keys share one file.
    ///
    /// Give the pool a busy timeout (sqlx's default is 5 s) and write-ahead logging, as
    /// [`open`](SqliteStore::open) does; an in-memory database (`sqlite::memory:`) is one per
    /// connection, so a pool of them does not share keys.
    pub fn new(pool: SqlitePool) -> Self {
        SqliteStore {
            pool,
            settings: Settings::new(),
            response: PhantomData,
        }
    }

    /// Opens (and creates, if missing) the SQLite file at `path`: write-ahead logging,
    /// `synchronous = FULL`, a busy timeout of 5 s. Call [`migrate`](SqliteStore::migrate) once
    /// before the first `begin`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(5));
        let pool = SqlitePoolOptions::new()
            .connect_with(options)
            .await
            .map_err(sql::db)?;
        Ok(Self::new(pool))
    }

    /// Completed responses are replayed for `ttl` after completion ([`DEFAULT_TTL`](super::DEFAULT_TTL)
    /// unless set). `Duration::MAX` keeps them until the file is deleted.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.settings.ttl = ttl;
        self
    }

    /// A running key is held for `lease` after its claim or last renewal
    /// ([`DEFAULT_LEASE`](super::DEFAULT_LEASE) unless set); after that the same request may
    /// take it over.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self
    }

    /// The longest serialized response `complete` stores, in bytes
    /// ([`DEFAULT_MAX_RESPONSE_BYTES`](super::DEFAULT_MAX_RESPONSE_BYTES) unless set).
    pub fn max_response_bytes(mut self, limit: usize) -> Self {
        self.settings.max_response_bytes = limit;
        self
    }

    /// Reads the time from `clock` instead of the system clock: for tests that move time by
    /// hand, so that a lease or a TTL ends without waiting for it.
    pub fn with_clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.settings.clock = Some(std::sync::Arc::new(clock));
        self
    }

    /// How long a stored response is replayed.
    pub fn get_ttl(&self) -> Duration {
        self.settings.ttl
    }

    /// How long a running key is held without renewal.
    pub fn get_lease(&self) -> Duration {
        self.settings.lease
    }

    /// The longest serialized response stored, in bytes.
    pub fn get_max_response_bytes(&self) -> usize {
        self.settings.max_response_bytes
    }

    /// The pool the store runs on, for the service's own tables.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The same store (the same pool and settings) for another response type, for a second
    /// route whose responses differ.
    pub fn with_response<S>(&self) -> SqliteStore<S> {
        SqliteStore {
            pool: self.pool.clone(),
            settings: self.settings.clone(),
            response: PhantomData,
        }
    }

    /// Creates the store's tables and indexes, or brings them to this version. Idempotent, and
    /// safe when several processes start at once: it runs in one `BEGIN IMMEDIATE`
    /// transaction. See [the schema](SqliteStore#the-schema).
    ///
    /// # Errors
    ///
    /// [`StoreError::Schema`] if the file's schema is newer than this library's.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(sql::db)?;
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS retry_idempotency_schema (\
                id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
        )
        .execute(&mut *tx)
        .await
        .map_err(sql::db)?;
        let found: Option<i64> =
            sqlx::query_scalar("SELECT version FROM retry_idempotency_schema WHERE id = 1")
                .fetch_optional(&mut *tx)
                .await
                .map_err(sql::db)?;
        let found = found.unwrap_or(0);
        if found > SCHEMA_VERSION {
            return Err(sql::newer_schema(found));
        }
        for migration in MIGRATIONS.iter().skip(found as usize) {
            sqlx::raw_sql(*migration)
                .execute(&mut *tx)
                .await
                .map_err(sql::db)?;
        }
        sqlx::query(
            "INSERT INTO retry_idempotency_schema (id, version) VALUES (1, ?1) \
             ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        )
        .bind(SCHEMA_VERSION)
        .execute(&mut *tx)
        .await
        .map_err(sql::db)?;
        tx.commit().await.map_err(sql::db)
    }
}

impl<R> Clone for SqliteStore<R> {
    fn clone(&self) -> Self {
        self.with_response()
    }
}

impl<R> fmt::Debug for SqliteStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("ttl", &self.settings.ttl)
            .field("lease", &self.settings.lease)
            .field("max_response_bytes", &self.settings.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// The arguments of the claim statement.
struct ClaimRow<'a> {
    scope: &'a str,
    key: &'a str,
    fingerprint: i64,
    token: i64,
    now: i64,
    lease: i64,
    ttl: i64,
}

/// Claims the row, or returns `None` when another claim holds or completed it. Retried with the
/// same token, so that a claim that committed before its answer was lost is recognised as ours.
#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn claim_row(
    in_flight: &mut InFlight<Sqlite>,
    row: &ClaimRow<'_>,
) -> Result<Option<i64>, sqlx::Error> {
    let claimed = sqlx::query_scalar(CLAIM)
        .bind(row.scope)
        .bind(row.key)
        .bind(row.fingerprint)
        .bind(row.token)
        .bind(row.now)
        .bind(row.lease)
        .bind(row.ttl)
        .fetch_optional(in_flight.connection().await?)
        .await;
    in_flight.statement_ended();
    claimed
}

/// A key's row as `begin` reads it.
struct Found {
    fingerprint: i64,
    state: String,
    response: Option<Vec<u8>>,
    lease_until: Option<i64>,
    expires_at: i64,
}

impl Found {
    /// Whether the claim statement may take the row (its `WHERE`, read without the lock).
    fn is_free(&self, now: i64, fingerprint: i64) -> bool {
        self.expires_at <= now
            || (self.state == "running"
                && self.lease_until.is_some_and(|until| until <= now)
                && self.fingerprint == fingerprint)
    }
}

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn read_row(pool: &SqlitePool, scope: &str, key: &str) -> Result<Option<Found>, sqlx::Error> {
    let row = sqlx::query(READ)
        .bind(scope)
        .bind(key)
        .fetch_optional(pool)
        .await?;
    row.map(|row| {
        Ok(Found {
            fingerprint: row.try_get(0)?,
            state: row.try_get(1)?,
            response: row.try_get(2)?,
            lease_until: row.try_get(3)?,
            expires_at: row.try_get(4)?,
        })
    })
    .transpose()
}

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn open_transaction(
    pool: &SqlitePool,
) -> Result<sqlx::Transaction<'static, Sqlite>, sqlx::Error> {
    pool.begin_with("BEGIN IMMEDIATE").await
}

/// The completion statement, on a connection or in a transaction.
fn complete_statement(
    claim: &Claim,
    response: Vec<u8>,
    now: i64,
    ttl: i64,
) -> sqlx::query::Query<'static, Sqlite, sqlx::sqlite::SqliteArguments> {
    sqlx::query(COMPLETE)
        .bind(response)
        .bind(now)
        .bind(ttl)
        .bind(claim.scope().to_owned())
        .bind(claim.key().to_string())
        .bind(claim.token() as i64)
}

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn complete_row(
    pool: &SqlitePool,
    claim: &Claim,
    response: &[u8],
    now: i64,
    ttl: i64,
) -> Result<u64, sqlx::Error> {
    let done = complete_statement(claim, response.to_vec(), now, ttl)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// Whether `claim`'s token still holds the key (running or completed by it), read afresh.
#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn holds_row(pool: &SqlitePool, claim: &Claim) -> Result<bool, sqlx::Error> {
    let rows: i64 = sqlx::query_scalar(HOLDS)
        .bind(claim.scope())
        .bind(claim.key().as_str())
        .bind(claim.token() as i64)
        .fetch_one(pool)
        .await?;
    Ok(rows > 0)
}

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn renew_row(
    pool: &SqlitePool,
    claim: &Claim,
    now: i64,
    lease: i64,
    ttl: i64,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(RENEW)
        .bind(now)
        .bind(lease)
        .bind(ttl)
        .bind(claim.scope())
        .bind(claim.key().as_str())
        .bind(claim.token() as i64)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn release_row(pool: &SqlitePool, claim: &Claim) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(RELEASE)
        .bind(claim.scope())
        .bind(claim.key().as_str())
        .bind(claim.token() as i64)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn purge_batch(pool: &SqlitePool, now: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(PURGE)
        .bind(now)
        .bind(PURGE_BATCH)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// Gives back the claim of a `begin` that was dropped (see [`InFlight`]).
fn give_back(
    connection: Option<sqlx::pool::PoolConnection<Sqlite>>,
    pool: SqlitePool,
    claim: Claim,
) -> BoxFuture<'static, ()> {
    Box::pin(async move {
        if let Some(mut connection) = connection {
            // Runs after the claim statement, which the connection may still be finishing.
            let released = sqlx::query(RELEASE)
                .bind(claim.scope())
                .bind(claim.key().as_str())
                .bind(claim.token() as i64)
                .execute(&mut *connection)
                .await;
            if released.is_ok() {
                return;
            }
        }
        let _ = release_row(&pool, &claim).await;
    })
}

/// Rolls `transaction` back (if any) and deletes the claim's running row, or refuses with
/// `Superseded` when the claim no longer holds the key (the rollback happens all the same).
async fn release(
    pool: &SqlitePool,
    claim: &Claim,
    transaction: Option<sqlx::Transaction<'static, Sqlite>>,
) -> Result<(), StoreError> {
    if let Some(transaction) = transaction {
        // A failed rollback leaves nothing to undo: SQLite rolls back a transaction whose
        // connection is closed.
        let _ = transaction.rollback().await;
    }
    match release_row(pool, claim).await {
        Ok(0) => Err(StoreError::Superseded {
            claim: claim.number(),
        }),
        Ok(_) => Ok(()),
        Err(e) => Err(sql::db(e)),
    }
}

impl<R> IdempotencyStore<R> for SqliteStore<R>
where
    R: Serialize + DeserializeOwned + Send + 'static,
{
    type Transaction = sqlx::Transaction<'static, Sqlite>;

    fn begin_scoped<'s, 'a>(
        &'s self,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        super::metrics::begin("sqlite", async move {
            super::validate_key(key.as_str())?;
            let token = sql::new_token();
            let fingerprint_bits = fingerprint.as_u64() as i64;
            let claim = Claim::new(scope, key.clone(), 0, token as u64);
            let mut in_flight = InFlight::new(&self.pool, claim, give_back);
            for _ in 0..CLAIM_ROUNDS {
                let now = self.settings.now_ms();
                // A read answers every case that does not execute, without the write lock that a
                // handler's transaction may hold. Only the claim below decides an execution.
                let found = read_row(&self.pool, scope, key.as_str())
                    .await
                    .map_err(sql::db)?;
                if let Some(found) = found.filter(|found| !found.is_free(now, fingerprint_bits)) {
                    in_flight.settled();
                    let response = found.response.as_deref();
                    return Ok(
                        match sql::decide(fingerprint, found.fingerprint, &found.state, response)? {
                            Decision::Replay(response) => Begin::Replay(response),
                            Decision::InProgress => Begin::InProgress,
                            Decision::Mismatch => Begin::Mismatch,
                        },
                    );
                }
                let row = ClaimRow {
                    scope,
                    key: key.as_str(),
                    fingerprint: fingerprint_bits,
                    token,
                    now,
                    lease: self.settings.lease_ms(),
                    ttl: self.settings.ttl_ms(),
                };
                // An error leaves `in_flight` armed: the claim may have committed before the
                // connection failed, and the drop gives it back.
                if let Some(number) = claim_row(&mut in_flight, &row).await.map_err(sql::db)? {
                    in_flight.settled();
                    let claim = Claim::new(scope, key.clone(), number as u64, token as u64);
                    return Ok(Begin::Execute(Guard::new(self, claim)));
                }
                // Another request claimed it between the two statements: read it again.
            }
            in_flight.settled();
            Ok(Begin::InProgress)
        })
    }

    sql::shared_methods!(now_ms);

    fn metrics_label(&self) -> &'static str {
        "sqlite"
    }
}

// The one-commit mode: the claim in the handler's transaction.
mod transactional;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_claim_retried_with_its_token_is_recognised_as_its_own() {
        let dir = std::env::temp_dir().join(format!("retry-claim-{}", IdempotencyKey::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = SqliteStore::<()>::open(dir.join("store.db")).await.unwrap();
        store.migrate().await.unwrap();
        let row = ClaimRow {
            scope: "",
            key: "k",
            fingerprint: 7,
            token: 42,
            now: 1_000,
            lease: 60_000,
            ttl: 86_400_000,
        };
        let claim_once = async |row: &ClaimRow<'_>| {
            let claim = Claim::new("", IdempotencyKey::from("k"), 0, row.token as u64);
            let mut in_flight = InFlight::new(store.pool(), claim, give_back);
            let claimed = claim_row(&mut in_flight, row).await.unwrap();
            in_flight.settled();
            claimed
        };
        assert_eq!(claim_once(&row).await, Some(1));
        // The answer to the first statement was lost: the same statement again is still ours.
        assert_eq!(claim_once(&row).await, Some(1));
        // Another request's token does not get it.
        let other = ClaimRow { token: 43, ..row };
        assert_eq!(claim_once(&other).await, None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

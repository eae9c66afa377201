//! [`PostgresStore`]: the keys in one PostgreSQL database (feature `postgres`).

use super::sql::{self, CLAIM_ROUNDS, Decision, InFlight, PURGE_BATCH, SCHEMA_VERSION, Settings};
use super::{Begin, BoxFuture, Claim, Fingerprint, Guard, IdempotencyStore, StoreError};
use retry_runtime::{IdempotencyKey, retry};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres, Row};
use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, SystemTime};

/// An [`IdempotencyStore`] in one PostgreSQL database, shared by every replica of the service:
/// a retry that lands on another replica finds the key, and two requests with the same new key
/// on two replicas get exactly one [`Begin::Execute`]. The handler's own rows go in the same
/// database, in the same transaction as the key's completion.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use retry_runtime::IdempotencyKey;
/// use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, PostgresStore};
///
/// let store = PostgresStore::<String>::connect_lazy("postgres://payments@db.internal/payments")?;
/// store.migrate().await?; // every replica may run it at start: idempotent, under a lock
///
/// let key = IdempotencyKey::from("payout-4711");
/// let body = br#"{"claim":4711,"cents":125000}"#;
/// match store.begin_scoped("client-42", &key, Fingerprint::of(body)).await {
///     Ok(Begin::Execute(mut guard)) => {
///         let tx = guard.transaction().await?;
///         sqlx::query("INSERT INTO ledger (key, cents) VALUES ($1, $2)")
///             .bind(key.as_str())
///             .bind(125_000_i64)
///             .execute(&mut **tx)
///             .await?;
///         guard.complete(&"201 receipt P-1".to_owned()).await?; // commits both
///     }
///     Ok(Begin::Replay(stored)) => println!("answer again: {stored}"),
///     Ok(other) => println!("refuse: {:?}", other.rejection_status()),
///     Err(down) => println!("answer {} with Retry-After: {down}", down.status()),
/// }
/// # Ok(())
/// # }
/// ```
///
/// # The schema
///
/// [`migrate`](PostgresStore::migrate) creates it in one transaction under a transaction-level
/// advisory lock per schema (`pg_advisory_xact_lock`), so replicas that start together wait for
/// each other instead of failing. The version is kept in `retry_idempotency_schema` (not in
/// sqlx's `_sqlx_migrations`, so that the service's own sqlx migrations never see these). The
/// tables go in the first schema of the connection's `search_path`.
///
/// ```sql
/// CREATE TABLE retry_idempotency_keys (
///     scope        TEXT   NOT NULL,  -- the caller's scope, '' for `begin`
///     key          TEXT   NOT NULL,
///     fingerprint  BIGINT NOT NULL,  -- `Fingerprint::as_u64` as a signed 64-bit number
///     state        TEXT   NOT NULL CHECK (state IN ('running', 'completed')),
///     claim        BIGINT NOT NULL,  -- 1 for the first execution, +1 per takeover
///     token        BIGINT NOT NULL,  -- random, names the claim (fencing)
///     claimed_at   BIGINT NOT NULL,  -- all times: milliseconds since the Unix epoch
///     lease_until  BIGINT,           -- running: another request may take over after this
///     completed_at BIGINT,
///     expires_at   BIGINT NOT NULL,  -- completed: + TTL; running: lease_until + TTL
///     response     BYTEA,            -- the response's JSON, once completed
///     PRIMARY KEY (scope, key)
/// );
/// CREATE INDEX retry_idempotency_keys_expires_at ON retry_idempotency_keys (expires_at);
/// CREATE TABLE retry_idempotency_schema (
///     id      INTEGER PRIMARY KEY CHECK (id = 1),
///     version INTEGER NOT NULL
/// );
/// ```
///
/// Read a time with `to_timestamp(expires_at / 1000.0)`.
///
/// # The statements
///
/// `begin` is one statement, one round trip: an `INSERT … ON CONFLICT (scope, key) DO UPDATE …
/// WHERE <free> RETURNING claim` in a common table expression, where a row is free when its TTL
/// has passed, or it is running with an ended lease and the same fingerprint, followed in the
/// same statement by a `SELECT` of the row when nothing was claimed (replay, in progress,
/// mismatch). The primary key decides between two replicas: the second `INSERT` waits for the
/// first to commit and then finds the key taken. When that happens, the `SELECT` reads the
/// statement's snapshot, older than the claim that refused it: no row (a new key), or the row
/// as it was before that claim (expired, or running with an ended lease). The `SELECT` answers
/// only from a row that is not free, so `begin` never replays an expired response or calls the
/// running payload a mismatch; otherwise it runs the statement again, with a new snapshot that
/// sees the winning claim.
///
/// [`Guard::transaction`] opens a transaction at the server's default isolation (read committed
/// unless configured otherwise); `complete` runs `UPDATE … WHERE token = $n` in it and commits,
/// or rolls back when the token no longer holds the key. A takeover and a completion lock the
/// same row, so exactly one of them wins. At repeatable read or serializable (the server's
/// default, or `SET TRANSACTION` by the handler), a transaction that read the row before a
/// takeover changed it fails there with a serialization failure (40001) instead: `complete`
/// then rolls back, reads the row afresh, and answers [`StoreError::Superseded`] when the token
/// no longer holds the key, at every isolation level. A 40001 reaches the caller as a transient
/// [`StoreError::Database`] only when the claim still holds the key, and a retry may succeed.
///
/// Times come from the database's clock (`clock_timestamp()`), so that replicas whose clocks
/// differ agree on when a lease ends, or from [`with_clock`](PostgresStore::with_clock) in
/// tests. A replay is one round trip; a new key is one round trip before the handler and one
/// statement inside its transaction.
pub struct PostgresStore<R> {
    pool: PgPool,
    settings: Settings,
    response: PhantomData<fn() -> R>,
}

const MIGRATIONS: [&str; 1] = [r"
CREATE TABLE retry_idempotency_keys (
    scope        TEXT   NOT NULL,
    key          TEXT   NOT NULL,
    fingerprint  BIGINT NOT NULL,
    state        TEXT   NOT NULL CHECK (state IN ('running', 'completed')),
    claim        BIGINT NOT NULL,
    token        BIGINT NOT NULL,
    claimed_at   BIGINT NOT NULL,
    lease_until  BIGINT,
    completed_at BIGINT,
    expires_at   BIGINT NOT NULL,
    response     BYTEA,
    PRIMARY KEY (scope, key)
);
CREATE INDEX retry_idempotency_keys_expires_at ON retry_idempotency_keys (expires_at);
"];

/// Now in milliseconds: `$n` when the store has an injected clock, else the database's.
macro_rules! now {
    ($param:literal) => {
        concat!(
            "COALESCE(",
            $param,
            "::BIGINT, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT)"
        )
    };
}

const CLAIM: &str = concat!(
    "WITH now AS (SELECT ",
    now!("$5"),
    r" AS ms),
claimed AS (
    INSERT INTO retry_idempotency_keys AS k
        (scope, key, fingerprint, state, claim, token, claimed_at, lease_until, completed_at,
         expires_at, response)
    SELECT $1, $2, $3, 'running', 1, $4, now.ms, now.ms + $6, NULL, now.ms + $6 + $7, NULL
    FROM now
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
    RETURNING k.claim
)
SELECT TRUE AS claimed, claim, NULL::BIGINT AS fingerprint, NULL::TEXT AS state,
       NULL::BYTEA AS response
FROM claimed
UNION ALL
SELECT FALSE, claim, fingerprint, state, response
FROM retry_idempotency_keys, now
WHERE scope = $1 AND key = $2 AND NOT EXISTS (SELECT 1 FROM claimed)
  AND NOT (expires_at <= now.ms
           OR (state = 'running' AND lease_until <= now.ms AND fingerprint = $3))"
);

const COMPLETE: &str = concat!(
    "WITH now AS (SELECT ",
    now!("$2"),
    r" AS ms)
UPDATE retry_idempotency_keys
SET state = 'completed', response = $1, completed_at = now.ms, lease_until = NULL,
    expires_at = now.ms + $3
FROM now
WHERE scope = $4 AND key = $5 AND token = $6"
);

const RENEW: &str = concat!(
    "WITH now AS (SELECT ",
    now!("$1"),
    r" AS ms)
UPDATE retry_idempotency_keys
SET lease_until = now.ms + $2, expires_at = now.ms + $2 + $3
FROM now
WHERE scope = $4 AND key = $5 AND token = $6 AND state = 'running'"
);

const HOLDS: &str = r"
SELECT COUNT(*) FROM retry_idempotency_keys WHERE scope = $1 AND key = $2 AND token = $3";

const RELEASE: &str = r"
DELETE FROM retry_idempotency_keys
WHERE scope = $1 AND key = $2 AND token = $3 AND state = 'running'";

// The time is read once (an init plan), so that the index on `expires_at` serves the scan.
const PURGE: &str = concat!(
    "WITH now AS (SELECT ",
    now!("$1"),
    r" AS ms)
DELETE FROM retry_idempotency_keys WHERE (scope, key) IN (
    SELECT scope, key FROM retry_idempotency_keys
    WHERE expires_at <= (SELECT ms FROM now)
    LIMIT $2
    FOR UPDATE SKIP LOCKED)"
);

impl<R> PostgresStore<R> {
    /// A store on `pool`, with the default TTL, lease and size limit. The pool may be the
    /// service's own, so that its tables and the keys share one database.
    ///
    /// Give the pool a short `acquire_timeout` (sqlx's default is 30 s): while the database is
    /// down, `begin` fails only after it, and the service should answer 503 soon.
    pub fn new(pool: PgPool) -> Self {
        PostgresStore {
            pool,
            settings: Settings::new(),
            response: PhantomData,
        }
    }

    /// A store on a new pool for `url` (`postgres://user:password@host:port/database`), which
    /// connects on first use, so that a service starts while its database is down. Its
    /// `acquire_timeout` is 3 s: a `begin` while the database is down fails after that. Call
    /// [`migrate`](PostgresStore::migrate) once before the first `begin`.
    ///
    /// # Errors
    ///
    /// A [`StoreError::Database`] if `url` cannot be parsed.
    pub fn connect_lazy(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .acquire_timeout(Duration::from_secs(3))
            .connect_lazy(url)
            .map_err(sql::db)?;
        Ok(Self::new(pool))
    }

    /// Completed responses are replayed for `ttl` after completion
    /// ([`DEFAULT_TTL`](super::DEFAULT_TTL) unless set). `Duration::MAX` keeps them until they
    /// are deleted by hand.
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

    /// Reads the time from `clock` instead of the database's clock: for tests that move time
    /// by hand, so that a lease or a TTL ends without waiting for it. Every replica must use the
    /// same clock.
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
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The same store (the same pool and settings) for another response type, for a second
    /// route whose responses differ.
    pub fn with_response<S>(&self) -> PostgresStore<S> {
        PostgresStore {
            pool: self.pool.clone(),
            settings: self.settings.clone(),
            response: PhantomData,
        }
    }

    /// Creates the store's tables and indexes, or brings them to this version. Idempotent, and
    /// safe when several replicas start at once: it runs in one transaction under an advisory
    /// lock. See [the schema](PostgresStore#the-schema).
    ///
    /// # Errors
    ///
    /// [`StoreError::Schema`] if the database's schema is newer than this library's.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(sql::db)?;
        sqlx::query(
            "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.retry_idempotency_keys'))",
        )
        .execute(&mut *tx)
        .await
        .map_err(sql::db)?;
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS retry_idempotency_schema (\
                id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
        )
        .execute(&mut *tx)
        .await
        .map_err(sql::db)?;
        let found: Option<i32> =
            sqlx::query_scalar("SELECT version FROM retry_idempotency_schema WHERE id = 1")
                .fetch_optional(&mut *tx)
                .await
                .map_err(sql::db)?;
        let found = i64::from(found.unwrap_or(0));
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
            "INSERT INTO retry_idempotency_schema (id, version) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        )
        .bind(SCHEMA_VERSION as i32)
        .execute(&mut *tx)
        .await
        .map_err(sql::db)?;
        tx.commit().await.map_err(sql::db)
    }
}

impl<R> Clone for PostgresStore<R> {
    fn clone(&self) -> Self {
        self.with_response()
    }
}

impl<R> fmt::Debug for PostgresStore<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
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
    now: Option<i64>,
    lease: i64,
    ttl: i64,
}

/// What the claim statement found: claimed with this number, or the row another claim holds or
/// completed (fingerprint, state, response), or nothing visible yet.
enum Claimed {
    Mine(i64),
    Other(i64, String, Option<Vec<u8>>),
    Unseen,
}

/// Claims the row, or reads the row that another claim holds or completed, in one statement.
/// Retried with the same token, so that a claim that committed before its answer was lost (the
/// connection broke) is recognised as ours.
#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn claim_row(
    in_flight: &mut InFlight<Postgres>,
    row: &ClaimRow<'_>,
) -> Result<Claimed, sqlx::Error> {
    let found = sqlx::query(CLAIM)
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
    let found = found?;
    let Some(found) = found else {
        return Ok(Claimed::Unseen);
    };
    if found.try_get::<bool, _>(0)? {
        return Ok(Claimed::Mine(found.try_get(1)?));
    }
    Ok(Claimed::Other(
        found.try_get(2)?,
        found.try_get(3)?,
        found.try_get(4)?,
    ))
}

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn open_transaction(
    pool: &PgPool,
) -> Result<sqlx::Transaction<'static, Postgres>, sqlx::Error> {
    pool.begin().await
}

/// The completion statement, on a connection or in a transaction.
fn complete_statement(
    claim: &Claim,
    response: Vec<u8>,
    now: Option<i64>,
    ttl: i64,
) -> sqlx::query::Query<'static, Postgres, sqlx::postgres::PgArguments> {
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
    pool: &PgPool,
    claim: &Claim,
    response: &[u8],
    now: Option<i64>,
    ttl: i64,
) -> Result<u64, sqlx::Error> {
    let done = complete_statement(claim, response.to_vec(), now, ttl)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// Whether `claim`'s token still holds the key (running or completed by it), read afresh.
#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn holds_row(pool: &PgPool, claim: &Claim) -> Result<bool, sqlx::Error> {
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
    pool: &PgPool,
    claim: &Claim,
    now: Option<i64>,
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
async fn release_row(pool: &PgPool, claim: &Claim) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(RELEASE)
        .bind(claim.scope())
        .bind(claim.key().as_str())
        .bind(claim.token() as i64)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

#[retry(max = 2, base = "10ms", jitter = full, on = sql::retry_own_statement)]
async fn purge_batch(pool: &PgPool, now: Option<i64>) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(PURGE)
        .bind(now)
        .bind(PURGE_BATCH)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// Gives back the claim of a `begin` that was dropped (see [`InFlight`]).
fn give_back(
    connection: Option<sqlx::pool::PoolConnection<Postgres>>,
    pool: PgPool,
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
    pool: &PgPool,
    claim: &Claim,
    transaction: Option<sqlx::Transaction<'static, Postgres>>,
) -> Result<(), StoreError> {
    if let Some(transaction) = transaction {
        // A failed rollback leaves nothing to undo: the server rolls back the transaction of a
        // connection that broke.
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

impl<R> IdempotencyStore<R> for PostgresStore<R>
where
    R: Serialize + DeserializeOwned + Send + 'static,
{
    type Transaction = sqlx::Transaction<'static, Postgres>;

    fn begin_scoped<'s, 'a>(
        &'s self,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, R, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        super::metrics::begin("postgres", async move {
            super::validate_key(key.as_str())?;
            let row = ClaimRow {
                scope,
                key: key.as_str(),
                fingerprint: fingerprint.as_u64() as i64,
                token: sql::new_token(),
                now: None,
                lease: self.settings.lease_ms(),
                ttl: self.settings.ttl_ms(),
            };
            let claim = Claim::new(scope, key.clone(), 0, row.token as u64);
            let mut in_flight = InFlight::new(&self.pool, claim, give_back);
            for _ in 0..CLAIM_ROUNDS {
                let row = ClaimRow {
                    now: self.settings.injected_now_ms(),
                    ..row
                };
                // An error leaves `in_flight` armed: the claim may have committed before the
                // connection broke, and the drop gives it back.
                match claim_row(&mut in_flight, &row).await.map_err(sql::db)? {
                    Claimed::Mine(number) => {
                        in_flight.settled();
                        let claim = Claim::new(scope, key.clone(), number as u64, row.token as u64);
                        return Ok(Begin::Execute(Guard::new(self, claim)));
                    }
                    Claimed::Other(stored, state, response) => {
                        in_flight.settled();
                        return Ok(
                            match sql::decide(fingerprint, stored, &state, response.as_deref())? {
                                Decision::Replay(response) => Begin::Replay(response),
                                Decision::InProgress => Begin::InProgress,
                                Decision::Mismatch => Begin::Mismatch,
                            },
                        );
                    }
                    // Claimed by another transaction after this statement's snapshot (the
                    // snapshot had no row, or a free one), or released in between: run the
                    // statement again.
                    Claimed::Unseen => {}
                }
            }
            in_flight.settled();
            Ok(Begin::InProgress)
        })
    }

    sql::shared_methods!(injected_now_ms);

    fn metrics_label(&self) -> &'static str {
        "postgres"
    }
}

// The one-commit mode: the claim in the handler's transaction (after `now!`, which it uses).
mod transactional;

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A pool on a fresh schema of the server in `RETRY_TEST_POSTGRES_URL` (`.ci/postgres.sh`),
    /// or `None` after saying how to run the test (a failure when `CI` is set).
    async fn fresh_schema(test: &str) -> Option<PgPool> {
        let Ok(url) = std::env::var("RETRY_TEST_POSTGRES_URL") else {
            let message = format!(
                "{test} needs PostgreSQL: run it with \
                 `.ci/postgres.sh run cargo test -p retry-runtime --all-features --lib {test}`"
            );
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set, so a skip is a failure: {message}"
            );
            let _ = writeln!(std::io::stderr(), "skipped: {message}");
            return None;
        };
        let schema = format!("unit_{}", IdempotencyKey::new().as_str().replace('-', ""));
        let admin = PgPool::connect(&url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await
            .unwrap();
        let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
        Some(PgPool::connect_lazy_with(
            options.options([("search_path", schema.as_str())]),
        ))
    }

    #[tokio::test]
    async fn a_claim_retried_with_its_token_is_recognised_as_its_own() {
        let Some(pool) = fresh_schema("a_claim_retried_with_its_token").await else {
            return;
        };
        let store = PostgresStore::<()>::new(pool);
        store.migrate().await.unwrap();
        let row = ClaimRow {
            scope: "",
            key: "k",
            fingerprint: 7,
            token: 42,
            now: Some(1_000),
            lease: 60_000,
            ttl: 86_400_000,
        };
        let mine = |claimed| matches!(claimed, Claimed::Mine(1));
        let claim_once = async |row: &ClaimRow<'_>| {
            let claim = Claim::new("", IdempotencyKey::from("k"), 0, row.token as u64);
            let mut in_flight = InFlight::new(store.pool(), claim, give_back);
            let claimed = claim_row(&mut in_flight, row).await.unwrap();
            in_flight.settled();
            claimed
        };
        assert!(mine(claim_once(&row).await));
        // The answer to the first statement was lost: the same statement again is still ours.
        assert!(mine(claim_once(&row).await));
        // Another request's token does not get it.
        let other = ClaimRow { token: 43, ..row };
        let claimed = claim_once(&other).await;
        assert!(matches!(claimed, Claimed::Other(7, ref state, None) if state == "running"));
    }
}

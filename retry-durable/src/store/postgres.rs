//! [`PostgresStore`]: the keys in one PostgreSQL database (feature `postgres`).

use super::StoreError;
use super::sql::{SqlStore, db};
use sqlx::{PgPool, Postgres};

/// An [`IdempotencyStore`](super::IdempotencyStore) in one PostgreSQL database, shared by every
/// replica of the service: a retry that lands on another replica finds the key, and two requests
/// with the same new key on two replicas get exactly one [`Begin::Execute`](super::Begin::Execute).
/// The handler's own rows go in the same database, in the same transaction as the key's completion.
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
/// mismatch). The `INSERT` is not even attempted when the statement's snapshot shows the row
/// taken (`WHERE NOT EXISTS (…)`): `ON CONFLICT DO UPDATE` would lock the row it does not
/// update, and that lock would give a replay a transaction id and a flushed WAL record. A
/// replay locks nothing and writes no WAL. The primary key decides between two replicas: the second `INSERT` waits for the
/// first to commit and then finds the key taken. When that happens, the `SELECT` reads the
/// statement's snapshot, older than the claim that refused it: no row (a new key), or the row
/// as it was before that claim (expired, or running with an ended lease). The `SELECT` answers
/// only from a row that is not free, so `begin` never replays an expired response or calls the
/// running payload a mismatch; otherwise it runs the statement again, with a new snapshot that
/// sees the winning claim.
///
/// [`Guard::transaction`](super::Guard::transaction) opens a transaction at the server's default
/// isolation (read committed unless configured otherwise); `complete` runs `UPDATE … WHERE token =
/// $n` in it and commits, or rolls back when the token no longer holds the key. A takeover and a
/// completion lock the same row, so exactly one of them wins. At repeatable read or serializable
/// (the server's default, or `SET TRANSACTION` by the handler), a transaction that read the row
/// before a takeover changed it fails there with a serialization failure (40001) instead:
/// `complete` then rolls back, reads the row afresh, and answers
/// [`StoreError::Superseded`](super::StoreError::Superseded) when the token no longer holds the
/// key, at every isolation level. A 40001 reaches the caller as a transient
/// [`StoreError::Database`](super::StoreError::Database) only when the claim still holds the key,
/// and a retry may succeed.
///
/// Times come from the database's clock (`statement_timestamp()`), so that replicas whose clocks
/// differ agree on when a lease ends, or from [`with_clock`](PostgresStore::with_clock) in
/// tests. A replay is one round trip; a new key is one round trip before the handler and one
/// statement inside its transaction.
///
/// In the one-commit mode ([`Mode::OneCommit`](super::Mode::OneCommit)) the same statement is
/// the first of the handler's transaction: `BEGIN`, the claim (or the row it may not claim),
/// the handler's statements, the completion, one `COMMIT`, all on one connection of the pool,
/// with one WAL flush per new key. The claim writes the row's expiry already, so that the
/// completion changes no indexed column (a heap-only update, no index entries). A replay is
/// `BEGIN` and that statement, which writes nothing; its `ROLLBACK` goes out with the
/// connection's next message.
///
/// The statements are [`SqlStore`]'s, written once for both engines; this page lists what
/// PostgreSQL adds.
pub type PostgresStore<R> = SqlStore<Postgres, R>;

impl<R> SqlStore<Postgres, R> {
    /// A store on `pool`, with the default TTL, lease and size limit. The pool may be the
    /// service's own, so that its tables and the keys share one database.
    ///
    /// Give the pool a short `acquire_timeout` (sqlx's default is 30 s): while the database is
    /// down, `begin` fails only after it, and the service should answer 503 soon.
    pub fn new(pool: PgPool) -> Self {
        SqlStore::on(pool)
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
        let pool = crate::sql::postgres_pool(url).map_err(db)?;
        Ok(Self::new(pool))
    }

    /// Creates the store's tables and indexes, or brings them to this version. Idempotent, and
    /// safe when several replicas start at once: it runs in one transaction under an advisory
    /// lock. See [the schema](PostgresStore#the-schema).
    ///
    /// # Errors
    ///
    /// [`StoreError::Schema`] if the database's schema is newer than this library's.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        self.migrate_schema().await
    }
}

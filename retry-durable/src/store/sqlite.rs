//! [`SqliteStore`]: the keys in a SQLite file (feature `sqlite`).

use super::StoreError;
use super::sql::{SqlStore, db};
use sqlx::{Sqlite, SqlitePool};
use std::path::Path;

/// An [`IdempotencyStore`](super::IdempotencyStore) in a SQLite file: the embedded default. It
/// survives a restart of the service, and processes on one machine can share the file; the
/// handler's own rows go in the same file, in the same transaction as the key's completion.
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
/// `begin` first reads the key's row and whether it is free: a completed key (replay), a running
/// one (in progress) and a mismatch are answered from that read, which in write-ahead-log mode
/// never waits for a writer.
/// Only when the row is missing or free does it claim, with one `INSERT … ON CONFLICT (scope,
/// key) DO UPDATE … WHERE <free> RETURNING claim`, where a row is free when its TTL has passed,
/// or it is running with an ended lease and the same fingerprint. The read decides nothing about
/// an execution: the claim statement decides it alone, and SQLite runs one writer at a time, so
/// two processes cannot both claim. When it claims nothing (another request was faster), `begin`
/// reads again.
///
/// [`Guard::transaction`](super::Guard::transaction) opens `BEGIN IMMEDIATE`; `complete` runs an
/// `UPDATE … WHERE token = ?` in it and commits, or rolls back when the token no longer holds the
/// key. SQLite has one writer at a time: while a handler's transaction is open, the claim of
/// another new key waits for it (up to the busy timeout, then `begin` fails with a transient
/// error). Keep the transaction short: make calls to other systems before opening it.
///
/// In the one-commit mode ([`Mode::OneCommit`](super::Mode::OneCommit)) the same read comes
/// first, then `BEGIN IMMEDIATE` and the claim in the handler's transaction, the handler's
/// statements and the completion, and one `COMMIT`: one flushed commit per new key, and a
/// replay is the read alone.
///
/// One writer at a time also means that with many requests writing at once every write waits
/// for the lock, the handler's own included, by sleeping in SQLite's busy handler (1, 2, 5, 10,
/// 15, 20, 25, 25, 25, 50, 50, then 100 ms between tries): `bench/RESULTS.md` §6 measures p99s
/// of 35 to 178 ms with 16 writers on one pool for the handler alone, and 8 to 112 ms for a new
/// key with a store (`cargo run --release -p retry-bench --bin payments`, ten runs on a loaded
/// 2-core machine); a measurement from outside reached 334 ms. Choose PostgreSQL for a service
/// that writes from many requests at once.
///
/// Times come from SQLite's clock (the machine's), read by each statement, or from
/// [`with_clock`](SqliteStore::with_clock) in tests.
///
/// [`open`](SqliteStore::open) sets the file up for this: write-ahead logging (readers do not
/// wait for the writer), `synchronous = FULL` (a commit is on disk before `complete` returns),
/// and a busy timeout of 5 s (a writer waits that long for another); its pool does not ping a
/// connection before handing it out (sqlx's `test_before_acquire`), which a file does not need.
///
/// The statements are [`SqlStore`]'s, written once for both engines; this page lists what
/// SQLite adds.
pub type SqliteStore<R> = SqlStore<Sqlite, R>;

impl<R> SqlStore<Sqlite, R> {
    /// A store on `pool`, with the default TTL, lease and size limit. The pool may be the
    /// service's own, so that its tables and the keys share one file.
    ///
    /// Give the pool a busy timeout (sqlx's default is 5 s) and write-ahead logging, as
    /// [`open`](SqliteStore::open) does; an in-memory database (`sqlite::memory:`) is one per
    /// connection, so a pool of them does not share keys.
    pub fn new(pool: SqlitePool) -> Self {
        SqlStore::on(pool)
    }

    /// Opens (and creates, if missing) the SQLite file at `path`: write-ahead logging,
    /// `synchronous = FULL`, a busy timeout of 5 s. Call [`migrate`](SqliteStore::migrate) once
    /// before the first `begin`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let pool = crate::sql::sqlite_pool(path.as_ref()).await.map_err(db)?;
        Ok(Self::new(pool))
    }

    /// Creates the store's tables and indexes, or brings them to this version. Idempotent, and
    /// safe when several processes start at once: it runs in one `BEGIN IMMEDIATE`
    /// transaction. See [the schema](SqliteStore#the-schema).
    ///
    /// # Errors
    ///
    /// [`StoreError::Schema`] if the file's schema is newer than this library's.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        self.migrate_schema().await
    }
}

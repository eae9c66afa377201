//! The SQL layer that the stores and the queue share, written once: the two engines' dialects,
//! the fencing token, the database's clock, the versioned schema, and how a driver error is
//! classified.
//!
//! Each statement is written once, as a template, and rendered for an engine by [`render`]:
//! `{clock}` becomes the engine's clock in milliseconds, `{int}` and `{blob}` its column types,
//! `{serial}` its auto-numbered key, `{skip_locked}` what keeps two claimers of PostgreSQL off
//! each other's rows. Parameters are `$1`, `$2`, ... on both engines (sqlx numbers SQLite's `$N`
//! as PostgreSQL does).
//!
//! The stores and the queue reach the generic statements through [`Backend`], which
//! `sqlx::Sqlite` and `sqlx::Postgres` implement: the compiler checks that each engine has every
//! piece. Both run on the same typed pool, so that one transaction holds a store's claim and a
//! queue's job.

// Without an engine feature there is no store, and the queue has no driver to run on: the
// stores' part of the layer is compiled but unused.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_imports)
)]

mod run;

pub use run::{
    Affected, ClaimRow, Claimed, Generic, InFlight, Run, STORE_SCHEMA, StoreStatements, Taken,
};

use retry_runtime::Transient;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What differs between SQLite and PostgreSQL, as SQL text.
#[derive(Debug)]
pub struct Dialect {
    /// The database's clock, in milliseconds since the Unix epoch. PostgreSQL's is the time the
    /// statement arrived, one value for the whole statement (so that an index serves a
    /// comparison with it); SQLite's is fixed for one step of a statement.
    pub clock: &'static str,
    /// A 64-bit integer column.
    pub int: &'static str,
    /// A byte string column.
    pub blob: &'static str,
    /// An auto-numbered primary key column.
    pub serial: &'static str,
    /// Opens a transaction that writes: on SQLite it takes the write lock at once, so that it
    /// never fails halfway for want of it.
    pub begin: &'static str,
    /// Serializes two migrations of the table `{table}` in one transaction (after `begin`,
    /// which does it on SQLite).
    pub migration_lock: Option<&'static str>,
    /// What follows a claim's row selection, so that claimers on several replicas skip each
    /// other's rows instead of waiting for them (SQLite has one writer at a time).
    pub skip_locked: &'static str,
    /// Whether a statement may write in a common table expression and read in the same
    /// statement, so that a claim and the read of a refused claim are one round trip.
    pub writes_in_cte: bool,
}

/// SQLite's dialect.
pub static SQLITE: Dialect = Dialect {
    clock: "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
    int: "INTEGER",
    blob: "BLOB",
    serial: "INTEGER PRIMARY KEY AUTOINCREMENT",
    begin: "BEGIN IMMEDIATE",
    migration_lock: None,
    skip_locked: "",
    writes_in_cte: false,
};

/// PostgreSQL's dialect.
pub static POSTGRES: Dialect = Dialect {
    clock: "CAST(EXTRACT(EPOCH FROM statement_timestamp()) * 1000 AS BIGINT)",
    int: "BIGINT",
    blob: "BYTEA",
    serial: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    begin: "BEGIN",
    migration_lock: Some("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.{table}'))"),
    skip_locked: "FOR UPDATE SKIP LOCKED",
    writes_in_cte: true,
};

/// `template` in `dialect` (see the [module docs](self) for the placeholders).
pub fn render(template: &str, dialect: &Dialect) -> String {
    template
        .replace("{clock}", dialect.clock)
        .replace("{int}", dialect.int)
        .replace("{blob}", dialect.blob)
        .replace("{serial}", dialect.serial)
        .replace("{skip_locked}", dialect.skip_locked)
}

/// The database the idempotency stores and the job queue run on: `sqlx::Sqlite` (feature
/// `sqlite`) or `sqlx::Postgres` (feature `postgres`). Sealed: the statements are written for
/// these two.
pub trait Backend: sqlx::Database + sealed::Engine {}

pub mod sealed {
    /// What a [`Backend`](super::Backend) brings: its dialect, and the generic statements
    /// instantiated for its driver (a proof, checked where each engine implements it, that the
    /// driver encodes and decodes every type the statements use).
    pub trait Engine: sqlx::Database {
        /// The engine's SQL.
        const DIALECT: &'static super::Dialect;
        /// The stores' statements, on this driver.
        type Run: super::Run<Self>;
        /// The queue's statements, on this driver.
        type Queue: crate::queue::sql::RunQueue<Self>;
        /// A pool on `location`, set up as the stores and the queue want it; an error if the
        /// location is another engine's.
        fn connect(
            location: &crate::queue::Location,
        ) -> crate::store::BoxFuture<'_, Result<sqlx::Pool<Self>, sqlx::Error>>;
        /// The name of the store on this engine, for `Debug`.
        const STORE: &'static str;
        /// The `store` label of the metrics: `sqlite` or `postgres`.
        const LABEL: &'static str;
        /// The store's statements rendered for this engine, once.
        fn statements() -> &'static super::StoreStatements {
            super::StoreStatements::of(Self::DIALECT)
        }
    }
}

#[cfg(feature = "sqlite")]
impl sealed::Engine for sqlx::Sqlite {
    const DIALECT: &'static Dialect = &SQLITE;
    type Run = Generic;
    type Queue = Generic;
    const STORE: &'static str = "SqliteStore";
    const LABEL: &'static str = "sqlite";

    fn connect(
        location: &crate::queue::Location,
    ) -> crate::store::BoxFuture<'_, Result<sqlx::Pool<Self>, sqlx::Error>> {
        Box::pin(async move {
            match location {
                crate::queue::Location::Sqlite(path) => sqlite_pool(path).await,
                crate::queue::Location::Postgres(_) => Err(other_engine("a SQLite file")),
            }
        })
    }
}

/// A pool on the SQLite file at `path`, created if missing: write-ahead logging (readers never
/// wait for the writer), `synchronous = FULL` (a commit is on disk when it returns), and a busy
/// timeout of 5 s (a writer waits that long for another). A connection is not pinged when the
/// pool hands it out: a file does not drop a connection as a network does, and the ping would
/// be one more call to the connection's thread for every statement or transaction.
#[cfg(feature = "sqlite")]
pub async fn sqlite_pool(path: &std::path::Path) -> Result<sqlx::SqlitePool, sqlx::Error> {
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(5));
    SqlitePoolOptions::new()
        .test_before_acquire(false)
        .connect_with(options)
        .await
}

/// A pool on the PostgreSQL database at `url`, which connects on first use (so that a service
/// starts while its database is down), with an acquire timeout of 3 s.
#[cfg(feature = "postgres")]
pub fn postgres_pool(url: &str) -> Result<sqlx::PgPool, sqlx::Error> {
    sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(3))
        .connect_lazy(url)
}

/// The error of a location of the other engine.
fn other_engine(expected: &str) -> sqlx::Error {
    sqlx::Error::Configuration(
        format!("this queue runs on {expected}: open it with the location of one").into(),
    )
}
#[cfg(feature = "sqlite")]
impl Backend for sqlx::Sqlite {}

#[cfg(feature = "postgres")]
impl sealed::Engine for sqlx::Postgres {
    const DIALECT: &'static Dialect = &POSTGRES;
    type Run = Generic;
    type Queue = Generic;
    const STORE: &'static str = "PostgresStore";
    const LABEL: &'static str = "postgres";

    fn connect(
        location: &crate::queue::Location,
    ) -> crate::store::BoxFuture<'_, Result<sqlx::Pool<Self>, sqlx::Error>> {
        Box::pin(async move {
            match location {
                crate::queue::Location::Postgres(url) => postgres_pool(url),
                crate::queue::Location::Sqlite(_) => Err(other_engine("a PostgreSQL URL")),
            }
        })
    }
}
#[cfg(feature = "postgres")]
impl Backend for sqlx::Postgres {}

/// A fresh fencing token: random, so that it names one claim (of a key or a job) across
/// processes and restarts.
pub fn new_token() -> i64 {
    crate::store::random_token() as i64
}

/// Longer durations count as forever: about 36 million years in milliseconds, far from `i64`
/// overflow when a lease and a TTL are added to the time.
pub const FOREVER_MS: i64 = 1 << 60;

/// A duration in milliseconds for a column, capped at [`FOREVER_MS`].
pub fn capped_ms(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).map_or(FOREVER_MS, |ms| ms.min(FOREVER_MS))
}

/// A time in milliseconds since the Unix epoch, as the statements' clock reads it (for a clock
/// that a test injects in place of the database's).
pub fn millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, capped_ms)
}

/// The classifier of the layer's own statements: what is transient, except what has already
/// waited its whole budget: a pool timeout (the pool's `acquire_timeout`) and SQLite's busy
/// (the connection's busy timeout).
pub fn retry_own_statement(error: &sqlx::Error) -> bool {
    const SQLITE_BUSY: u32 = 5;
    let busy = error
        .as_database_error()
        .and_then(|e| e.code())
        .and_then(|code| code.parse::<u32>().ok())
        .is_some_and(|code| code & 0xff == SQLITE_BUSY);
    !busy && !matches!(error, sqlx::Error::PoolTimedOut) && error.is_transient()
}

/// Whether `error` says that `table` is missing (PostgreSQL's 42P01, SQLite's "no such table").
pub fn missing_table(error: &sqlx::Error, table: &str) -> bool {
    let sqlx::Error::Database(database) = error else {
        return false;
    };
    let message = database.message();
    let missing =
        database.code().as_deref() == Some("42P01") || message.starts_with("no such table");
    missing && message.contains(table)
}

/// A part's tables and how to bring them to the newest version: the idempotency store's, the
/// queue's.
#[derive(Debug)]
pub struct Schema {
    /// What the tables are for, in messages ("the idempotency store").
    pub what: &'static str,
    /// The main table, whose name keys the migration's lock.
    pub table: &'static str,
    /// The table that keeps the version: one row, `id = 1`.
    pub versions: &'static str,
    /// The migrations as templates ([`render`]): the first brings version 0 to 1, and so on.
    pub migrations: &'static [&'static str],
}

impl Schema {
    /// The version [`Run::migrate`] brings a database to.
    pub fn version(&self) -> i64 {
        self.migrations.len() as i64
    }
}

/// Why a migration failed.
#[derive(Debug)]
pub enum MigrateError {
    /// A statement failed.
    Database(sqlx::Error),
    /// The database's schema is newer than this library's.
    Newer(String),
}

impl From<sqlx::Error> for MigrateError {
    fn from(error: sqlx::Error) -> Self {
        MigrateError::Database(error)
    }
}

impl MigrateError {
    pub fn newer(schema: &Schema, found: i64) -> Self {
        MigrateError::Newer(format!(
            "{}'s schema is version {found}, newer than version {} that this retry-durable \
             knows: upgrade retry-durable in this service, or run it against another database",
            schema.what,
            schema.version()
        ))
    }
}

impl fmt::Display for MigrateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigrateError::Database(e) => write!(f, "{e}"),
            MigrateError::Newer(message) => f.write_str(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_capped_far_from_overflow() {
        assert_eq!(capped_ms(Duration::from_millis(1500)), 1500);
        assert_eq!(capped_ms(Duration::MAX), FOREVER_MS);
        assert!(
            FOREVER_MS.checked_mul(3).is_some(),
            "now + lease + ttl fits"
        );
        assert_eq!(millis(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }

    #[test]
    fn templates_render_each_dialect() {
        let template =
            "CREATE TABLE t (id {serial}, n {int}, b {blob}); SELECT {clock} {skip_locked}";
        assert_eq!(
            render(template, &SQLITE),
            "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER, b BLOB); \
             SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER) "
        );
        assert!(render(template, &POSTGRES).ends_with("AS BIGINT) FOR UPDATE SKIP LOCKED"));
    }
}

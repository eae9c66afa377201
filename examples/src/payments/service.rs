//! The payment service: `POST /payouts` with `Idempotency-Key`, exactly once per key.
//!
//! The keys are kept by `retry_durable::store` in the service's own database (a SQLite file by
//! default, or PostgreSQL), and the ledger is a table in the same database. A payout is:
//!
//! 1. `store.begin(&key, fingerprint)`: one statement claims the key, or says that it was paid
//!    before (the stored receipt is sent again), is being paid right now (409), or was used for
//!    another payout (422). If the database cannot be reached, nothing is executed: 503 with
//!    `Retry-After`, which the client's `#[retry]` treats as a passing failure.
//! 2. The bank transfer, with the same key passed on: the bank is outside this database, and a
//!    payout executed again after a crash gets the first transfer back.
//! 3. The ledger row, written in `guard.transaction()`.
//! 4. The receipt e-mail, a job in the [`mails`] queue (`retry_durable::queue`, on
//!    the same pool), enqueued in that same transaction.
//! 5. `guard.complete(&receipt)`: the receipt is stored and the key completed in that same
//!    transaction, and it commits. The ledger row, the e-mail's job and the completed key commit
//!    together or not at all: a crash before the commit leaves none of them (the key is taken
//!    over once its lease ends), a crash after it leaves all three (the retry gets the stored
//!    receipt, and the e-mail goes out once, by a worker).
//!
//! With `--one-commit` (no bank: the payout is the ledger row and the e-mail's job, so every
//! side effect lives in the database) steps 1, 3, 4 and 5 are one transaction:
//! `store.begin_with(Mode::OneCommit, "", &key, fingerprint)` claims the key as the transaction's first
//! statement, the ledger row and the job follow, and `guard.complete(&receipt)` commits them
//! all: one durable commit per payout instead of two. A concurrent duplicate waits for that
//! transaction and gets the stored receipt; a crash before the commit leaves nothing, and the
//! retry pays at once, without waiting for a lease. The two modes are one handler: they differ
//! in the guard `begin_with` hands out, not in the code.
//!
//! With `--send-mails` the service also runs a [`Worker`](retry_durable::queue::Worker) that
//! sends the receipts ([`mails::send`]).
//!
//! [`run`] is the whole service as the `payments-service` binary and the example start it;
//! [`serve`] runs the handler on any SQL store.

use super::bank;
use super::faults::{Faults, Listener, Peer, Step};
use super::mails::{self, ReceiptMail};
use super::{Cents, ClaimId, PayoutRequest, Receipt, short};
use crate::metrics::Metrics;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use retry_durable::queue::Queue;
use retry_durable::store::{
    Backend, Begin, BoxFuture, DEFAULT_LEASE, Fingerprint, IdempotencyStore, Mode, PostgresStore,
    SqlStore, SqliteStore, StoreOptions, key_from_header,
};
use retry_runtime::{IdempotencyKey, Transient};
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres, Row, Sqlite, SqlitePool};
use std::error::Error;
use std::fmt;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The line a service prints once it accepts requests, followed by its URL.
pub const LISTENING: &str = "listening on";

/// Where the keys and the ledger are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file, created if missing.
    Sqlite(PathBuf),
    /// A PostgreSQL URL, `postgres://user@host:port/database`.
    Postgres(String),
}

impl Database {
    /// The SQLite file of the example: `payments.db` in a directory of its own under the
    /// system's temp dir.
    pub fn default_sqlite() -> Self {
        Database::Sqlite(
            std::env::temp_dir()
                .join("retry-payments-example")
                .join("payments.db"),
        )
    }

    /// As given on the command line: `sqlite:PATH` (or `sqlite://PATH`), `postgres://...`.
    pub fn url(&self) -> String {
        match self {
            Database::Sqlite(path) => format!("sqlite:{}", path.display()),
            Database::Postgres(url) => url.clone(),
        }
    }
}

impl FromStr for Database {
    type Err = String;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Database::Postgres(url.to_owned()))
        } else if let Some(path) = url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
            .filter(|path| !path.is_empty())
        {
            Ok(Database::Sqlite(PathBuf::from(path)))
        } else {
            Err(format!(
                "`{url}` is not a database URL: expected `postgres://user@host:port/database` or \
                 `sqlite:PATH`"
            ))
        }
    }
}

impl fmt::Display for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Database::Sqlite(path) => write!(f, "SQLite file {}", path.display()),
            Database::Postgres(url) => write!(f, "PostgreSQL {url}"),
        }
    }
}

/// The service's settings: its command line.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where to listen; port 0 for a free one. `--listen`, default `127.0.0.1:0`.
    pub listen: SocketAddr,
    /// `--database-url`, else `DATABASE_URL`, else [`Database::default_sqlite`].
    pub database: Database,
    /// The bank's URL (`--bank-url`); without one the payout is the ledger row alone.
    pub bank: Option<String>,
    /// How long a claimed key is held for its payout (`--lease-ms`, default 60 s).
    pub lease: Duration,
    /// How long a request waits for a PostgreSQL connection before it answers 503
    /// (`--db-timeout-ms`, default 1 s).
    pub db_timeout: Duration,
    /// `--stop-at STEP`: see [`faults`](super::faults).
    pub stop_at: Option<Step>,
    /// `--stop-key KEY`: stop at `stop_at` only in the payout of this idempotency key.
    pub stop_key: Option<String>,
    /// `--lose-first-response`: the first payout's response is lost after the commit.
    pub lose_first_response: bool,
    /// `--one-commit`: claim each key in the payout's own transaction (one durable commit per
    /// payout). Only without a bank: a call to another system must not run inside the
    /// transaction.
    pub one_commit: bool,
    /// `--send-mails`: run a worker that sends the receipt e-mails the payouts queued.
    pub send_mails: bool,
    /// The name in the log lines (`--name`, default `service`).
    pub name: String,
    /// `--quiet`: no log line per request.
    pub quiet: bool,
    /// `--metrics`: `GET /metrics` on the same port, the retry loops' and the store's
    /// instruments in Prometheus's text format ([`crate::metrics`]).
    pub metrics: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            database: Database::default_sqlite(),
            bank: None,
            lease: DEFAULT_LEASE,
            db_timeout: Duration::from_secs(1),
            stop_at: None,
            stop_key: None,
            lose_first_response: false,
            one_commit: false,
            send_mails: false,
            name: "service".to_owned(),
            quiet: false,
            metrics: false,
        }
    }
}

/// How to start the service, for `--help` and errors.
pub const USAGE: &str = "\
usage: payments-service [--listen ADDR:PORT] [--database-url URL] [--bank-url URL]
                        [--lease-ms N] [--db-timeout-ms N] [--stop-at STEP] [--stop-key KEY]
                        [--lose-first-response] [--one-commit] [--send-mails]
                        [--name NAME] [--quiet] [--metrics]

  --database-url URL   postgres://user@host:port/database, or sqlite:PATH
                       (default: DATABASE_URL, else a SQLite file in the temp dir)
  --stop-at STEP       stop at STEP of the first payout and wait to be killed: before-begin,
                       after-begin, after-ledger-write, after-enqueue, after-commit,
                       after-response
  --stop-key KEY       stop only in the payout of idempotency key KEY (with --stop-at)
  --one-commit         claim each key in the payout's own transaction: one commit per payout
                       (not with --bank-url)
  --send-mails         run a worker that sends the receipt e-mails the payouts queued
  --metrics            serve GET /metrics (Prometheus's text format) on the same port";

impl Config {
    /// Reads the command line (without the program's name). `DATABASE_URL` is read when
    /// `--database-url` is not given.
    pub fn from_args(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut config = Config::default();
        let mut database = None;
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| format!("`{arg}` needs a value\n{USAGE}"))
            };
            let millis = |text: String| {
                text.parse()
                    .map(Duration::from_millis)
                    .map_err(|_| format!("`{arg}` takes milliseconds, not `{text}`"))
            };
            match arg.as_str() {
                "--listen" => {
                    let text = value()?;
                    config.listen = text
                        .parse()
                        .map_err(|_| format!("`--listen` takes ADDR:PORT, not `{text}`"))?;
                }
                "--database-url" => database = Some(value()?.parse()?),
                "--bank-url" => config.bank = Some(value()?),
                "--lease-ms" => config.lease = millis(value()?)?,
                "--db-timeout-ms" => config.db_timeout = millis(value()?)?,
                "--stop-at" => config.stop_at = Some(value()?.parse()?),
                "--stop-key" => config.stop_key = Some(value()?),
                "--lose-first-response" => config.lose_first_response = true,
                "--one-commit" => config.one_commit = true,
                "--send-mails" => config.send_mails = true,
                "--name" => config.name = value()?,
                "--quiet" => config.quiet = true,
                "--metrics" => config.metrics = true,
                _ => return Err(format!("unknown argument `{arg}`\n{USAGE}")),
            }
        }
        if config.one_commit && config.bank.is_some() {
            return Err(
                "`--one-commit` is for payouts whose every effect is in the database: \
                        a bank call must not run inside the transaction, so drop `--bank-url` \
                        or `--one-commit`"
                    .to_owned(),
            );
        }
        config.database = match (database, std::env::var("DATABASE_URL")) {
            (Some(database), _) => database,
            (None, Ok(url)) => url.parse()?,
            (None, Err(_)) => Database::default_sqlite(),
        };
        Ok(config)
    }

    /// The command line that [`Config::from_args`] reads back as this configuration.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--listen".to_owned(),
            self.listen.to_string(),
            "--database-url".to_owned(),
            self.database.url(),
            "--lease-ms".to_owned(),
            self.lease.as_millis().to_string(),
            "--db-timeout-ms".to_owned(),
            self.db_timeout.as_millis().to_string(),
            "--name".to_owned(),
            self.name.clone(),
        ];
        if let Some(bank) = &self.bank {
            args.extend(["--bank-url".to_owned(), bank.clone()]);
        }
        if let Some(step) = self.stop_at {
            args.extend(["--stop-at".to_owned(), step.name().to_owned()]);
        }
        if let Some(key) = &self.stop_key {
            args.extend(["--stop-key".to_owned(), key.clone()]);
        }
        if self.lose_first_response {
            args.push("--lose-first-response".to_owned());
        }
        if self.one_commit {
            args.push("--one-commit".to_owned());
        }
        if self.send_mails {
            args.push("--send-mails".to_owned());
        }
        if self.quiet {
            args.push("--quiet".to_owned());
        }
        if self.metrics {
            args.push("--metrics".to_owned());
        }
        args
    }
}

/// Opens the database, creates the store's tables and the ledger, listens, prints
/// `listening on http://ADDR:PORT` and serves until the process ends.
pub async fn run(config: Config) -> Result<(), Box<dyn Error>> {
    let options = Options {
        bank: config.bank.clone(),
        faults: Arc::new(
            Faults::new(config.stop_at, config.lose_first_response)
                .for_key(config.stop_key.clone()),
        ),
        name: config.name.clone(),
        verbose: !config.quiet,
        metrics: if config.metrics {
            Some(Metrics::install()?)
        } else {
            None
        },
    };
    let store_options = StoreOptions::new().lease(config.lease);
    let mode = if config.one_commit {
        Mode::OneCommit
    } else {
        Mode::Lease
    };
    match &config.database {
        Database::Sqlite(path) => {
            if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let store = SqliteStore::<Receipt>::open(path)
                .await?
                .with_options(store_options);
            store.migrate().await?;
            create_sqlite_ledger(store.pool()).await?;
            start(config, store, mode, options).await
        }
        Database::Postgres(url) => {
            let pool = PgPoolOptions::new()
                .acquire_timeout(config.db_timeout)
                .connect_lazy(url)?;
            let store = PostgresStore::<Receipt>::new(pool).with_options(store_options);
            store.migrate().await?;
            create_postgres_ledger(store.pool()).await?;
            start(config, store, mode, options).await
        }
    }
}

/// Opens the mails queue on the store's pool, starts its worker if asked, listens and serves.
async fn start<B: Backend>(
    config: Config,
    store: SqlStore<B, Receipt>,
    mode: Mode,
    options: Options,
) -> Result<(), Box<dyn Error>>
where
    sqlx::Transaction<'static, B>: LedgerTransaction,
{
    let mails = Queue::on(store.pool().clone(), mails::QUEUE).await?;
    if config.send_mails {
        let (mails, lease) = (mails.clone(), config.lease);
        tokio::spawn(async move {
            if let Err(e) = mails::send(&mails, lease, false).await {
                let _ = writeln!(io::stderr(), "the mail worker stopped: {e}");
            }
        });
    }
    let listener = listening(config.listen).await?;
    serve(listener, store, mails, mode, options).await?;
    Ok(())
}

/// Binds `addr` and prints `listening on http://ADDR:PORT`: from here on, connections wait in
/// the listener's queue until the service accepts them.
async fn listening(addr: SocketAddr) -> io::Result<TcpListener> {
    let listener = bind(addr).await?;
    let mut out = io::stdout().lock();
    writeln!(out, "{LISTENING} http://{}", listener.local_addr()?)?;
    out.flush()?;
    Ok(listener)
}

/// Binds `addr`. A service restarted on the port it had waits for the port to be free (up to
/// five seconds): the old process's sockets may not be gone yet.
async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let mut waited = Duration::ZERO;
    loop {
        match TcpListener::bind(addr).await {
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && waited < Duration::from_secs(5) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                waited += Duration::from_millis(20);
            }
            bound => return bound,
        }
    }
}

/// What [`serve`] needs besides the store.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// The bank's URL; without one the payout is the ledger row alone.
    pub bank: Option<String>,
    /// Where to stop; see [`faults`](super::faults).
    pub faults: Arc<Faults>,
    /// The name in the log lines.
    pub name: String,
    /// One log line per request.
    pub verbose: bool,
    /// `GET /metrics` beside `POST /payouts`, with this process's recorder.
    pub metrics: Option<Metrics>,
}

/// The ledger row of a payout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The payout's `Idempotency-Key`.
    pub key: String,
    /// The claim it settles.
    pub claim: ClaimId,
    /// How much.
    pub cents: Cents,
    /// The bank's transfer, if the service pays through a bank.
    pub transfer: Option<String>,
    /// The store's claim number: 1 for the key's first execution, 2 after a takeover.
    pub execution: u64,
}

/// A transaction the ledger can be written in: the guard's, for the SQL stores.
pub trait LedgerTransaction {
    /// Appends `entry` to the ledger and returns its row's id.
    fn record<'a>(&'a mut self, entry: &'a Entry) -> BoxFuture<'a, Result<i64, sqlx::Error>>;

    /// Records that the receipt e-mail of the payout `key` was sent (the mail server of the
    /// example: a table, so that the tests count the e-mails).
    fn record_mail<'a>(
        &'a mut self,
        key: &'a str,
        mail: &'a ReceiptMail,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>>;
}

// No unique constraint on `payout_key`, on purpose: the idempotency store is what keeps a
// payout single (and the job's completion an e-mail), and the fault tests count the rows to
// prove it. A production ledger would add one as a second line of defence.
const SQLITE_LEDGER: &str = r"
CREATE TABLE IF NOT EXISTS ledger (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    payout_key  TEXT    NOT NULL,
    claim       INTEGER NOT NULL,
    cents       INTEGER NOT NULL,
    transfer    TEXT,
    execution   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_payout_key ON ledger (payout_key);
CREATE TABLE IF NOT EXISTS sent_mails (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    payout_key  TEXT    NOT NULL,
    receipt     TEXT    NOT NULL
);";

const POSTGRES_LEDGER: &str = r"
CREATE TABLE IF NOT EXISTS ledger (
    id          BIGSERIAL PRIMARY KEY,
    payout_key  TEXT   NOT NULL,
    claim       BIGINT NOT NULL,
    cents       BIGINT NOT NULL,
    transfer    TEXT,
    execution   BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_payout_key ON ledger (payout_key);
CREATE TABLE IF NOT EXISTS sent_mails (
    id          BIGSERIAL PRIMARY KEY,
    payout_key  TEXT   NOT NULL,
    receipt     TEXT   NOT NULL
);";

const INSERT_MAIL: &str = "INSERT INTO sent_mails (payout_key, receipt) VALUES ($1, $2)";

const INSERT_ENTRY: &str = "INSERT INTO ledger (payout_key, claim, cents, transfer, execution) \
                            VALUES ($1, $2, $3, $4, $5) RETURNING id";

/// Creates the ledger table in a SQLite file, if it is missing.
pub async fn create_sqlite_ledger(pool: &SqlitePool) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(SQLITE_LEDGER).execute(pool).await.map(drop)
}

/// Creates the ledger table in a PostgreSQL database, if it is missing. Under an advisory lock,
/// so that replicas starting together do not trip over each other's `CREATE TABLE`.
pub async fn create_postgres_ledger(pool: &PgPool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.ledger'))")
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(POSTGRES_LEDGER).execute(&mut *tx).await?;
    tx.commit().await
}

/// The ledger's insert, the same statement on either database.
macro_rules! ledger_transaction {
    ($($db:ty),*) => {$(
        impl LedgerTransaction for sqlx::Transaction<'static, $db> {
            fn record<'a>(&'a mut self, entry: &'a Entry) -> BoxFuture<'a, Result<i64, sqlx::Error>> {
                Box::pin(
                    sqlx::query_scalar(INSERT_ENTRY)
                        .bind(entry.key.as_str())
                        .bind(i64::from(entry.claim.0))
                        .bind(entry.cents.0 as i64)
                        .bind(entry.transfer.as_deref())
                        .bind(entry.execution as i64)
                        .fetch_one(&mut **self),
                )
            }

            fn record_mail<'a>(
                &'a mut self,
                key: &'a str,
                mail: &'a ReceiptMail,
            ) -> BoxFuture<'a, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query(INSERT_MAIL)
                        .bind(key)
                        .bind(mail.receipt.as_str())
                        .execute(&mut **self)
                        .await
                        .map(drop)
                })
            }
        }
    )*};
}

ledger_transaction!(Sqlite, Postgres);

/// A row of the ledger, as [`read_ledger`] returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerRow {
    /// The row's id: the receipt is `P-` and this.
    pub id: i64,
    /// What was written.
    pub entry: Entry,
}

/// Every row of the ledger in `database`, in order, for the example's output and the tests.
pub async fn read_ledger(database: &Database) -> Result<Vec<LedgerRow>, sqlx::Error> {
    const SELECT: &str =
        "SELECT id, payout_key, claim, cents, transfer, execution FROM ledger ORDER BY id";
    match database {
        Database::Sqlite(path) => {
            let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
            let pool = SqlitePool::connect_with(options).await?;
            let rows = sqlx::query(SELECT).fetch_all(&pool).await?;
            let rows = rows.iter().map(ledger_row).collect();
            pool.close().await;
            rows
        }
        Database::Postgres(url) => {
            let pool = PgPool::connect(url).await?;
            let rows = sqlx::query(SELECT).fetch_all(&pool).await?;
            let rows = rows.iter().map(ledger_row).collect();
            pool.close().await;
            rows
        }
    }
}

/// What the database holds for one payout key: what the fault tests check after a kill.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PayoutRecord {
    /// The key's state in the idempotency store (`running`, `completed`), if it has a row.
    pub key_state: Option<String>,
    /// The ledger rows written for the key.
    pub ledger_rows: usize,
    /// The states of the receipt e-mail jobs with the key (`available`, `running`, `done`,
    /// `dead`).
    pub mail_jobs: Vec<String>,
    /// The receipt e-mails sent for the key.
    pub mails_sent: usize,
}

impl PayoutRecord {
    /// Whether the payout committed whole: the key completed, one ledger row, one e-mail job.
    pub fn is_whole(&self) -> bool {
        self.key_state.as_deref() == Some("completed")
            && self.ledger_rows == 1
            && self.mail_jobs.len() == 1
    }

    /// Whether nothing of the payout committed: no completed key, no ledger row, no job.
    pub fn is_empty(&self) -> bool {
        self.key_state.as_deref() != Some("completed")
            && self.ledger_rows == 0
            && self.mail_jobs.is_empty()
    }
}

/// A connection to a payment database for reading [`PayoutRecord`]s, kept open while a test
/// reads several.
pub enum PayoutRecords {
    /// A SQLite file.
    Sqlite(SqlitePool),
    /// A PostgreSQL database.
    Postgres(PgPool),
}

impl PayoutRecords {
    /// Connects to `database` (one connection).
    pub async fn open(database: &Database) -> Result<Self, sqlx::Error> {
        Ok(match database {
            Database::Sqlite(path) => {
                let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
                let pool = sqlx::sqlite::SqlitePoolOptions::new().max_connections(1);
                PayoutRecords::Sqlite(pool.connect_with(options).await?)
            }
            Database::Postgres(url) => {
                let pool = PgPoolOptions::new().max_connections(1);
                PayoutRecords::Postgres(pool.connect(url).await?)
            }
        })
    }

    /// What the database holds for the payout `key` (see [`PayoutRecord`]).
    pub async fn of(&self, key: &str) -> Result<PayoutRecord, sqlx::Error> {
        // One statement, so that a test that polls it makes one round trip per look.
        const READ: &str = "SELECT \
            (SELECT state FROM retry_idempotency_keys WHERE scope = '' AND key = $1), \
            (SELECT COUNT(*) FROM ledger WHERE payout_key = $1), \
            (SELECT COUNT(*) FROM sent_mails WHERE payout_key = $1), \
            state FROM (SELECT 1) AS one \
            LEFT JOIN retry_jobs ON queue = $2 AND key = $1 ORDER BY id";
        macro_rules! read {
            ($pool:expr) => {{
                let rows: Vec<(Option<String>, i64, i64, Option<String>)> = sqlx::query_as(READ)
                    .bind(key)
                    .bind(mails::QUEUE)
                    .fetch_all($pool)
                    .await?;
                let (key_state, ledger, sent) = match rows.first() {
                    Some((state, ledger, sent, _)) => (state.clone(), *ledger, *sent),
                    None => (None, 0, 0),
                };
                PayoutRecord {
                    key_state,
                    ledger_rows: usize::try_from(ledger).unwrap_or(0),
                    mail_jobs: rows.into_iter().filter_map(|row| row.3).collect(),
                    mails_sent: usize::try_from(sent).unwrap_or(0),
                }
            }};
        }
        Ok(match self {
            PayoutRecords::Sqlite(pool) => read!(pool),
            PayoutRecords::Postgres(pool) => read!(pool),
        })
    }

    /// The receipt e-mail jobs of the payout `key`, each as its state, claims, when it may run
    /// next (`run_at`, as the database writes it) and last error: what a test prints when a job
    /// is not done in time.
    pub async fn mail_jobs_of(&self, key: &str) -> Result<Vec<String>, sqlx::Error> {
        const SELECT: &str = "SELECT state, attempts, CAST(run_at AS TEXT), last_error \
                              FROM retry_jobs WHERE queue = $2 AND key = $1 ORDER BY id";
        type Row = (String, i32, Option<String>, Option<String>);
        let rows: Vec<Row> = match self {
            PayoutRecords::Sqlite(pool) => {
                let query = sqlx::query_as(SELECT).bind(key).bind(mails::QUEUE);
                query.fetch_all(pool).await?
            }
            PayoutRecords::Postgres(pool) => {
                let query = sqlx::query_as(SELECT).bind(key).bind(mails::QUEUE);
                query.fetch_all(pool).await?
            }
        };
        Ok(rows
            .into_iter()
            .map(|(state, attempts, run_at, error)| {
                let run_at = run_at.unwrap_or_default();
                let error = error.unwrap_or_default();
                format!("{state}, {attempts} claims, run_at {run_at}, last error: {error:?}")
            })
            .collect())
    }

    /// The ledger's rows for the payout `key`.
    pub async fn ledger_of(&self, key: &str) -> Result<Vec<LedgerRow>, sqlx::Error> {
        const SELECT: &str = "SELECT id, payout_key, claim, cents, transfer, execution \
                              FROM ledger WHERE payout_key = $1 ORDER BY id";
        match self {
            PayoutRecords::Sqlite(pool) => {
                let rows = sqlx::query(SELECT).bind(key).fetch_all(pool).await?;
                rows.iter().map(ledger_row).collect()
            }
            PayoutRecords::Postgres(pool) => {
                let rows = sqlx::query(SELECT).bind(key).fetch_all(pool).await?;
                rows.iter().map(ledger_row).collect()
            }
        }
    }

    /// Closes the connection.
    pub async fn close(self) {
        match self {
            PayoutRecords::Sqlite(pool) => pool.close().await,
            PayoutRecords::Postgres(pool) => pool.close().await,
        }
    }
}

/// What `database` holds for the payout `key` (see [`PayoutRecord`]), on a connection of its
/// own.
pub async fn payout_record(database: &Database, key: &str) -> Result<PayoutRecord, sqlx::Error> {
    let records = PayoutRecords::open(database).await?;
    let record = records.of(key).await;
    records.close().await;
    record
}

fn ledger_row<R: Row>(row: &R) -> Result<LedgerRow, sqlx::Error>
where
    usize: sqlx::ColumnIndex<R>,
    i64: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    String: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
    Option<String>: sqlx::Type<R::Database> + for<'r> sqlx::Decode<'r, R::Database>,
{
    let number = |i: usize| row.try_get::<i64, _>(i);
    Ok(LedgerRow {
        id: number(0)?,
        entry: Entry {
            key: row.try_get(1)?,
            claim: ClaimId(number(2)? as u32),
            cents: Cents(number(3)? as u64),
            transfer: row.try_get(4)?,
            execution: number(5)? as u64,
        },
    })
}

struct App<B: Backend> {
    store: SqlStore<B, Receipt>,
    mails: Queue<B>,
    mode: Mode,
    bank: Option<String>,
    http: reqwest::Client,
    faults: Arc<Faults>,
    name: String,
    verbose: bool,
}

impl<B: Backend> App<B> {
    fn say(&self, line: fmt::Arguments<'_>) {
        if self.verbose {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "    [{}] {line}", self.name);
            let _ = out.flush();
        }
    }
}

/// Serves `POST /payouts` on `listener` with `store` until the process ends: each payout
/// claims its key in `mode`, and queues its receipt e-mail in `mails` (on the store's pool) in
/// the transaction that completes the key. The ledger table must be there
/// ([`create_sqlite_ledger`], [`create_postgres_ledger`]). Refuses the one-commit mode with a
/// bank in `options`: the bank's call would run inside the transaction.
pub async fn serve<B: Backend>(
    listener: TcpListener,
    store: SqlStore<B, Receipt>,
    mails: Queue<B>,
    mode: Mode,
    options: Options,
) -> io::Result<()>
where
    sqlx::Transaction<'static, B>: LedgerTransaction,
{
    if mode == Mode::OneCommit && options.bank.is_some() {
        return Err(io::Error::other(
            "the one-commit mode is for ledger-only payouts: no bank",
        ));
    }
    let app = Arc::new(App {
        store,
        mails,
        mode,
        bank: options.bank,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(io::Error::other)?,
        faults: Arc::clone(&options.faults),
        name: options.name,
        verbose: options.verbose,
    });
    let mut router = Router::new()
        .route("/payouts", post(pay::<B>))
        .with_state(app);
    if let Some(metrics) = &options.metrics {
        router = metrics.route(router);
    }
    let listener = Listener::new(listener, options.faults);
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<Peer>(),
    )
    .await
}

/// `POST /payouts`.
async fn pay<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    headers: HeaderMap,
    body: Bytes,
) -> Response
where
    sqlx::Transaction<'static, B>: LedgerTransaction,
{
    let attempt = headers
        .get("retry-attempt")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    // Requiring a key on this route is the service's decision: without one a client's retry
    // could pay twice, so refuse to pay at all.
    let key = match key_from_header(headers.get(IdempotencyKey::HEADER)) {
        Ok(key) => key,
        Err(e) => {
            app.say(format_args!(
                "Retry-Attempt {attempt}, no usable key: {}",
                e.status()
            ));
            return problem(StatusCode::BAD_REQUEST, &e.to_string());
        }
    };
    let Ok(order) = serde_json::from_slice::<PayoutRequest>(&body) else {
        return problem(StatusCode::BAD_REQUEST, "the body is not a payout request");
    };
    let log = format!("Retry-Attempt {attempt}, key {}…:", short(&key));
    let key_text = key.as_str().to_owned();
    // The payout runs in a task of its own, so that a client that hangs up does not cancel it
    // between the bank's answer and the commit.
    let task = tokio::spawn({
        let app = Arc::clone(&app);
        // The fingerprint covers the whole body: the same key for another claim or amount is a
        // different request.
        let fingerprint = Fingerprint::of(&body);
        async move { payout(&app, &key, &order, fingerprint, &log).await }
    });
    let Ok((mut response, executed)) = task.await else {
        return problem(StatusCode::INTERNAL_SERVER_ERROR, "the payout task failed");
    };
    if executed && app.faults.stop_after_response_to(peer, &key_text) {
        let close = HeaderValue::from_static("close");
        response.headers_mut().insert(header::CONNECTION, close);
    }
    response
}

/// Steps 1 to 5 of the module docs, in the service's mode. Returns the response and whether
/// this request executed the payout.
async fn payout<B: Backend>(
    app: &App<B>,
    key: &IdempotencyKey,
    order: &PayoutRequest,
    fingerprint: Fingerprint,
    log: &str,
) -> (Response, bool)
where
    sqlx::Transaction<'static, B>: LedgerTransaction,
{
    app.faults.reach(Step::BeforeBegin, key.as_str()).await;
    // 1. The claim: committed under a lease, or (one-commit) the first statement of the
    // transaction the guard holds.
    let mut guard = match app.store.begin_with(app.mode, "", key, fingerprint).await {
        Ok(Begin::Execute(guard)) => guard,
        Ok(Begin::Replay(receipt)) => {
            app.say(format_args!(
                "{log} paid before: {}, sent again, nothing paid",
                receipt.receipt
            ));
            return (created(&receipt), false);
        }
        // Another request is paying it under its lease (a replica of the lease mode).
        Ok(Begin::InProgress) => {
            app.say(format_args!(
                "{log} being paid right now: 409, Retry-After: 1"
            ));
            let conflict = problem(StatusCode::CONFLICT, "this payout is in progress");
            return (retry_after(conflict), false);
        }
        Ok(Begin::Mismatch) => {
            app.say(format_args!("{log} used for another payout: 422"));
            let detail = "this key was used for a different payout";
            return (problem(StatusCode::UNPROCESSABLE_ENTITY, detail), false);
        }
        Ok(other) => {
            let code = other.rejection_status().unwrap_or(500);
            return (
                problem(status(code), "the payout cannot be made now"),
                false,
            );
        }
        // Nothing executes without a record: a passing failure for the client's retry.
        Err(e) => {
            app.say(format_args!(
                "{log} the database is unavailable: {}",
                e.status()
            ));
            return (unavailable(e.status(), &e.to_string()), false);
        }
    };
    // Lease mode: the key is claimed, under its lease. One-commit mode: the claim is written in
    // the open transaction, not committed, and a kill here leaves nothing.
    app.faults.reach(Step::AfterBegin, key.as_str()).await;
    let execution = guard.claim();
    let how = match app.mode {
        Mode::Lease => format!("execution {execution}"),
        Mode::OneCommit => "in one transaction".to_owned(),
    };
    app.say(format_args!(
        "{log} new, paying {} for claim {} ({how})",
        order.cents, order.claim
    ));

    // 2. The bank, before the lease mode's transaction opens, so that the database is not held
    // while the bank thinks. A failure gives the key back (dropping the guard), and the client
    // retries.
    let transfer = match &app.bank {
        None => None,
        Some(bank) => match bank::transfer(&app.http, bank, key, order.cents).await {
            Ok(transfer) => Some(transfer.id),
            Err(e) => {
                app.say(format_args!("{log} {e}: 503, the key is given back"));
                return (unavailable(503, &e.to_string()), false);
            }
        },
    };

    // 3. The ledger row, in the transaction that will complete the key.
    let entry = Entry {
        key: key.as_str().to_owned(),
        claim: order.claim,
        cents: order.cents,
        transfer,
        execution,
    };
    let written = match guard.transaction().await {
        Ok(transaction) => transaction.record(&entry).await.map_err(|e| {
            let code = if e.is_transient() { 503 } else { 500 };
            (code, e.to_string())
        }),
        Err(e) => Err((e.status(), e.to_string())),
    };
    let id = match written {
        Ok(id) => id,
        Err((code, why)) => {
            app.say(format_args!(
                "{log} the ledger could not be written: {code}"
            ));
            // Dropping the guard rolls the row back (and, one-commit, the claim with it).
            return (unavailable(code, &why), false);
        }
    };
    let receipt = Receipt {
        receipt: format!("P-{id}"),
        claim: order.claim,
        cents: order.cents,
        transfer: entry.transfer,
    };
    app.faults.reach(Step::AfterLedgerWrite, key.as_str()).await;

    // 4. The receipt e-mail's job, in the same transaction: it exists if and only if the payout
    // committed.
    let mail = ReceiptMail::of(&receipt);
    let queued = match guard.transaction().await {
        Ok(transaction) => app
            .mails
            .enqueue_in(transaction, key.as_str(), &mail)
            .await
            .map_err(|e| (if e.is_transient() { 503 } else { 500 }, e.to_string())),
        Err(e) => Err((e.status(), e.to_string())),
    };
    if let Err((code, why)) = queued {
        app.say(format_args!("{log} the e-mail could not be queued: {code}"));
        return (unavailable(code, &why), false);
    }
    app.faults.reach(Step::AfterEnqueue, key.as_str()).await;

    // 5. The receipt is stored and the key completed in the same transaction, which commits:
    // the ledger row, the job and the key together.
    if let Err(e) = guard.complete(&receipt).await {
        app.say(format_args!("{log} not committed: {e}"));
        return (unavailable(e.status(), &e.to_string()), false);
    }
    app.faults.reach(Step::AfterCommit, key.as_str()).await;
    if app.faults.lose_response() {
        app.say(format_args!(
            "{log} paid and committed, {}; the response is lost on the way back",
            receipt.receipt
        ));
        return (lost_response(), true);
    }
    app.say(format_args!(
        "{log} paid and committed, {}, its e-mail queued",
        receipt.receipt
    ));
    (created(&receipt), true)
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn created(receipt: &Receipt) -> Response {
    match serde_json::to_vec(receipt) {
        Ok(body) => {
            let content_type = HeaderValue::from_static("application/json");
            (
                StatusCode::CREATED,
                [(header::CONTENT_TYPE, content_type)],
                body,
            )
                .into_response()
        }
        Err(e) => problem(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// A 503 (with `Retry-After`, a passing failure) or another 5xx.
fn unavailable(code: u16, detail: &str) -> Response {
    let response = problem(status(code), detail);
    if code == 503 {
        retry_after(response)
    } else {
        response
    }
}

fn retry_after(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// A response whose body fails before its first byte, so that hyper closes the connection
/// instead of finishing the response: what a network cut after the commit looks like to the
/// client.
fn lost_response() -> Response {
    let failure = io::Error::new(io::ErrorKind::ConnectionAborted, "response lost on purpose");
    let body = futures_util::stream::iter([Err::<Bytes, _>(failure)]);
    Response::new(Body::from_stream(body))
}

/// An RFC 9457 problem, as the idempotency draft suggests for its errors.
fn problem(status: StatusCode, detail: &str) -> Response {
    let body = serde_json::json!({ "title": status.canonical_reason(), "detail": detail });
    let content_type = HeaderValue::from_static("application/problem+json");
    (
        status,
        [(header::CONTENT_TYPE, content_type)],
        body.to_string(),
    )
        .into_response()
}

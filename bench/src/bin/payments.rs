//! What the idempotency stores cost the payment service of `cargo run --example payments`.
//!
//! ```text
//! cargo run --release -p retry-bench --bin payments                      # SQLite only
//! cargo run --release -p retry-bench --bin payments -- --postgres URL    # and PostgreSQL
//! ```
//!
//! The service's own handler (`retry_examples::payments::service::serve`) runs in this process
//! on a loopback port, and a `reqwest` client drives it over HTTP. For each database (a SQLite
//! file in the temp dir; PostgreSQL at `URL`) the handler runs with three stores:
//!
//! - **none**: a store that remembers nothing (every request executes, and the handler's
//!   transaction holds only the ledger row): the handler alone, the baseline;
//! - **`MemoryStore`**: keys in memory, the ledger row in its own transaction on the database;
//! - the database's own store (**`SqliteStore`**, **`PostgresStore`**): keys in the same
//!   database, the ledger row and the key's completion in one transaction;
//! - the same store in the **one-commit** mode (`serve_one_commit`,
//!   `TransactionalStore::begin_in_transaction`): the claim, the ledger row and the completion in
//!   one transaction.
//!
//! Beside them, a **bare `INSERT`** of a ledger row on the pool (autocommit, no HTTP): the floor
//! of one durable commit.
//!
//! Per store: latency (p50, p99) of requests sent one at a time, for new keys and then for the
//! same keys again (replays), and requests per second with `--concurrency` requests in flight.
//! Database work per request is counted two ways: the statements sqlx executes (its
//! `sqlx::query` tracing events, every driver), and for PostgreSQL the protocol's round trips,
//! counted by a TCP proxy between the pool and the server that reads the client's messages:
//! each `Query` or `Sync` is one round trip (the client waits for `ReadyForQuery`), and a `Sync`
//! with nothing before it is a ping of the pool: sqlx pings a connection when it hands it out
//! (`test_before_acquire`, on by default; `--no-acquire-ping` turns it off) and when it takes it
//! back (always, in a background task).
//!
//! Not run in CI: the numbers depend on the machine. Results in `bench/RESULTS.md`.

use retry_durable::store::{
    Begin, BoxFuture, Claim, Fingerprint, Guard, IdempotencyStore, MemoryStore, PostgresStore,
    SqliteStore, StoreError,
};
use retry_examples::payments::service::{
    Options, create_postgres_ledger, create_sqlite_ledger, serve, serve_one_commit,
};
use retry_examples::payments::{Cents, ClaimId, PayoutRequest, Receipt};
use retry_runtime::IdempotencyKey;
use sqlx::{PgPool, Postgres, Sqlite, SqlitePool};
use std::collections::{BTreeMap, HashMap};
use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type BoxResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

struct Args {
    postgres: Option<String>,
    sequential: usize,
    concurrent: usize,
    concurrency: usize,
    explain: bool,
    acquire_ping: bool,
}

fn args() -> Result<Args, String> {
    let usage = "usage: payments [--postgres URL] [--requests N] [--concurrent-requests N] \
                 [--concurrency N] [--no-acquire-ping] [--explain]";
    let mut parsed = Args {
        postgres: None,
        sequential: 2000,
        concurrent: 4000,
        concurrency: 16,
        explain: false,
        acquire_ping: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = || {
            args.next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("`{arg}` takes a number\n{usage}"))
        };
        match arg.as_str() {
            "--postgres" => {
                parsed.postgres = Some(args.next().ok_or_else(|| usage.to_owned())?);
            }
            "--requests" => parsed.sequential = number()?,
            "--concurrent-requests" => parsed.concurrent = number()?,
            "--concurrency" => parsed.concurrency = number()?,
            "--explain" => parsed.explain = true,
            "--no-acquire-ping" => parsed.acquire_ping = false,
            _ => return Err(usage.to_owned()),
        }
    }
    Ok(parsed)
}

#[tokio::main]
async fn main() -> BoxResult<()> {
    let args = args()?;
    tracing::subscriber::set_global_default(StatementCounter)?;
    println!(
        "{} requests one at a time per phase, {} with {} in flight; load average before: {}",
        args.sequential,
        args.concurrent,
        args.concurrency,
        load_average()
    );
    let mut table = Vec::new();
    let mut inserts = Vec::new();

    let dir = std::env::temp_dir().join(format!("retry-bench-payments-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    for variant in Variant::ALL {
        let path = dir.join(format!("{variant:?}.db"));
        let store = SqliteStore::<Receipt>::open(&path).await?;
        store.migrate().await?;
        create_sqlite_ledger(store.pool()).await?;
        let pool = store.pool().clone();
        let options = Options::default;
        let row = match variant {
            Variant::None => {
                inserts.push(("SQLite", bare_inserts(&pool, "?1", args.sequential).await?));
                let serving = |l| tokio::spawn(serve(l, NoStore(pool), options()));
                measure("SQLite", "none", serving, None, &args).await?
            }
            Variant::Memory => {
                let serving = |l| tokio::spawn(serve(l, MemoryKeys::new(pool), options()));
                measure("SQLite", "MemoryStore", serving, None, &args).await?
            }
            Variant::Own => {
                let serving = |l| tokio::spawn(serve(l, store, options()));
                measure("SQLite", "SqliteStore", serving, None, &args).await?
            }
            Variant::OneCommit => {
                let serving = |l| tokio::spawn(serve_one_commit(l, store, options()));
                measure("SQLite", "SqliteStore, one commit", serving, None, &args).await?
            }
        };
        table.push(row);
    }
    std::fs::remove_dir_all(&dir)?;

    if let Some(url) = &args.postgres {
        let proxy = RoundTripProxy::start(url).await?;
        let schema = format!("bench_payments_{}", std::process::id());
        let admin = PgPool::connect(url).await?;
        for variant in Variant::ALL {
            let schema = format!("{schema}_{variant:?}").to_lowercase();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                .execute(&admin)
                .await?;
            let options = proxy.connect_options(url)?;
            let pool = sqlx::postgres::PgPoolOptions::new()
                .acquire_timeout(Duration::from_secs(5))
                .test_before_acquire(args.acquire_ping)
                .connect_with(options.options([("search_path", schema.as_str())]))
                .await?;
            let store = PostgresStore::<Receipt>::new(pool.clone());
            store.migrate().await?;
            create_postgres_ledger(&pool).await?;
            let proxy = Some(&proxy);
            let options = Options::default;
            let row = match variant {
                Variant::None => {
                    let bare = bare_inserts(&pool, "$1", args.sequential).await?;
                    inserts.push(("PostgreSQL", bare));
                    let serving = |l| tokio::spawn(serve(l, NoStore(pool), options()));
                    measure("PostgreSQL", "none", serving, proxy, &args).await?
                }
                Variant::Memory => {
                    let serving = |l| tokio::spawn(serve(l, MemoryKeys::new(pool), options()));
                    measure("PostgreSQL", "MemoryStore", serving, proxy, &args).await?
                }
                Variant::Own => {
                    let serving = |l| tokio::spawn(serve(l, store, options()));
                    measure("PostgreSQL", "PostgresStore", serving, proxy, &args).await?
                }
                Variant::OneCommit => {
                    let serving = |l| tokio::spawn(serve_one_commit(l, store, options()));
                    let name = "PostgresStore, one commit";
                    measure("PostgreSQL", name, serving, proxy, &args).await?
                }
            };
            table.push(row);
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
                .execute(&admin)
                .await?;
        }
    }

    println!("\nload average after: {}\n", load_average());
    print_inserts(&inserts, &table);
    println!();
    print_table(&table);
    if args.explain {
        for row in &table {
            println!("\n{} / {}:", row.database, row.store);
            for (phase, statements) in [
                ("new key", &row.new.statements),
                ("replay", &row.replay.statements),
            ] {
                println!("  {phase}, statements per request:");
                for (summary, count) in statements {
                    println!(
                        "    {:>5.2}  {summary}",
                        *count as f64 / args.sequential as f64
                    );
                }
            }
        }
    }
    Ok(())
}

#[derive(Clone, Copy, Debug)]
enum Variant {
    None,
    Memory,
    Own,
    OneCommit,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::None,
        Variant::Memory,
        Variant::Own,
        Variant::OneCommit,
    ];
}

/// A bare `INSERT` of a ledger row on the pool, autocommit, one at a time: one durable commit
/// and one round trip, no HTTP. `$1` or `?1` is the database's first placeholder. p50 and p99.
async fn bare_inserts<DB>(
    pool: &sqlx::Pool<DB>,
    placeholder: &str,
    requests: usize,
) -> BoxResult<(Duration, Duration)>
where
    DB: sqlx::Database,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    for<'q> <DB as sqlx::Database>::Arguments: sqlx::IntoArguments<DB>,
    for<'q> String: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let insert = format!(
        "INSERT INTO ledger (payout_key, claim, cents, transfer, execution) \
         VALUES ({placeholder}, 4711, 1000, NULL, 1)"
    );
    let mut latencies = Vec::with_capacity(requests);
    for n in 0..requests + 200 {
        let key = format!("bare-{n}");
        let started = Instant::now();
        let mut connection = pool.acquire().await?;
        sqlx::query(sqlx::AssertSqlSafe(insert.as_str()))
            .bind(key)
            .execute(&mut *connection)
            .await?;
        drop(connection);
        // The first 200 warm the pool and the page cache, as the handler's warm-up does.
        if n >= 200 {
            latencies.push(started.elapsed());
        }
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Ok((at(0.50), at(0.99)))
}

/// The new key's p50 and p99 of each mode beside a bare `INSERT` and the handler alone.
fn print_inserts(inserts: &[(&str, (Duration, Duration))], table: &[Row]) {
    println!(
        "| database | bare `INSERT` p50 / p99 | handler alone p50 / p99 | lease mode, new key | \
         one-commit mode, new key | replay (lease / one commit) | one commit ÷ handler alone, p50 |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (database, (p50, p99)) in inserts {
        let find = |suffix: &str| {
            table.iter().find(|row| {
                row.database == *database
                    && (row.store == suffix || row.store.ends_with(suffix) && suffix != "none")
            })
        };
        let (Some(alone), Some(lease), Some(one)) = (
            find("none"),
            table.iter().find(|row| {
                row.database == *database
                    && row.store.ends_with("Store")
                    && row.store != "MemoryStore"
            }),
            find("one commit"),
        ) else {
            continue;
        };
        let pair = |phase: &Phase| format!("{} / {}", ms(phase.p50), ms(phase.p99));
        println!(
            "| {database} | {} / {} | {} | {} | {} | {} ; {} | {:.2}× |",
            ms(*p50),
            ms(*p99),
            pair(&alone.new),
            pair(&lease.new),
            pair(&one.new),
            pair(&lease.replay),
            pair(&one.replay),
            one.new.p50.as_secs_f64() / alone.new.p50.as_secs_f64(),
        );
    }
}

/// What one phase measured.
struct Phase {
    p50: Duration,
    p99: Duration,
    per_second: f64,
    statements: BTreeMap<String, u64>,
    /// Round trips and pings per request (PostgreSQL).
    round_trips: Option<(f64, f64)>,
}

impl Phase {
    fn statements_per_request(&self, requests: usize) -> f64 {
        self.statements.values().sum::<u64>() as f64 / requests as f64
    }
}

struct Row {
    database: &'static str,
    store: &'static str,
    requests: usize,
    new: Phase,
    replay: Phase,
}

/// Starts the handler with `store` on a loopback port and drives it.
/// Starts the handler on a loopback port with `serving` (which spawns `serve` or
/// `serve_one_commit` with a store) and drives it.
async fn measure(
    database: &'static str,
    name: &'static str,
    serving: impl FnOnce(TcpListener) -> tokio::task::JoinHandle<std::io::Result<()>>,
    proxy: Option<&RoundTripProxy>,
    args: &Args,
) -> BoxResult<Row> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/payouts", listener.local_addr()?);
    let server = serving(listener);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()?;
    let driver = Driver { http, url };

    // Warm up: connections, prepared statements, the page cache.
    let warm: Vec<IdempotencyKey> = (0..200).map(|_| IdempotencyKey::new()).collect();
    driver.one_at_a_time(&warm).await?;

    let keys: Vec<IdempotencyKey> = (0..args.sequential)
        .map(|_| IdempotencyKey::new())
        .collect();
    let new = driver.phase(&keys, proxy).await?;
    let replay = driver.phase(&keys, proxy).await?;
    let keys: Vec<IdempotencyKey> = (0..args.concurrent)
        .map(|_| IdempotencyKey::new())
        .collect();
    let new_rate = driver.rate(&keys, args.concurrency).await?;
    let replay_rate = driver.rate(&keys, args.concurrency).await?;
    server.abort();
    println!(
        "{database:>10} {name:>13}: new key p50 {:?} p99 {:?} {:.0}/s; replay p50 {:?} p99 {:?} {:.0}/s",
        new.p50, new.p99, new_rate, replay.p50, replay.p99, replay_rate
    );
    Ok(Row {
        database,
        store: name,
        requests: args.sequential,
        new: Phase {
            per_second: new_rate,
            ..new
        },
        replay: Phase {
            per_second: replay_rate,
            ..replay
        },
    })
}

struct Driver {
    http: reqwest::Client,
    url: String,
}

impl Driver {
    async fn pay(&self, key: &IdempotencyKey, n: usize) -> BoxResult<Duration> {
        let body = serde_json::to_vec(&PayoutRequest {
            claim: ClaimId(4711),
            cents: Cents(1000 + n as u64),
        })?;
        let started = Instant::now();
        let response = self
            .http
            .post(&self.url)
            .header(IdempotencyKey::HEADER, key.as_str())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let body = response.bytes().await?;
        let elapsed = started.elapsed();
        if status.as_u16() != 201 {
            return Err(format!("{status}: {}", String::from_utf8_lossy(&body)).into());
        }
        Ok(elapsed)
    }

    async fn one_at_a_time(&self, keys: &[IdempotencyKey]) -> BoxResult<Vec<Duration>> {
        let mut latencies = Vec::with_capacity(keys.len());
        for (n, key) in keys.iter().enumerate() {
            latencies.push(self.pay(key, n).await?);
        }
        Ok(latencies)
    }

    /// Sends `keys` one at a time; latencies and database work per request.
    async fn phase(
        &self,
        keys: &[IdempotencyKey],
        proxy: Option<&RoundTripProxy>,
    ) -> BoxResult<Phase> {
        let before = (STATEMENTS.snapshot(), proxy.map(RoundTripProxy::counts));
        let mut latencies = self.one_at_a_time(keys).await?;
        // Let the background work of the last request (a guard's release, a pool's return)
        // finish inside the phase.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let statements = STATEMENTS.since(&before.0);
        let round_trips = match (proxy, before.1) {
            (Some(proxy), Some((trips, pings))) => {
                let (trips_now, pings_now) = proxy.counts();
                let n = keys.len() as f64;
                Some((
                    (trips_now - trips) as f64 / n,
                    (pings_now - pings) as f64 / n,
                ))
            }
            _ => None,
        };
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
        Ok(Phase {
            p50: at(0.50),
            p99: at(0.99),
            per_second: 0.0,
            statements,
            round_trips,
        })
    }

    /// Sends `keys` with `concurrency` in flight; requests per second.
    async fn rate(&self, keys: &[IdempotencyKey], concurrency: usize) -> BoxResult<f64> {
        let next = AtomicU64::new(0);
        let started = Instant::now();
        let workers = (0..concurrency).map(|_| async {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(key) = keys.get(n) else {
                    return Ok::<_, Box<dyn Error + Send + Sync>>(());
                };
                self.pay(key, n).await?;
            }
        });
        for worker in futures_util::future::join_all(workers).await {
            worker?;
        }
        Ok(keys.len() as f64 / started.elapsed().as_secs_f64())
    }
}

fn print_table(table: &[Row]) {
    println!(
        "| database | store | requests/s, new key | p50 / p99, new key | added p50 / p99 | \
         requests/s, replay | p50 / p99, replay | statements, new key / replay | \
         round trips (pings), new key / replay |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for row in table {
        let baseline = table
            .iter()
            .find(|base| base.database == row.database && base.store == "none");
        let added = match baseline {
            Some(base) if base.store != row.store => format!(
                "{} / {}",
                signed(row.new.p50, base.new.p50),
                signed(row.new.p99, base.new.p99)
            ),
            _ => "—".to_owned(),
        };
        let (replay_rate, replay_latency, replay_statements, replay_trips) = if row.store == "none"
        {
            (
                "—".to_owned(),
                "— (executes again)".to_owned(),
                "—".to_owned(),
                "—".to_owned(),
            )
        } else {
            (
                format!("{:.0}", row.replay.per_second),
                format!("{} / {}", ms(row.replay.p50), ms(row.replay.p99)),
                format!("{:.1}", row.replay.statements_per_request(row.requests)),
                trips(row.replay.round_trips),
            )
        };
        println!(
            "| {} | {} | {:.0} | {} / {} | {added} | {replay_rate} | {replay_latency} | {:.1} / {replay_statements} | {} / {replay_trips} |",
            row.database,
            if row.store == "none" {
                "none (the handler alone)".to_owned()
            } else {
                format!("`{}`", row.store)
            },
            row.new.per_second,
            ms(row.new.p50),
            ms(row.new.p99),
            row.new.statements_per_request(row.requests),
            trips(row.new.round_trips),
        );
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn signed(value: Duration, base: Duration) -> String {
    let delta = value.as_secs_f64() - base.as_secs_f64();
    format!("{:+.2} ms", delta * 1000.0)
}

fn trips(counts: Option<(f64, f64)>) -> String {
    match counts {
        Some((trips, pings)) => format!("{trips:.1} ({pings:.1})"),
        None => "—".to_owned(),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "unknown".to_owned())
}

// ---- The baseline: a store that remembers nothing ----

/// A pool the handler's transaction is opened on, as the SQL stores open theirs.
trait OpenTransaction: Send + Sync + 'static {
    type Transaction: Send + 'static;
    fn open(&self) -> BoxFuture<'_, Result<Self::Transaction, sqlx::Error>>;
}

impl OpenTransaction for SqlitePool {
    type Transaction = sqlx::Transaction<'static, Sqlite>;
    fn open(&self) -> BoxFuture<'_, Result<Self::Transaction, sqlx::Error>> {
        Box::pin(self.begin_with("BEGIN IMMEDIATE"))
    }
}

impl OpenTransaction for PgPool {
    type Transaction = sqlx::Transaction<'static, Postgres>;
    fn open(&self) -> BoxFuture<'_, Result<Self::Transaction, sqlx::Error>> {
        Box::pin(self.begin())
    }
}

/// A transaction `complete` can commit and `release` can roll back.
trait Finish: Send + 'static {
    fn commit(self) -> BoxFuture<'static, Result<(), sqlx::Error>>;
    fn rollback(self) -> BoxFuture<'static, Result<(), sqlx::Error>>;
}

impl Finish for sqlx::Transaction<'static, Sqlite> {
    fn commit(self) -> BoxFuture<'static, Result<(), sqlx::Error>> {
        Box::pin(sqlx::Transaction::commit(self))
    }
    fn rollback(self) -> BoxFuture<'static, Result<(), sqlx::Error>> {
        Box::pin(sqlx::Transaction::rollback(self))
    }
}

impl Finish for sqlx::Transaction<'static, Postgres> {
    fn commit(self) -> BoxFuture<'static, Result<(), sqlx::Error>> {
        Box::pin(sqlx::Transaction::commit(self))
    }
    fn rollback(self) -> BoxFuture<'static, Result<(), sqlx::Error>> {
        Box::pin(sqlx::Transaction::rollback(self))
    }
}

fn database_error(error: sqlx::Error) -> StoreError {
    use retry_runtime::Transient;
    let transient = error.is_transient();
    StoreError::database(error, transient)
}

/// Every request executes; the handler's transaction is opened on the pool and committed with
/// nothing added: the handler alone.
struct NoStore<P>(P);

impl<P> IdempotencyStore<Receipt> for NoStore<P>
where
    P: OpenTransaction,
    P::Transaction: Finish,
{
    type Transaction = P::Transaction;

    fn begin_scoped<'s, 'a>(
        &'s self,
        scope: &'a str,
        key: &'a IdempotencyKey,
        _: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, Receipt, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        let claim = Claim::new(scope, key.clone(), 1, 0);
        Box::pin(async move { Ok(Begin::Execute(Guard::new(self, claim))) })
    }

    fn transaction<'a>(
        &'a self,
        _: &'a Claim,
    ) -> BoxFuture<'a, Result<Self::Transaction, StoreError>> {
        Box::pin(async move { self.0.open().await.map_err(database_error) })
    }

    fn complete<'a>(
        &'a self,
        _: &'a Claim,
        transaction: Option<Self::Transaction>,
        _: &'a Receipt,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            match transaction {
                Some(transaction) => transaction.commit().await.map_err(database_error),
                None => Ok(()),
            }
        })
    }

    fn renew<'a>(&'a self, _: &'a Claim) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn release<'a>(
        &'a self,
        _: &'a Claim,
        transaction: Option<Self::Transaction>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            match transaction {
                Some(transaction) => transaction.rollback().await.map_err(database_error),
                None => Ok(()),
            }
        })
    }

    fn release_in_background(&self, _: Claim, _: Option<Self::Transaction>) {
        // Dropping the transaction rolls it back.
    }

    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async { Ok(0) })
    }
}

/// Keys in a `MemoryStore`, the handler's ledger row in a transaction of its own on the
/// database, committed before the key is completed in memory (not atomic: a crash in between
/// pays again, which is what `MemoryStore` does not cover).
struct MemoryKeys<P> {
    keys: &'static MemoryStore<Receipt>,
    pool: P,
    held: Mutex<HashMap<u64, Guard<'static, Receipt, ()>>>,
    next: AtomicU64,
}

impl<P> MemoryKeys<P> {
    fn new(pool: P) -> Self {
        MemoryKeys {
            // Leaked, so that the guards it hands out can be kept beside it (one per run of
            // the benchmark).
            keys: Box::leak(Box::new(MemoryStore::new())),
            pool,
            held: Mutex::default(),
            next: AtomicU64::new(1),
        }
    }

    fn take(&self, claim: &Claim) -> Option<Guard<'static, Receipt, ()>> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&claim.token())
    }
}

impl<P> IdempotencyStore<Receipt> for MemoryKeys<P>
where
    P: OpenTransaction,
    P::Transaction: Finish,
{
    type Transaction = P::Transaction;

    fn begin_scoped<'s, 'a>(
        &'s self,
        scope: &'a str,
        key: &'a IdempotencyKey,
        fingerprint: Fingerprint,
    ) -> BoxFuture<'a, Result<Begin<'s, Receipt, Self::Transaction>, StoreError>>
    where
        's: 'a,
    {
        Box::pin(async move {
            Ok(
                match self.keys.begin_scoped(scope, key, fingerprint).await? {
                    Begin::Execute(guard) => {
                        let token = self.next.fetch_add(1, Ordering::Relaxed);
                        let claim = Claim::new(scope, key.clone(), guard.claim(), token);
                        self.held
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(token, guard);
                        Begin::Execute(Guard::new(self, claim))
                    }
                    Begin::Replay(receipt) => Begin::Replay(receipt),
                    Begin::Mismatch => Begin::Mismatch,
                    _ => Begin::InProgress,
                },
            )
        })
    }

    fn transaction<'a>(
        &'a self,
        _: &'a Claim,
    ) -> BoxFuture<'a, Result<Self::Transaction, StoreError>> {
        Box::pin(async move { self.pool.open().await.map_err(database_error) })
    }

    fn complete<'a>(
        &'a self,
        claim: &'a Claim,
        transaction: Option<Self::Transaction>,
        receipt: &'a Receipt,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(transaction) = transaction {
                transaction.commit().await.map_err(database_error)?;
            }
            match self.take(claim) {
                Some(guard) => guard.complete(receipt).await,
                None => Err(StoreError::Superseded {
                    claim: claim.number(),
                }),
            }
        })
    }

    fn renew<'a>(&'a self, _: &'a Claim) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn release<'a>(
        &'a self,
        claim: &'a Claim,
        transaction: Option<Self::Transaction>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if let Some(transaction) = transaction {
                let _ = transaction.rollback().await;
            }
            match self.take(claim) {
                Some(guard) => guard.release().await,
                None => Err(StoreError::Superseded {
                    claim: claim.number(),
                }),
            }
        })
    }

    fn release_in_background(&self, claim: Claim, _: Option<Self::Transaction>) {
        // Dropping the memory guard releases its key; dropping the transaction rolls it back.
        drop(self.take(&claim));
    }

    fn purge_expired(&self) -> BoxFuture<'_, Result<u64, StoreError>> {
        self.keys.purge_expired()
    }
}

// ---- Counting the database's work ----

/// Counts sqlx's `sqlx::query` events (one per statement executed), by the statement's
/// summary.
struct StatementCounter;

struct Statements {
    counts: Mutex<BTreeMap<String, u64>>,
}

static STATEMENTS: Statements = Statements {
    counts: Mutex::new(BTreeMap::new()),
};

impl Statements {
    fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn since(&self, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        self.snapshot()
            .into_iter()
            .map(|(summary, count)| {
                let earlier = before.get(&summary).copied().unwrap_or(0);
                (summary, count - earlier)
            })
            .filter(|(_, count)| *count > 0)
            .collect()
    }
}

struct Summary(Option<String>);

impl tracing::field::Visit for Summary {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "summary" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" {
            self.0 = Some(format!("{value:?}").trim_matches('"').to_owned());
        }
    }
}

impl tracing::Subscriber for StatementCounter {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target() == "sqlx::query"
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let mut summary = Summary(None);
        event.record(&mut summary);
        let summary = summary.0.unwrap_or_else(|| "?".to_owned());
        *STATEMENTS
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(summary)
            .or_default() += 1;
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// A TCP proxy in front of PostgreSQL that counts the client's round trips: each `Query` and
/// each `Sync` message makes the client wait for the server's `ReadyForQuery`.
struct RoundTripProxy {
    port: u16,
    trips: Arc<AtomicU64>,
    pings: Arc<AtomicU64>,
}

impl RoundTripProxy {
    async fn start(url: &str) -> BoxResult<Self> {
        let options: sqlx::postgres::PgConnectOptions = url.parse()?;
        let upstream = format!("{}:{}", options.get_host(), options.get_port());
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let trips = Arc::new(AtomicU64::new(0));
        let pings = Arc::new(AtomicU64::new(0));
        let counters = (Arc::clone(&trips), Arc::clone(&pings));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (trips, pings) = (Arc::clone(&counters.0), Arc::clone(&counters.1));
                tokio::spawn(pump(client, server, trips, pings));
            }
        });
        Ok(RoundTripProxy { port, trips, pings })
    }

    /// `url`'s options, through the proxy.
    fn connect_options(&self, url: &str) -> BoxResult<sqlx::postgres::PgConnectOptions> {
        let options: sqlx::postgres::PgConnectOptions = url.parse()?;
        Ok(options.host("127.0.0.1").port(self.port))
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.trips.load(Ordering::SeqCst),
            self.pings.load(Ordering::SeqCst),
        )
    }
}

async fn pump(client: TcpStream, server: TcpStream, trips: Arc<AtomicU64>, pings: Arc<AtomicU64>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let upstream = async move {
        let mut messages = Messages::default();
        let mut buffer = vec![0; 64 * 1024];
        loop {
            let n = match client_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for kind in messages.feed(&buffer[..n]) {
                match kind {
                    b'Q' => {
                        trips.fetch_add(1, Ordering::SeqCst);
                        messages.since_sync = false;
                    }
                    b'S' => {
                        trips.fetch_add(1, Ordering::SeqCst);
                        if !messages.since_sync {
                            pings.fetch_add(1, Ordering::SeqCst);
                        }
                        messages.since_sync = false;
                    }
                    _ => messages.since_sync = true,
                }
            }
            if server_write.write_all(&buffer[..n]).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let downstream = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

/// The client's side of the PostgreSQL protocol, split into messages: untyped ones first (an
/// `SSLRequest` or `GSSENCRequest`, then the `StartupMessage`), then a type byte and a length
/// each.
#[derive(Default)]
struct Messages {
    typed: bool,
    pending: Vec<u8>,
    /// Whether a message other than `Sync` came since the last `Sync` or `Query`.
    since_sync: bool,
}

impl Messages {
    /// Takes in bytes and returns the types of the messages they completed.
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        const SSL_REQUEST: u32 = 80_877_103;
        const GSSENC_REQUEST: u32 = 80_877_104;
        self.pending.extend_from_slice(bytes);
        let mut kinds = Vec::new();
        loop {
            let (header, kind) = if self.typed {
                (5, self.pending.first().copied())
            } else {
                (8, None)
            };
            if self.pending.len() < header {
                break;
            }
            let at = usize::from(self.typed);
            let length = u32::from_be_bytes([
                self.pending[at],
                self.pending[at + 1],
                self.pending[at + 2],
                self.pending[at + 3],
            ]) as usize;
            let total = length + at;
            if self.pending.len() < total {
                break;
            }
            match kind {
                Some(kind) => kinds.push(kind),
                None => {
                    let code = u32::from_be_bytes([
                        self.pending[4],
                        self.pending[5],
                        self.pending[6],
                        self.pending[7],
                    ]);
                    self.typed = code != SSL_REQUEST && code != GSSENC_REQUEST;
                }
            }
            self.pending.drain(..total);
        }
        kinds
    }
}

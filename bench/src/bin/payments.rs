//! What the idempotency stores cost a handler, measured on the stores themselves (no HTTP),
//! with each database's durable settings.
//!
//! ```text
//! cargo run --release -p retry-bench --bin payments                      # SQLite only
//! cargo run --release -p retry-bench --bin payments -- --postgres URL    # and PostgreSQL
//! ```
//!
//! Per database (a SQLite file in the temp dir, opened as `SqliteStore::open` opens it: WAL,
//! `synchronous = FULL`; a fresh schema of the PostgreSQL at `URL`, which should run with
//! `fsync = on` and `synchronous_commit = on`, see `bench/RESULTS.md` §6), each operation as a
//! handler would run it:
//!
//! - **the handler alone**: one transaction with one `INSERT` of a ledger row (`BEGIN IMMEDIATE`
//!   on SQLite, as the stores open theirs), the baseline;
//! - **a new key in the one-commit mode**: `begin_with(Mode::OneCommit, ..)`, the same `INSERT` in the
//!   guard's transaction, `complete`;
//! - **a new key in the lease mode**: `begin`, the guard's transaction with the `INSERT`,
//!   `complete`;
//! - **a replay** of a completed key in each mode (`begin_with(Mode::OneCommit, ..)`, `begin`).
//!
//! Two layouts, which take turns at going first in each of the `--runs` runs (`--only phases` or
//! `--only mixed` runs one):
//!
//! - **phases**: each operation `--operations` times one at a time (p50, p99), then
//!   `--operations` times from `--callers` tasks at once (p50, p99, operations per second), each
//!   phase on a fresh pool of 10 of its own;
//! - **mixed**, as a service uses a store: one pool (the store's own, whose 10 connections a
//!   warm-up round from 16 callers has opened) shared by every operation, the operations
//!   interleaved in rounds of 100 (the handler alone, a new key in each mode, a replay in each
//!   mode), `--operations` of each, from one caller and then from `--callers`; and each step's
//!   p50 (the `begin`, the guard's `transaction`, the `INSERT`, the `complete` or `COMMIT`).
//!
//! `--sqlite-acquire-ping` gives the SQLite pool sqlx's default `test_before_acquire(true)` (a
//! ping of each connection it hands out), as the store's pool had before it stopped pinging.
//!
//! The tables have the median of the runs, and each ratio to the handler alone taken per run
//! (against the same run's handler, in the same layout) as the median and the range of the runs.
//! The database's work per operation is
//! counted, not estimated, in the sequential phases: the statements sqlx executes (its
//! `sqlx::query` events), on PostgreSQL the round trips (a proxy between the pool and the server
//! reads the client's protocol: each `Query` or `Sync` waits for `ReadyForQuery`; a `Sync` alone
//! is a ping of sqlx's pool, which it sends when it hands a connection out and when it takes it
//! back) and the WAL (`pg_stat_wal`: records, bytes and syncs, read after the phase's pool has
//! closed, so that its backends have reported).
//!
//! Not run in CI: the numbers depend on the machine. Results in `bench/RESULTS.md`.

use retry_durable::store::{
    Begin, Fingerprint, IdempotencyStore, Mode, PostgresStore, SqlStore, SqliteStore,
};
use retry_runtime::IdempotencyKey;
use sqlx::{PgPool, Postgres, Sqlite};
use std::collections::BTreeMap;
use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

type BoxResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

struct Args {
    postgres: Option<String>,
    operations: usize,
    callers: usize,
    runs: usize,
    explain: bool,
    layout: Layout,
    /// The SQLite pool pings a connection when it hands it out, as sqlx's pools do by default.
    sqlite_acquire_ping: bool,
}

/// Which of the two measurements a run makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// Both, one after the other in each run.
    Both,
    /// Each operation in a phase of its own, on a fresh pool of its own.
    Phases,
    /// Every operation on one pool, interleaved in rounds.
    Mixed,
}

fn args() -> Result<Args, String> {
    let usage = "usage: payments [--postgres URL] [--operations N] [--callers N] [--runs N] \
                 [--explain] [--only phases|mixed] [--sqlite-acquire-ping]";
    let mut parsed = Args {
        postgres: None,
        operations: 2000,
        callers: 16,
        runs: 4,
        explain: false,
        layout: Layout::Both,
        sqlite_acquire_ping: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = || {
            args.next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("{arg} takes a number\n{usage}"))
        };
        match arg.as_str() {
            "--postgres" => {
                parsed.postgres = Some(args.next().ok_or(usage)?);
            }
            "--operations" => parsed.operations = number()?,
            "--callers" => parsed.callers = number()?.max(1),
            "--runs" => parsed.runs = number()?.max(1),
            "--explain" => parsed.explain = true,
            "--sqlite-acquire-ping" => parsed.sqlite_acquire_ping = true,
            "--only" => {
                parsed.layout = match args.next().as_deref() {
                    Some("phases") => Layout::Phases,
                    Some("mixed") => Layout::Mixed,
                    _ => return Err(usage.to_owned()),
                }
            }
            _ => return Err(usage.to_owned()),
        }
    }
    Ok(parsed)
}

/// What is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Operation {
    Handler,
    OneCommitNew,
    LeaseNew,
    OneCommitReplay,
    LeaseReplay,
}

impl Operation {
    const ALL: [Operation; 5] = [
        Operation::Handler,
        Operation::OneCommitNew,
        Operation::LeaseNew,
        Operation::OneCommitReplay,
        Operation::LeaseReplay,
    ];

    fn name(self) -> &'static str {
        match self {
            Operation::Handler => "the handler alone",
            Operation::OneCommitNew => "one-commit mode, new key",
            Operation::LeaseNew => "lease mode, new key",
            Operation::OneCommitReplay => "one-commit mode, replay",
            Operation::LeaseReplay => "lease mode, replay",
        }
    }

    /// The operation whose keys this one replays.
    fn replays(self) -> Option<Operation> {
        match self {
            Operation::OneCommitReplay => Some(Operation::OneCommitNew),
            Operation::LeaseReplay => Some(Operation::LeaseNew),
            _ => None,
        }
    }
}

/// One database's store and what the handler writes.
trait Engine: retry_durable::store::Backend {
    const LABEL_NAME: &'static str;
    /// How the handler alone opens its transaction (as the stores open theirs).
    const BEGIN: &'static str;
    /// The handler's `INSERT`, in the guard's transaction.
    fn insert<'a>(tx: &'a mut sqlx::Transaction<'static, Self>, key: &'a str) -> BoxFut<'a, ()>;
}

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = BoxResult<T>> + Send + 'a>>;

macro_rules! engine {
    ($db:ty, $name:expr, $begin:expr, $insert:expr) => {
        impl Engine for $db {
            const LABEL_NAME: &'static str = $name;
            const BEGIN: &'static str = $begin;

            fn insert<'a>(
                tx: &'a mut sqlx::Transaction<'static, Self>,
                key: &'a str,
            ) -> BoxFut<'a, ()> {
                Box::pin(async move {
                    sqlx::query($insert)
                        .bind(key)
                        .bind(125_000_i64)
                        .execute(&mut **tx)
                        .await?;
                    Ok(())
                })
            }
        }
    };
}

engine!(
    Sqlite,
    "SQLite",
    "BEGIN IMMEDIATE",
    "INSERT INTO ledger (payout_key, cents) VALUES (?1, ?2)"
);
engine!(
    Postgres,
    "PostgreSQL",
    "BEGIN",
    "INSERT INTO ledger (payout_key, cents) VALUES ($1, $2)"
);

const SQLITE_LEDGER: &str = "CREATE TABLE ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, \
                             payout_key TEXT NOT NULL, cents INTEGER NOT NULL)";
const POSTGRES_LEDGER: &str = "CREATE TABLE ledger (id BIGSERIAL PRIMARY KEY, \
                               payout_key TEXT NOT NULL, cents BIGINT NOT NULL)";

/// How long each step of an operation took: the transaction's opening (the store's `begin`, or
/// the handler's own `BEGIN`), the guard's `transaction` (where the lease mode opens it), the
/// handler's `INSERT`, and the end (the store's `complete` with its `COMMIT`, or the handler's
/// `COMMIT`).
type Steps = [Duration; 4];

/// The names of [`Steps`].
const STEPS: [&str; 4] = ["begin", "transaction", "INSERT", "complete / COMMIT"];

/// Times the steps of one operation.
struct Laps {
    at: Instant,
    steps: Steps,
}

impl Laps {
    fn start() -> Self {
        Laps {
            at: Instant::now(),
            steps: [Duration::ZERO; 4],
        }
    }

    /// Step `step` ended now.
    fn lap(&mut self, step: usize) {
        let now = Instant::now();
        self.steps[step] = now - self.at;
        self.at = now;
    }
}

/// One operation on `store` (its pool) with `key`: how long its steps took.
async fn operate<B: Engine>(
    store: &SqlStore<B, String>,
    operation: Operation,
    key: &IdempotencyKey,
) -> BoxResult<Steps> {
    let fingerprint = Fingerprint::of(key.as_str().as_bytes());
    let mut laps = Laps::start();
    let begun = match operation {
        Operation::Handler => {
            let mut tx = store.pool().begin_with(B::BEGIN).await?;
            laps.lap(0);
            laps.lap(1);
            B::insert(&mut tx, key.as_str()).await?;
            laps.lap(2);
            tx.commit().await?;
            laps.lap(3);
            return Ok(laps.steps);
        }
        Operation::OneCommitNew | Operation::OneCommitReplay => {
            store
                .begin_with(Mode::OneCommit, "", key, fingerprint)
                .await?
        }
        Operation::LeaseNew | Operation::LeaseReplay => store.begin(key, fingerprint).await?,
    };
    laps.lap(0);
    match (begun, operation.replays()) {
        (Begin::Execute(mut guard), None) => {
            let tx = guard.transaction().await?;
            laps.lap(1);
            B::insert(tx, key.as_str()).await?;
            laps.lap(2);
            guard.complete(&format!("201 receipt {key}")).await?;
            laps.lap(3);
            Ok(laps.steps)
        }
        (Begin::Replay(_), Some(_)) => Ok(laps.steps),
        (other, _) => Err(format!("{operation:?} answered {other:?}").into()),
    }
}

/// The latencies' p50 and p99.
fn percentiles(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    (at(0.50), at(0.99))
}

/// What one phase measured.
#[derive(Clone, Debug, Default)]
struct Phase {
    p50: Duration,
    p99: Duration,
    per_second: f64,
    /// The p50 of each step (the mixed layout).
    steps: Steps,
}

/// The database's work per operation, in a sequential phase.
#[derive(Clone, Debug, Default)]
struct Work {
    statements: f64,
    trips: Option<(f64, f64)>,
    wal: Option<Wal>,
    explained: BTreeMap<String, f64>,
}

/// `pg_stat_wal`'s counters.
#[derive(Clone, Copy, Debug, Default)]
struct Wal {
    records: f64,
    bytes: f64,
    syncs: f64,
}

/// Where a database's phases get their stores.
trait Target<B: Engine> {
    /// A store on a fresh pool of 10 (the same database each time).
    fn store(&self) -> BoxFut<'_, SqlStore<B, String>>;
    /// `pg_stat_wal`, where there is one.
    fn wal(&self) -> BoxFut<'_, Option<Wal>>;
    /// The proxy's counts (round trips, pings), where there is one.
    fn trips(&self) -> Option<(u64, u64)>;
}

struct SqliteTarget {
    path: std::path::PathBuf,
    /// Whether the pool pings a connection when it hands it out (`--sqlite-acquire-ping`).
    acquire_ping: bool,
}

impl Target<Sqlite> for SqliteTarget {
    fn store(&self) -> BoxFut<'_, SqlStore<Sqlite, String>> {
        Box::pin(async move {
            if !self.acquire_ping {
                return Ok(SqliteStore::<String>::open(&self.path).await?);
            }
            // `SqliteStore::open`'s settings, with sqlx's default `test_before_acquire(true)`
            // (the store's pool before it stopped pinging, commit 17c1536).
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(&self.path)
                .create_if_missing(true)
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(5));
            let pool = sqlx::sqlite::SqlitePoolOptions::new()
                .test_before_acquire(true)
                .connect_with(options)
                .await?;
            Ok(SqliteStore::<String>::new(pool))
        })
    }

    fn wal(&self) -> BoxFut<'_, Option<Wal>> {
        Box::pin(async { Ok(None) })
    }

    fn trips(&self) -> Option<(u64, u64)> {
        None
    }
}

struct PostgresTarget {
    options: sqlx::postgres::PgConnectOptions,
    admin: PgPool,
    proxy: RoundTripProxy,
}

impl Target<Postgres> for PostgresTarget {
    fn store(&self) -> BoxFut<'_, SqlStore<Postgres, String>> {
        Box::pin(async move {
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(10)
                .acquire_timeout(Duration::from_secs(10))
                .connect_with(self.options.clone())
                .await?;
            Ok(PostgresStore::<String>::new(pool))
        })
    }

    fn wal(&self) -> BoxFut<'_, Option<Wal>> {
        Box::pin(async move {
            let (records, bytes, syncs): (i64, i64, i64) = sqlx::query_as(
                "SELECT wal_records, CAST(wal_bytes AS BIGINT), wal_sync FROM pg_stat_wal",
            )
            .fetch_one(&self.admin)
            .await?;
            Ok(Some(Wal {
                records: records as f64,
                bytes: bytes as f64,
                syncs: syncs as f64,
            }))
        })
    }

    fn trips(&self) -> Option<(u64, u64)> {
        Some(self.proxy.counts())
    }
}

/// Runs `operation` over `keys`, one at a time; returns the phase and the work per operation.
async fn sequential<B: Engine, T: Target<B>>(
    target: &T,
    operation: Operation,
    keys: &[IdempotencyKey],
) -> BoxResult<(Phase, Work)> {
    let store = target.store().await?;
    // A warm pool: the connections open before the clock starts.
    for key in keys.iter().take(10) {
        let _ = store
            .begin(
                &IdempotencyKey::from(format!("warm-{key}")),
                Fingerprint::of(b""),
            )
            .await?;
    }
    let statements = STATEMENTS.snapshot();
    let trips = target.trips();
    let wal = target.wal().await?;
    let mut times = Vec::with_capacity(keys.len());
    let started = Instant::now();
    for key in keys {
        let at = Instant::now();
        operate(&store, operation, key).await?;
        times.push(at.elapsed());
    }
    let elapsed = started.elapsed();
    let explained = STATEMENTS.since(&statements);
    // The pool's backends report their WAL statistics when they exit.
    store.pool().close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n = keys.len() as f64;
    let trips = match (trips, target.trips()) {
        (Some(before), Some(after)) => Some((
            (after.0 - before.0) as f64 / n,
            (after.1 - before.1) as f64 / n,
        )),
        _ => None,
    };
    let wal = match (wal, target.wal().await?) {
        (Some(before), Some(after)) => Some(Wal {
            records: (after.records - before.records) / n,
            bytes: (after.bytes - before.bytes) / n,
            syncs: (after.syncs - before.syncs) / n,
        }),
        _ => None,
    };
    let (p50, p99) = percentiles(times);
    let work = Work {
        statements: explained.values().sum::<u64>() as f64 / n,
        trips,
        wal,
        explained: explained
            .into_iter()
            .map(|(summary, count)| (summary, count as f64 / n))
            .collect(),
    };
    let phase = Phase {
        p50,
        p99,
        per_second: n / elapsed.as_secs_f64(),
        steps: Steps::default(),
    };
    Ok((phase, work))
}

/// Runs `operation` over `keys` from `callers` tasks at once.
async fn concurrent<B: Engine, T: Target<B>>(
    target: &T,
    operation: Operation,
    keys: &[IdempotencyKey],
    callers: usize,
) -> BoxResult<Phase> {
    let store = Arc::new(target.store().await?);
    let times = Arc::new(Mutex::new(Vec::with_capacity(keys.len())));
    let keys: Arc<[IdempotencyKey]> = keys.into();
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (store, times, keys, next) = (
                Arc::clone(&store),
                Arc::clone(&times),
                Arc::clone(&keys),
                Arc::clone(&next),
            );
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                    let Some(key) = keys.get(i) else {
                        return Ok::<(), Box<dyn Error + Send + Sync>>(());
                    };
                    let at = Instant::now();
                    operate(&store, operation, key).await?;
                    let took = at.elapsed();
                    times
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(took);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    let elapsed = started.elapsed();
    store.pool().close().await;
    let times = std::mem::take(&mut *times.lock().unwrap_or_else(PoisonError::into_inner));
    let n = times.len() as f64;
    let (p50, p99) = percentiles(times);
    Ok(Phase {
        p50,
        p99,
        per_second: n / elapsed.as_secs_f64(),
        steps: Steps::default(),
    })
}

/// Operations of one kind in a row, in the mixed layout.
const ROUND: usize = 100;

/// Every operation on one store, as a service uses it: one pool (the store's own, 10
/// connections, all of them opened by a warm-up round from 16 callers, as a service's pool is
/// after its first burst) shared by every operation, and the operations interleaved in rounds
/// of [`ROUND`] (100 of the handler alone, 100 one-commit new keys, 100 lease-mode new keys, 100
/// replays of each mode's keys of the warm-up round), `operations` of each, taken in that order by
/// `callers` tasks (with 16, the end of one round overlaps the start of the next). The latency
/// of each operation counts for its kind.
async fn mixed<B: Engine, T: Target<B>>(
    target: &T,
    operations: usize,
    callers: usize,
) -> BoxResult<BTreeMap<Operation, Phase>> {
    let store = Arc::new(target.store().await?);
    let rounds = operations.div_ceil(ROUND);
    // Round 0 is the warm-up: it opens the pool's connections and makes the keys that every
    // later round replays (a key made in the round before could still be waiting for SQLite's
    // write lock with 16 callers).
    let mut warm = Vec::new();
    let mut measured = Vec::new();
    let mut first: BTreeMap<Operation, Vec<IdempotencyKey>> = BTreeMap::new();
    for round in 0..=rounds {
        let work = if round == 0 { &mut warm } else { &mut measured };
        for operation in Operation::ALL {
            let keys = match operation.replays() {
                // The warm-up replays nothing: its new keys may still be running.
                Some(_) if round == 0 => Vec::new(),
                Some(new) => first[&new].clone(),
                None => (0..ROUND).map(|_| IdempotencyKey::new()).collect(),
            };
            work.extend(keys.iter().map(|key| (operation, key.clone())));
            if round == 0 && operation.replays().is_none() {
                first.insert(operation, keys);
            }
        }
    }
    run_mixed(&store, &warm, callers.max(16)).await?;
    let started = Instant::now();
    let times = run_mixed(&store, &measured, callers).await?;
    let elapsed = started.elapsed();
    store.pool().close().await;
    let mut phases = BTreeMap::new();
    for operation in Operation::ALL {
        let times: Vec<&(Operation, Duration, Steps)> = times
            .iter()
            .filter(|(kind, _, _)| *kind == operation)
            .collect();
        let (p50, p99) = percentiles(times.iter().map(|(_, took, _)| *took).collect());
        let steps = std::array::from_fn(|step| {
            percentiles(times.iter().map(|(_, _, steps)| steps[step]).collect()).0
        });
        phases.insert(
            operation,
            Phase {
                p50,
                p99,
                per_second: measured.len() as f64 / elapsed.as_secs_f64(),
                steps,
            },
        );
    }
    Ok(phases)
}

/// Runs `work` in its order from `callers` tasks; the time each operation took.
async fn run_mixed<B: Engine>(
    store: &Arc<SqlStore<B, String>>,
    work: &[(Operation, IdempotencyKey)],
    callers: usize,
) -> BoxResult<Vec<(Operation, Duration, Steps)>> {
    let work: Arc<[(Operation, IdempotencyKey)]> = work.into();
    let times = Arc::new(Mutex::new(Vec::with_capacity(work.len())));
    let next = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (store, times, work, next) = (
                Arc::clone(store),
                Arc::clone(&times),
                Arc::clone(&work),
                Arc::clone(&next),
            );
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                    let Some((operation, key)) = work.get(i) else {
                        return Ok::<(), Box<dyn Error + Send + Sync>>(());
                    };
                    let at = Instant::now();
                    let steps = operate(&store, *operation, key).await?;
                    let took = at.elapsed();
                    times
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push((*operation, took, steps));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(std::mem::take(
        &mut *times.lock().unwrap_or_else(PoisonError::into_inner),
    ))
}

/// Every operation's phases on one database, `runs` times.
struct Measured {
    database: &'static str,
    sequential: BTreeMap<Operation, Vec<Phase>>,
    concurrent: BTreeMap<Operation, Vec<Phase>>,
    work: BTreeMap<Operation, Work>,
    /// The mixed layout, one caller and `callers`.
    mixed_one: BTreeMap<Operation, Vec<Phase>>,
    mixed_many: BTreeMap<Operation, Vec<Phase>>,
}

async fn measure<B: Engine, T: Target<B>>(target: &T, args: &Args) -> BoxResult<Measured> {
    let mut measured = Measured {
        database: <B as Engine>::LABEL_NAME,
        sequential: BTreeMap::new(),
        concurrent: BTreeMap::new(),
        work: BTreeMap::new(),
        mixed_one: BTreeMap::new(),
        mixed_many: BTreeMap::new(),
    };
    for run in 0..args.runs {
        // The two layouts take turns at going first, so that neither has the machine's quieter
        // moments to itself.
        let mixed_first = run % 2 == 0;
        for layout in [mixed_first, !mixed_first] {
            match (layout, args.layout) {
                (true, Layout::Both | Layout::Mixed) => {
                    measure_mixed(target, args, run, &mut measured).await?;
                }
                (false, Layout::Both | Layout::Phases) => {
                    measure_phases(target, args, run, &mut measured).await?;
                }
                _ => {}
            }
        }
    }
    Ok(measured)
}

/// One run of the mixed layout, one caller and `--callers`.
async fn measure_mixed<B: Engine, T: Target<B>>(
    target: &T,
    args: &Args,
    run: usize,
    measured: &mut Measured,
) -> BoxResult<()> {
    let one = mixed(target, args.operations, 1).await?;
    let many = mixed(target, args.operations, args.callers).await?;
    for operation in Operation::ALL {
        println!(
            "  {} run {}, mixed: {:<26} one caller p50 {} p99 {}; {} callers p50 {} p99 {}",
            <B as Engine>::LABEL_NAME,
            run + 1,
            operation.name(),
            ms(one[&operation].p50),
            ms(one[&operation].p99),
            args.callers,
            ms(many[&operation].p50),
            ms(many[&operation].p99),
        );
    }
    for (all, phases) in [
        (&mut measured.mixed_one, one),
        (&mut measured.mixed_many, many),
    ] {
        for (operation, phase) in phases {
            all.entry(operation).or_default().push(phase);
        }
    }
    Ok(())
}

/// One run of the phases, each operation on a pool of its own.
async fn measure_phases<B: Engine, T: Target<B>>(
    target: &T,
    args: &Args,
    run: usize,
    measured: &mut Measured,
) -> BoxResult<()> {
    let fresh =
        |n: usize| -> Vec<IdempotencyKey> { (0..n).map(|_| IdempotencyKey::new()).collect() };
    let mut keys: BTreeMap<Operation, (Vec<IdempotencyKey>, Vec<IdempotencyKey>)> = BTreeMap::new();
    for operation in Operation::ALL {
        let (one, many) = match operation.replays() {
            Some(new) => keys[&new].clone(),
            None => (fresh(args.operations), fresh(args.operations)),
        };
        let (phase, work) = sequential(target, operation, &one).await?;
        let concurrently = concurrent(target, operation, &many, args.callers).await?;
        println!(
            "  {} run {}: {:<26} one at a time p50 {} p99 {}; {} callers p50 {} p99 {}, {:.0}/s",
            <B as Engine>::LABEL_NAME,
            run + 1,
            operation.name(),
            ms(phase.p50),
            ms(phase.p99),
            args.callers,
            ms(concurrently.p50),
            ms(concurrently.p99),
            concurrently.per_second,
        );
        measured
            .sequential
            .entry(operation)
            .or_default()
            .push(phase);
        measured
            .concurrent
            .entry(operation)
            .or_default()
            .push(concurrently);
        measured.work.insert(operation, work);
        keys.insert(operation, (one, many));
    }
    Ok(())
}

#[tokio::main]
async fn main() -> BoxResult<()> {
    let args = args()?;
    tracing::subscriber::set_global_default(StatementCounter)?;
    println!(
        "{} operations per phase, one at a time and from {} callers, {} runs; load average before: {}",
        args.operations,
        args.callers,
        args.runs,
        load_average()
    );
    let mut all = Vec::new();

    let dir = std::env::temp_dir().join(format!("retry-bench-payments-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sqlite = SqliteTarget {
        path: dir.join("payments.db"),
        acquire_ping: args.sqlite_acquire_ping,
    };
    let store = sqlite.store().await?;
    store.migrate().await?;
    sqlx::raw_sql(SQLITE_LEDGER).execute(store.pool()).await?;
    store.pool().close().await;
    all.push(measure(&sqlite, &args).await?);
    std::fs::remove_dir_all(&dir)?;

    if let Some(url) = &args.postgres {
        let admin = PgPool::connect(url).await?;
        let schema = format!("bench_payments_{}", std::process::id());
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&admin)
            .await?;
        let proxy = RoundTripProxy::start(url).await?;
        let options = proxy
            .connect_options(url)?
            .options([("search_path", schema.as_str())]);
        let postgres = PostgresTarget {
            options,
            admin: admin.clone(),
            proxy,
        };
        let store = postgres.store().await?;
        store.migrate().await?;
        sqlx::raw_sql(POSTGRES_LEDGER).execute(store.pool()).await?;
        store.pool().close().await;
        let settings: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, setting FROM pg_settings \
             WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'server_version')",
        )
        .fetch_all(&admin)
        .await?;
        println!("PostgreSQL: {settings:?}");
        all.push(measure(&postgres, &args).await?);
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&admin)
            .await?;
    }

    println!("\nload average after: {}\n", load_average());
    print_tables(&all, &args);
    if args.explain {
        for measured in &all {
            for (operation, work) in &measured.work {
                println!(
                    "\n{} / {}, statements per operation:",
                    measured.database,
                    operation.name()
                );
                for (summary, count) in &work.explained {
                    println!("  {count:>5.2}  {summary}");
                }
            }
        }
    }
    Ok(())
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    if values.is_empty() {
        return 0.0;
    }
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// The median of `phases` by `f`.
fn seconds(phases: &[Phase], f: fn(&Phase) -> f64) -> f64 {
    median(phases.iter().map(f))
}

/// Each run's p50 of `operation` against the same run's handler alone (measured seconds apart
/// on the same machine and pool layout): the median of those ratios, and their range.
fn ratios(phases: &BTreeMap<Operation, Vec<Phase>>, operation: Operation) -> String {
    let ratios: Vec<f64> = phases[&operation]
        .iter()
        .zip(&phases[&Operation::Handler])
        .map(|(phase, base)| phase.p50.as_secs_f64() / base.p50.as_secs_f64())
        .collect();
    let low = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let high = ratios.iter().copied().fold(0.0, f64::max);
    format!("{:.2}× ({low:.2}–{high:.2})", median(ratios.into_iter()))
}

fn print_tables(all: &[Measured], args: &Args) {
    if args.layout != Layout::Mixed {
        print_phases(all, args);
    }
    if args.layout != Layout::Phases {
        print_mixed(all, args);
    }
}

fn print_phases(all: &[Measured], args: &Args) {
    println!("Each operation in a phase of its own, on a pool of its own:\n");
    println!(
        "| database | operation | one at a time: p50 / p99 | ÷ handler, p50 (range) | {} callers: p50 / p99 | ÷ handler, p50 (range) | operations/s, {} callers | statements | round trips (pings) | WAL records / bytes / syncs |",
        args.callers, args.callers
    );
    println!("|---|---|---|---:|---|---:|---:|---:|---|---|");
    for measured in all {
        for operation in Operation::ALL {
            let one = &measured.sequential[&operation];
            let many = &measured.concurrent[&operation];
            let work = &measured.work[&operation];
            let trips = work.trips.map_or("—".to_owned(), |(trips, pings)| {
                format!("{trips:.1} ({pings:.1})")
            });
            let wal = work.wal.map_or("—".to_owned(), |wal| {
                format!("{:.1} / {:.0} / {:.2}", wal.records, wal.bytes, wal.syncs)
            });
            println!(
                "| {} | {} | {:.2} ms / {:.2} ms | {} | {:.2} ms / {:.2} ms | {} | {:.0} | {:.1} | {} | {} |",
                measured.database,
                operation.name(),
                seconds(one, |p| p.p50.as_secs_f64()) * 1e3,
                seconds(one, |p| p.p99.as_secs_f64()) * 1e3,
                ratios(&measured.sequential, operation),
                seconds(many, |p| p.p50.as_secs_f64()) * 1e3,
                seconds(many, |p| p.p99.as_secs_f64()) * 1e3,
                ratios(&measured.concurrent, operation),
                seconds(many, |p| p.per_second),
                work.statements,
                trips,
                wal,
            );
        }
    }
    println!();
}

fn print_mixed(all: &[Measured], args: &Args) {
    println!(
        "Every operation on one pool of 10, interleaved in rounds of {ROUND}:\n\n\
         | database | operation | one caller: p50 / p99 | ÷ handler, p50 (range) | {} callers: p50 / p99 | ÷ handler, p50 (range) |\n\
         |---|---|---|---:|---|---:|",
        args.callers
    );
    for measured in all {
        for operation in Operation::ALL {
            let one = &measured.mixed_one[&operation];
            let many = &measured.mixed_many[&operation];
            println!(
                "| {} | {} | {:.2} ms / {:.2} ms | {} | {:.2} ms / {:.2} ms | {} |",
                measured.database,
                operation.name(),
                seconds(one, |p| p.p50.as_secs_f64()) * 1e3,
                seconds(one, |p| p.p99.as_secs_f64()) * 1e3,
                ratios(&measured.mixed_one, operation),
                seconds(many, |p| p.p50.as_secs_f64()) * 1e3,
                seconds(many, |p| p.p99.as_secs_f64()) * 1e3,
                ratios(&measured.mixed_many, operation),
            );
        }
    }
    println!(
        "\nWhere the time goes (the same operations): each step's p50, the median of the runs\n\n\
         | database | operation | callers | {} |\n|---|---|---:|{}",
        STEPS.join(" | "),
        "---:|".repeat(STEPS.len())
    );
    for measured in all {
        for operation in [
            Operation::Handler,
            Operation::OneCommitNew,
            Operation::LeaseNew,
        ] {
            for (callers, phases) in [
                (1, &measured.mixed_one),
                (args.callers, &measured.mixed_many),
            ] {
                let steps: Vec<String> = (0..STEPS.len())
                    .map(|step| {
                        let p50 = median(
                            phases[&operation]
                                .iter()
                                .map(|p| p.steps[step].as_secs_f64()),
                        );
                        format!("{:.3} ms", p50 * 1e3)
                    })
                    .collect();
                println!(
                    "| {} | {} | {callers} | {} |",
                    measured.database,
                    operation.name(),
                    steps.join(" | ")
                );
            }
        }
    }
    println!();
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|line| {
            let fields: Vec<&str> = line.split_whitespace().take(3).collect();
            (fields.len() == 3).then(|| fields.join(" "))
        })
        .unwrap_or_else(|| "unknown".to_owned())
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

//! Fault tests of the payment service (`src/payments`) with real processes and real signals.
//!
//! The service runs as its own process (the `payments-service` binary), on a SQLite file or a
//! PostgreSQL schema, and pays through a bank that runs in the test's process (so that it
//! outlives the service). The failures are real: the service is killed with SIGKILL at a step
//! of a payout that the test chooses (`--stop-at`, see `faults`), PostgreSQL is stopped and
//! started with `pg_ctl`. After each run the test checks the invariant: the ledger holds the
//! payout exactly once, the bank transferred once, and the client ended with that payout's
//! receipt.
//!
//! Each payout also queues its receipt e-mail (`payments::mails`) in the transaction that writes
//! its ledger row and completes its key. Right after each kill, before the restart, the test
//! reads the database: it holds either the whole payout (the key completed with its receipt, one
//! ledger row, exactly one e-mail job) or nothing of it (no completed key, no row, no job),
//! whatever the step. The services run the worker that sends the e-mails (`--send-mails`), and
//! after each run each e-mail has been sent exactly once, by the restarted service (taking over
//! after its lease a job that the killed one had claimed), through the outage, by either replica.
//!
//! Each test runs in both of the service's modes: the lease mode (a claim, the bank, then the
//! ledger row and the completion in one transaction) and the one-commit mode (`--one-commit`,
//! no bank: the claim, the ledger row and the completion in one transaction), where a kill
//! before the commit leaves nothing and the retry pays at once, without a lease to wait for.
//!
//! The random schedules run in chains side by side (8 on SQLite, 12 on PostgreSQL): in a chain,
//! the service that a run's kill restarts serves that run's retries and checks, armed to stop
//! at the next run's step in the payout of the next run's key only (`--stop-key`), and is that
//! run's victim; so each run kills one process and starts one. Both modes' payouts go through
//! one PostgreSQL restart together, a service per mode.
//!
//! The random schedules print their seed; `PAYMENTS_FAULT_SEED=N` replays one, and
//! `PAYMENTS_FAULT_RUNS=N` changes the number of runs: 50 by default, to keep a contributor's
//! `cargo test --workspace` short, and 200 in `.ci/run`, which sets it. The PostgreSQL tests
//! need a server (`.ci/postgres.sh run cargo test -p retry-examples --test it payments_faults::`);
//! without one they print how to run them and pass, unless `CI` is set.

// An unwrap in a test fails the test, which is what it should do.
#![allow(clippy::unwrap_used)]

use crate::common::databases;
use retry_examples::payments::bank::Bank;
use retry_examples::payments::client::{self, Answer, PayClient, PayError};
use retry_examples::payments::faults::Step;
use retry_examples::payments::process::ServiceProcess;
use retry_examples::payments::service::{
    Config, Database, LedgerRow, PayoutRecord, PayoutRecords, read_ledger,
};
use retry_examples::payments::{Cents, ClaimId, Receipt};
use retry_runtime::{IdempotencyKey, non_idempotent, retry};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Barrier, Semaphore};

const SERVICE: &str = env!("CARGO_BIN_EXE_payments-service");

/// The lease of the services whose payouts are killed: a kill while the key is claimed costs
/// the client this long.
const LEASE: Duration = Duration::from_millis(250);

/// How a service claims its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// A claim under a lease, then the bank, then one transaction for the ledger and the key.
    Lease,
    /// `--one-commit`, no bank: the claim, the ledger row and the key in one transaction.
    OneCommit,
}

impl Mode {
    /// The service's settings for this mode.
    fn config(self, database: &Database, bank: &Bank) -> Config {
        Config {
            database: database.clone(),
            bank: (self == Mode::Lease).then(|| bank.url().to_owned()),
            one_commit: self == Mode::OneCommit,
            send_mails: true,
            ..Config::default()
        }
    }
}

/// The random runs of the one-commit mode, out of the lease mode's: it runs beside them, and
/// has fewer ways to fail (no bank, no lease), so a fifth keeps CI short.
const ONE_COMMIT_SHARE: usize = 5;

/// Chains of random runs at once per database (each chain's runs one after another): more on
/// PostgreSQL, whose runs wait longer (a restart connects and migrates over the network), so
/// that both databases' schedules end at about the same time when their tests run side by side.
const PARALLEL_RUNS: usize = 8;
const PARALLEL_RUNS_POSTGRES: usize = 12;

const RUN_HINT: &str =
    ".ci/postgres.sh run cargo test -p retry-examples --test it payments_faults::";

/// The client of the tests: the library's attempt, retried for up to a minute with pauses of at
/// most 40 ms, so that a restart or a lease of a few hundred milliseconds costs little.
#[non_idempotent]
#[retry(max = 2000, base = "5ms", max_delay = "40ms", deadline = "60s", jitter = full, on = passing)]
async fn pay_until_done(
    client: &PayClient,
    claim: ClaimId,
    cents: Cents,
    key: &IdempotencyKey,
) -> Result<Receipt, PayError> {
    client::attempt(client, claim, cents, key).await
}

/// What the example's client retries, without waiting as long as the service's `Retry-After`
/// asks: it says whole seconds, and the leases here last a few hundred milliseconds. (A
/// `Verdict::RetryAfter` longer than `max_delay` would end the loop instead.)
fn passing(error: &PayError) -> bool {
    client::is_transient(error).is_retry()
}

/// Prints past the harness's capture, so that the counts show in `cargo test`'s output.
fn report(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A directory of the test's own, deleted at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(databases::unique_name(test));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where a test's runs keep their data: a SQLite file per run, or one PostgreSQL schema that
/// the runs share (each run its own key).
enum Databases {
    Sqlite(TempDir),
    Postgres(Database),
}

impl Databases {
    fn sqlite(test: &str) -> Self {
        Databases::Sqlite(TempDir::new(test))
    }

    /// A fresh schema on the shared server, or `None` after the skip rule.
    async fn postgres(test: &str) -> Option<Self> {
        let Some(url) = std::env::var("RETRY_TEST_POSTGRES_URL")
            .ok()
            .filter(|url| !url.is_empty())
        else {
            databases::server_missing(test, "PostgreSQL", RUN_HINT);
            return None;
        };
        let schema = databases::new_schema(&url, test).await;
        Some(Databases::Postgres(on_schema(&url, &schema)))
    }

    fn for_run(&self, run: usize) -> Database {
        match self {
            Databases::Sqlite(dir) => Database::Sqlite(dir.path().join(format!("run-{run}.db"))),
            Databases::Postgres(database) => database.clone(),
        }
    }

    /// How many chains of random runs go at once.
    fn chains(&self) -> usize {
        match self {
            Databases::Sqlite(_) => PARALLEL_RUNS,
            Databases::Postgres(_) => PARALLEL_RUNS_POSTGRES,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Databases::Sqlite(_) => "SQLite",
            Databases::Postgres(_) => "PostgreSQL",
        }
    }
}

/// `url` with `schema` first on the search path (sqlx reads `options[...]` from the URL).
fn on_schema(url: &str, schema: &str) -> Database {
    let separator = if url.contains('?') { '&' } else { '?' };
    Database::Postgres(format!("{url}{separator}options[search_path]={schema}"))
}

async fn start(config: &Config) -> ServiceProcess {
    ServiceProcess::start(Path::new(SERVICE), &[], config, false)
        .await
        .unwrap()
}

/// The ledger's rows for `key`.
async fn ledger(database: &Database, key: &IdempotencyKey) -> Vec<LedgerRow> {
    let rows = read_ledger(database).await.unwrap();
    rows.into_iter()
        .filter(|row| row.entry.key == key.as_str())
        .collect()
}

/// What `database` holds for `key`, read again until its e-mail's job is done (the service's
/// worker sends it within a poll or, when a killed service had claimed it, a lease); then the
/// e-mail must have been sent exactly once.
async fn mailed_once(database: &Database, key: &IdempotencyKey, context: &str) -> PayoutRecord {
    let records = PayoutRecords::open(database).await.unwrap();
    let record = mailed_once_in(&records, key, context, None).await;
    records.close().await;
    record
}

/// [`mailed_once`] on an open connection; on a failure, with what `service` (whose worker sends
/// the e-mail) printed last.
async fn mailed_once_in(
    records: &PayoutRecords,
    key: &IdempotencyKey,
    context: &str,
    service: Option<&ServiceProcess>,
) -> PayoutRecord {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let record = records.of(key.as_str()).await.unwrap();
        if record.mail_jobs.iter().all(|state| state == "done") || Instant::now() > deadline {
            let jobs = match records.mail_jobs_of(key.as_str()).await {
                Ok(jobs) => jobs.join("; "),
                Err(e) => format!("not read: {e}"),
            };
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis());
            let context = format!("{context} (the jobs: {jobs}; now {now})");
            let context = match service {
                Some(service) => format!(
                    "{context} (the service said last:\n{}\n)",
                    service.recent_output()
                ),
                None => context.to_owned(),
            };
            assert!(
                record.is_whole(),
                "{context}: the payout committed whole: {record:?}"
            );
            assert_eq!(
                record.mail_jobs,
                ["done"],
                "{context}: one e-mail job, done by the worker"
            );
            assert_eq!(record.mails_sent, 1, "{context}: the e-mail was sent once");
            return record;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// What a killed run saw, for the counts.
struct Run {
    mode: Mode,
    step: Step,
    /// Whether the client got a 409 (the lease was still running after the restart).
    saw_in_progress: bool,
    attempts: u32,
}

/// One payout whose service is killed at `step`, then started again on the same port and
/// database while the client's `#[retry]` keeps trying; then checks the invariant.
async fn kill_at(mode: Mode, step: Step, database: Database, bank: &Bank, context: &str) -> Run {
    let key = IdempotencyKey::new();
    let config = victim(mode, step, &key, &database, bank);
    let service = start(&config).await;
    let (run, restarted) = kill_and_restart(&config, &key, service, None, bank, context).await;
    restarted.kill().unwrap();
    run
}

/// The settings of a service that stops at `step` of the payout of `key`.
fn victim(
    mode: Mode,
    step: Step,
    key: &IdempotencyKey,
    database: &Database,
    bank: &Bank,
) -> Config {
    Config {
        lease: LEASE,
        stop_at: Some(step),
        stop_key: Some(key.as_str().to_owned()),
        ..mode.config(database, bank)
    }
}

/// Pays `key` through `service`, started with `config` (a [`victim`]'s), which stops at its step
/// of that payout: kills it there with
/// SIGKILL, checks the database right after the kill, and starts it again on the same port and
/// database while the client's `#[retry]` keeps trying; then checks the invariant. The restarted
/// process is armed for `next` (the next run's step and key, so that it is that run's victim,
/// and serves this run's retries as any service would) and returned.
async fn kill_and_restart(
    config: &Config,
    key: &IdempotencyKey,
    mut service: ServiceProcess,
    next: Option<(Step, &IdempotencyKey)>,
    bank: &Bank,
    context: &str,
) -> (Run, ServiceProcess) {
    let mode = if config.one_commit {
        Mode::OneCommit
    } else {
        Mode::Lease
    };
    let step = config.stop_at.expect("a victim stops at a step");
    let records = PayoutRecords::open(&config.database).await.unwrap();
    let same_port = SocketAddr::from(([127, 0, 0, 1], service.port()));
    let http = reqwest::Client::new();
    let client = PayClient::new("client", &http, service.url()).quiet();
    let (claim, cents) = (ClaimId(4711), Cents(125_000));
    let context = format!("{context}, {mode:?} mode, kill {step}, key {key}");

    let crash_and_restart = async {
        let stopped = service.stopped().await.unwrap();
        assert_eq!(stopped, step, "{context}");
        service.kill().unwrap(); // SIGKILL
        // Nothing runs on this key now: the database holds the whole payout or none of it.
        let record = records.of(key.as_str()).await.unwrap();
        if step.committed() {
            assert!(
                record.is_whole(),
                "{context}: killed after the commit: {record:?}"
            );
        } else {
            assert!(
                record.is_empty(),
                "{context}: killed before the commit: {record:?}"
            );
        }
        let restarted = Config {
            listen: same_port,
            stop_at: next.map(|(step, _)| step),
            stop_key: next.map(|(_, key)| key.as_str().to_owned()),
            ..config.clone()
        };
        start(&restarted).await
    };
    let (receipt, restarted) = tokio::join!(
        pay_until_done(&client, claim, cents, key),
        crash_and_restart
    );
    let receipt = receipt.unwrap_or_else(|e| {
        panic!(
            "{context}: the client ended with {e}; the service said:\n{}",
            restarted.recent_output()
        )
    });

    // A repeat after the restart gets the same receipt, whatever the step.
    let again = PayClient::new("repeat", &http, restarted.url()).quiet();
    let repeated = pay_until_done(&again, claim, cents, key).await.unwrap();
    assert_eq!(repeated, receipt, "{context}: the repeat");

    let rows = records.ledger_of(key.as_str()).await.unwrap();
    assert_eq!(
        rows.len(),
        1,
        "{context}: one payout in the ledger: {rows:?}"
    );
    let row = &rows[0];
    assert_eq!(receipt.receipt, format!("P-{}", row.id), "{context}");
    assert_eq!(receipt.transfer, row.entry.transfer, "{context}");
    if mode == Mode::OneCommit {
        // The killed claim was rolled back with its transaction: the retry was a new claim.
        assert_eq!(row.entry.execution, 1, "{context}: nothing to take over");
        assert_eq!(bank.requests(key.as_str()), 0, "{context}: no bank");
        let conflicts = client
            .answers()
            .into_iter()
            .filter(|answer| matches!(answer, Answer::Status { status: 409, .. }));
        assert_eq!(conflicts.count(), 0, "{context}: no lease, so no 409");
    } else {
        let execution = if step.holds_the_lease() { 2 } else { 1 };
        assert_eq!(
            row.entry.execution, execution,
            "{context}: a kill while the key is claimed is taken over after the lease"
        );
        assert_eq!(
            bank.transfers_executed(key.as_str()),
            1,
            "{context}: one transfer"
        );
        // The bank is asked again only when the killed service had asked it and not committed.
        let asked = if matches!(step, Step::AfterLedgerWrite | Step::AfterEnqueue) {
            2
        } else {
            1
        };
        // Calls, not requests: under load a `transfer` may retry with its key.
        assert_eq!(bank.calls(key.as_str()), asked, "{context}");
    }
    mailed_once_in(&records, key, &context, Some(&restarted)).await;
    records.close().await;
    if step == Step::AfterResponse {
        assert_eq!(
            client.answers(),
            [Answer::Paid],
            "{context}: the response came before the kill"
        );
    } else {
        assert_eq!(
            client.answers().first(),
            Some(&Answer::NoAnswer),
            "{context}: the kill cut the first attempt off"
        );
    }
    let run = Run {
        mode,
        step,
        saw_in_progress: client.answers().iter().any(|answer| {
            matches!(
                answer,
                Answer::Status {
                    status: 409,
                    retry_after: true
                }
            )
        }),
        attempts: client.attempts(),
    };
    (run, restarted)
}

async fn every_step(databases: Databases) {
    let bank = Bank::start_quiet(Duration::ZERO).await.unwrap();
    let schedule = [Mode::Lease, Mode::OneCommit]
        .into_iter()
        .flat_map(|mode| Step::ALL.map(|step| (mode, step)));
    let runs = schedule.enumerate().map(|(run, (mode, step))| {
        let database = databases.for_run(run);
        let context = format!("{}, every step", databases.name());
        let bank = &bank;
        async move { kill_at(mode, step, database, bank, &context).await }
    });
    let runs = futures_util::future::join_all(runs).await;
    assert_eq!(runs.len(), 2 * Step::ALL.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_kill_at_every_step_pays_once() {
    every_step(Databases::sqlite("sqlite_a_kill_at_every_step_pays_once")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_kill_at_every_step_pays_once() {
    let Some(databases) = Databases::postgres("postgres_a_kill_at_every_step_pays_once").await
    else {
        return;
    };
    every_step(databases).await;
}

/// splitmix64: the step of run `n` depends on the seed and `n` alone, not on the order in which
/// parallel runs finish, so a seed replays.
fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn seed() -> u64 {
    match std::env::var("PAYMENTS_FAULT_SEED") {
        Ok(seed) => seed
            .parse()
            .unwrap_or_else(|_| panic!("PAYMENTS_FAULT_SEED={seed} is not a number")),
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            mix(now.as_nanos() as u64, u64::from(std::process::id()))
        }
    }
}

fn runs() -> usize {
    std::env::var("PAYMENTS_FAULT_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .unwrap_or(50)
}

/// The runs of `schedule` (run number and step) one after another, in `mode`, on `database`:
/// each run's victim is the service that the previous run's kill restarted.
async fn chain_of_kills(
    mode: Mode,
    schedule: Vec<(usize, Step)>,
    database: Database,
    bank: &Bank,
    context: String,
) -> Vec<Run> {
    let keys: Vec<IdempotencyKey> = schedule.iter().map(|_| IdempotencyKey::new()).collect();
    let mut done = Vec::with_capacity(schedule.len());
    let Some(&(_, first)) = schedule.first() else {
        return done;
    };
    let mut service = start(&victim(mode, first, &keys[0], &database, bank)).await;
    for (i, &(run, step)) in schedule.iter().enumerate() {
        let next = schedule.get(i + 1).map(|&(_, step)| (step, &keys[i + 1]));
        let context = format!("{context}, run {run}");
        let config = victim(mode, step, &keys[i], &database, bank);
        let (outcome, restarted) =
            kill_and_restart(&config, &keys[i], service, next, bank, &context).await;
        done.push(outcome);
        service = restarted;
    }
    service.kill().unwrap();
    done
}

async fn random_steps(databases: Databases) {
    let seed = seed();
    let runs = runs();
    report(&format!(
        "payments faults, {}: {runs} runs, kill steps from seed {seed} \
         (replay with PAYMENTS_FAULT_SEED={seed})",
        databases.name()
    ));
    let started = Instant::now();
    let bank = Bank::start_quiet(Duration::ZERO).await.unwrap();
    let one_commit_runs = runs.div_ceil(ONE_COMMIT_SHARE);
    let total = runs + one_commit_runs;
    // The runs of each mode in chains that run side by side, the chains shared in proportion
    // to the runs. In a chain, each run's restarted service is the next run's victim.
    let parallel = databases.chains();
    let lease_chains = (parallel * runs).div_ceil(total).clamp(1, parallel - 1);
    let chains = [
        (Mode::Lease, 0..runs, lease_chains),
        (Mode::OneCommit, runs..total, parallel - lease_chains),
    ]
    .into_iter()
    .flat_map(|(mode, numbers, chains)| {
        (0..chains).map(move |chain| {
            let numbers: Vec<usize> = numbers.clone().skip(chain).step_by(chains).collect();
            (mode, numbers)
        })
    })
    .filter(|(_, numbers)| !numbers.is_empty())
    .enumerate()
    .map(|(chain, (mode, numbers))| {
        let schedule: Vec<(usize, Step)> = numbers
            .into_iter()
            .map(|run| {
                let step = Step::ALL[(mix(seed, run as u64) % Step::ALL.len() as u64) as usize];
                (run, step)
            })
            .collect();
        let database = databases.for_run(chain);
        let context = format!("{}, seed {seed}", databases.name());
        chain_of_kills(mode, schedule, database, &bank, context)
    });
    let done: Vec<Run> = futures_util::future::join_all(chains)
        .await
        .into_iter()
        .flatten()
        .collect();

    let mut counts: BTreeMap<usize, (Step, usize, usize)> = BTreeMap::new();
    for run in done.iter().filter(|run| run.mode == Mode::Lease) {
        let index = Step::ALL.iter().position(|s| *s == run.step).unwrap();
        let count = counts.entry(index).or_insert((run.step, 0, 0));
        count.1 += 1;
        count.2 += usize::from(run.saw_in_progress);
    }
    let per_step: Vec<String> = counts
        .values()
        .map(|(step, n, in_progress)| {
            if step.holds_the_lease() {
                format!("{step} {n} ({in_progress} saw 409 while the lease ran)")
            } else {
                format!("{step} {n}")
            }
        })
        .collect();
    let attempts: u32 = done.iter().map(|run| run.attempts).sum();
    report(&format!(
        "payments faults, {}: {runs} runs of the lease mode and {one_commit_runs} of the \
         one-commit mode passed in {:.1} s, the lease mode's killed at {}; every run: one \
         ledger row, one bank transfer (lease mode), the client's receipt; {attempts} client \
         attempts",
        databases.name(),
        started.elapsed().as_secs_f64(),
        per_step.join(", "),
    ));
    assert_eq!(done.len(), total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_kills_at_random_steps_pay_once() {
    random_steps(Databases::sqlite("sqlite_kills_at_random_steps_pay_once")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_kills_at_random_steps_pay_once() {
    let Some(databases) = Databases::postgres("postgres_kills_at_random_steps_pay_once").await
    else {
        return;
    };
    random_steps(databases).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_two_replicas_and_a_hundred_clients_with_one_key_pay_once() {
    two_replicas(
        Mode::Lease,
        "postgres_two_replicas_and_a_hundred_clients_with_one_key_pay_once",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_one_commit_two_replicas_and_a_hundred_clients_with_one_key_pay_once() {
    two_replicas(
        Mode::OneCommit,
        "postgres_one_commit_two_replicas_and_a_hundred_clients_with_one_key_pay_once",
    )
    .await;
}

async fn two_replicas(mode: Mode, test: &str) {
    let Some(databases) = Databases::postgres(test).await else {
        return;
    };
    let database = databases.for_run(0);
    // A bank that takes a moment, so that the other clients arrive while the payout runs.
    let bank = Bank::start_quiet(Duration::from_millis(500)).await.unwrap();
    let config = |name: &str| Config {
        // Longer than any payout here: no takeover, so exactly one execution.
        lease: Duration::from_secs(30),
        name: name.to_owned(),
        ..mode.config(&database, &bank)
    };
    let replica_a = start(&config("replica a")).await;
    let replica_b = start(&config("replica b")).await;
    let http = reqwest::Client::new();
    let key = IdempotencyKey::new();
    let (claim, cents) = (ClaimId(4711), Cents(125_000));
    const CLIENTS: usize = 100;
    let barrier = Barrier::new(CLIENTS);
    let clients: Vec<PayClient> = (0..CLIENTS)
        .map(|i| {
            let (a, b) = (replica_a.url(), replica_b.url());
            let order = if i % 2 == 0 { [a, b] } else { [b, a] };
            PayClient::replicas(&format!("client {i}"), &http, &order).quiet()
        })
        .collect();
    let receipts = futures_util::future::join_all(clients.iter().map(|client| async {
        barrier.wait().await;
        pay_until_done(client, claim, cents, &key).await
    }))
    .await;
    let receipts: Vec<Receipt> = receipts
        .into_iter()
        .map(|receipt| {
            receipt.unwrap_or_else(|e| {
                panic!(
                    "a client ended with {e}:\n{}\n{}",
                    replica_a.recent_output(),
                    replica_b.recent_output()
                )
            })
        })
        .collect();

    let rows = ledger(&database, &key).await;
    assert_eq!(rows.len(), 1, "one payout: {rows:?}");
    // One execution, the other 99 clients waiting for it; one more for each payout that failed
    // on its way (the bank or the ledger unreachable on a loaded machine: a 503, its key given
    // back, or, if that release failed too, taken over after the lease), which asked the bank
    // again with the same key.
    let failed = clients
        .iter()
        .flat_map(|client| client.answers())
        .filter(|answer| matches!(answer, Answer::Status { status: 503, .. }))
        .count();
    let executions = u32::try_from(1 + failed).unwrap_or(u32::MAX);
    assert!(
        rows[0].entry.execution <= u64::from(executions),
        "one execution and one per failed payout ({failed}): {rows:?}"
    );
    mailed_once(&database, &key, "two replicas").await;
    let expected = format!("P-{}", rows[0].id);
    assert!(
        receipts.iter().all(|receipt| receipt.receipt == expected),
        "every client has the payout's receipt"
    );
    if mode == Mode::Lease {
        // Calls, not requests (the payout's own `transfer` may retry with its key): one per
        // execution at most.
        let calls = bank.calls(key.as_str());
        assert!(
            (1..=executions).contains(&calls),
            "one payout asked the bank, and one per failed payout ({failed}): {calls}"
        );
        assert_eq!(
            bank.transfers_executed(key.as_str()),
            1,
            "one transfer, whatever the calls"
        );
    }
    let waited = clients
        .iter()
        .filter(|client| {
            client.answers().iter().any(|answer| {
                matches!(
                    answer,
                    Answer::Status {
                        status: 409,
                        retry_after: true
                    }
                )
            })
        })
        .count();
    report(&format!(
        "payments faults, two replicas, {mode:?} mode: {CLIENTS} clients with one key, one \
         payout ({expected}); {waited} clients got 409 while it ran, then the receipt"
    ));
    if mode == Mode::OneCommit {
        assert_eq!(
            waited, 0,
            "a duplicate waits for the claim's transaction instead"
        );
    }
    replica_a.kill().unwrap();
    replica_b.kill().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarting_in_the_middle_of_payouts_in_both_modes_loses_and_doubles_nothing() {
    restart_mid_run(
        &[(Mode::Lease, 200), (Mode::OneCommit, 100)],
        "postgres_restarting_in_the_middle_of_payouts_in_both_modes",
    )
    .await;
}

/// Payouts in flight in one mode through the database's restart: a service of that mode on a
/// schema of its own, a client per payout.
struct Lane {
    mode: Mode,
    database: Database,
    service: ServiceProcess,
    keys: Vec<IdempotencyKey>,
    clients: Vec<PayClient>,
}

/// Payouts with distinct keys, 16 at a time per mode, with a service per mode (`lanes`: the
/// mode and its number of payouts) on one PostgreSQL cluster of the test's own, which is
/// stopped once a mode has paid a quarter of its payouts (no payout starts while it stops, so
/// that both modes have payouts left) and started again once the services have answered 503
/// about twice to each payout in flight: one outage for both modes.
async fn restart_mid_run(lanes: &[(Mode, usize)], test: &str) {
    if !std::env::var("RETRY_TEST_PG_BIN").is_ok_and(|bin| Path::new(&bin).join("pg_ctl").exists())
    {
        databases::server_missing(test, "PostgreSQL's server binaries", RUN_HINT);
        return;
    }
    let Some(cluster) = databases::PrivateCluster::start(test, RUN_HINT) else {
        return;
    };
    let cluster = Arc::new(cluster);
    let bank = Bank::start_quiet(Duration::ZERO).await.unwrap();
    let http = reqwest::Client::new();
    let mut started = Vec::new();
    for &(mode, payouts) in lanes {
        let schema = databases::new_schema(&cluster.url(), &format!("{test}_{mode:?}")).await;
        let database = on_schema(&cluster.url(), &schema);
        let service = start(&Config {
            lease: LEASE,
            // While the server is down, a request answers 503 after this long.
            db_timeout: Duration::from_millis(200),
            ..mode.config(&database, &bank)
        })
        .await;
        let keys = (0..payouts).map(|_| IdempotencyKey::new()).collect();
        let clients = (0..payouts)
            .map(|i| PayClient::new(&format!("client {i}"), &http, service.url()).quiet())
            .collect();
        started.push(Lane {
            mode,
            database,
            service,
            keys,
            clients,
        });
    }
    let lanes = started;

    const AT_ONCE: usize = 16;
    let payouts: usize = lanes.iter().map(|lane| lane.keys.len()).sum();
    // Paid per mode, and a gate that each payout passes as it starts: the outage closes it
    // while it stops the server, so that no mode runs out of payouts before the server is down
    // (the one-commit mode, without a bank, once paid all of its own during a slow `pg_ctl
    // stop`, and then had no payout left to be answered 503).
    let paid_by_lane: Vec<AtomicUsize> = lanes.iter().map(|_| AtomicUsize::new(0)).collect();
    let starting_gate = tokio::sync::RwLock::new(());
    let paying =
        futures_util::future::join_all(lanes.iter().zip(&paid_by_lane).map(|(lane, paid_here)| {
            let starting_gate = &starting_gate;
            async move {
                let slots = Semaphore::new(AT_ONCE);
                let slots = &slots;
                futures_util::future::join_all(lane.keys.iter().zip(&lane.clients).enumerate().map(
                    |(i, (key, client))| async move {
                        let _slot = slots.acquire().await.unwrap();
                        drop(starting_gate.read().await);
                        let claim = ClaimId(5000 + i as u32);
                        let receipt =
                            pay_until_done(client, claim, Cents(1000 + i as u64), key).await;
                        paid_here.fetch_add(1, Ordering::SeqCst);
                        receipt
                    },
                ))
                .await
            }
        }));
    // The 503s each mode's clients got so far.
    let refusals = || {
        lanes
            .iter()
            .map(|lane| {
                lane.clients
                    .iter()
                    .map(|client| {
                        client
                            .answers()
                            .iter()
                            .filter(|answer| matches!(answer, Answer::Status { status: 503, .. }))
                            .count()
                    })
                    .sum::<usize>()
            })
            .collect::<Vec<usize>>()
    };
    let outage = async {
        // Once a mode has paid a quarter of its payouts, no payout starts until the server is
        // down: each mode keeps at least three quarters of its own, less those under way.
        while !lanes
            .iter()
            .zip(&paid_by_lane)
            .any(|(lane, paid)| paid.load(Ordering::SeqCst) >= lane.keys.len() / 4)
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let closed = starting_gate.write().await;
        let down_at: usize = paid_by_lane
            .iter()
            .map(|paid| paid.load(Ordering::SeqCst))
            .sum();
        let stopping = Arc::clone(&cluster);
        tokio::task::spawn_blocking(move || stopping.stop())
            .await
            .unwrap();
        drop(closed);
        let stopped = Instant::now();
        // Counted from the stop, per mode: a busy service may answer 503 before it too (its
        // pool's timeout), and those do not show the outage.
        let before = refusals();
        while refusals()
            .iter()
            .zip(&before)
            .any(|(now, before)| now - before < 2 * AT_ONCE)
        {
            assert!(
                stopped.elapsed() < Duration::from_secs(30),
                "no 503 while the database was down:\n{}",
                lanes
                    .iter()
                    .map(|lane| lane.service.recent_output())
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let down_for = stopped.elapsed();
        let starting = Arc::clone(&cluster);
        tokio::task::spawn_blocking(move || starting.start_again())
            .await
            .unwrap();
        (down_at, down_for)
    };
    let (receipts, (down_at, down_for)) = tokio::join!(paying, outage);
    report(&format!(
        "payments faults, database restart: PostgreSQL stopped after {down_at} of {payouts} \
         payouts ({}) and started again {:.2} s later",
        lanes
            .iter()
            .map(|lane| format!("{} in the {:?} mode", lane.keys.len(), lane.mode))
            .collect::<Vec<_>>()
            .join(", "),
        down_for.as_secs_f64(),
    ));
    for (lane, receipts) in lanes.iter().zip(receipts) {
        check_after_restart(lane, receipts, &bank).await;
    }
}

/// The invariant of one mode's payouts after the restart.
async fn check_after_restart(lane: &Lane, receipts: Vec<Result<Receipt, PayError>>, bank: &Bank) {
    let Lane {
        mode,
        database,
        service,
        keys,
        clients,
    } = lane;
    let (mode, payouts) = (*mode, keys.len());
    let mut receipts_by_key = HashMap::new();
    for ((key, client), receipt) in keys.iter().zip(clients).zip(receipts) {
        let receipt = receipt.unwrap_or_else(|e| {
            panic!(
                "{mode:?} mode: payout {key} ended with {e}; answers {:?}:\n{}",
                client.answers(),
                service.recent_output()
            )
        });
        receipts_by_key.insert(key.as_str().to_owned(), receipt);
    }
    // Every 503 came with Retry-After: the client's #[retry] treats it as a passing failure.
    let answers: Vec<Answer> = clients.iter().flat_map(PayClient::answers).collect();
    let refused: Vec<&Answer> = answers
        .iter()
        .filter(|answer| matches!(answer, Answer::Status { status: 503, .. }))
        .collect();
    assert!(!refused.is_empty(), "{mode:?} mode: no 503");
    assert!(
        refused.iter().all(|answer| matches!(
            answer,
            Answer::Status {
                retry_after: true,
                ..
            }
        )),
        "{mode:?} mode: {refused:?}"
    );

    // Every payout is in the ledger exactly once, with the receipt its client got; the bank
    // transferred once per key and for no key outside the ledger.
    let rows = read_ledger(database).await.unwrap();
    let mut per_key: HashMap<&str, Vec<&LedgerRow>> = HashMap::new();
    for row in &rows {
        per_key.entry(row.entry.key.as_str()).or_default().push(row);
    }
    assert_eq!(rows.len(), payouts, "{mode:?} mode: one row per payout");
    for key in keys {
        let found = &per_key[key.as_str()];
        assert_eq!(found.len(), 1, "{mode:?} mode, {key}: {found:?}");
        assert_eq!(
            receipts_by_key[key.as_str()].receipt,
            format!("P-{}", found[0].id)
        );
    }
    if mode == Mode::Lease {
        let transfers: Vec<(String, u32)> = bank
            .executed()
            .into_iter()
            .filter(|(key, _)| keys.iter().any(|mine| mine.as_str() == key.as_str()))
            .collect();
        assert_eq!(transfers.len(), payouts);
        assert!(
            transfers
                .iter()
                .all(|(key, n)| *n == 1 && per_key.contains_key(key.as_str())),
            "a transfer without its ledger row, or two: {transfers:?}"
        );
    } else {
        assert!(
            keys.iter().all(|key| bank.requests(key.as_str()) == 0),
            "{mode:?} mode: no bank"
        );
    }
    // Every payout's e-mail job committed with it, and the service's worker sent each e-mail
    // once, the outage notwithstanding.
    let records = PayoutRecords::open(database).await.unwrap();
    for key in keys {
        mailed_once_in(
            &records,
            key,
            &format!("database restart, {mode:?} mode"),
            None,
        )
        .await;
    }
    records.close().await;
    let taken_over = rows.iter().filter(|row| row.entry.execution > 1).count();
    if mode == Mode::OneCommit {
        assert_eq!(
            taken_over, 0,
            "no lease: a claim cut by the outage rolled back"
        );
    }
    report(&format!(
        "payments faults, database restart, {mode:?} mode: {} answers were 503 with \
         Retry-After; all {payouts} payouts in the ledger once, {taken_over} of them executed \
         again after their lease (claimed before the outage, not committed), {}",
        refused.len(),
        match mode {
            Mode::Lease => "one bank transfer each",
            Mode::OneCommit => "no bank",
        },
    ));
}

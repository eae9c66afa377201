//! Fault tests of the durable queue, with real processes and real signals: the `claims-portal`
//! process is killed with `SIGKILL` at a step of its work and started again on the same
//! database, against a contract service (in this test's process) that keeps its answers by
//! idempotency key. After every run: the job is done, the service executed its check once, and
//! the customer got one e-mail. On SQLite and on PostgreSQL.
//!
//! The random runs draw their kill steps from a seed printed on stderr
//! (`QUEUE_FAULT_SEED=N` replays it).

use crate::common::{self, Database, Engine, Portal, Schedule, blocking};
use retry_durable::queue::{JobRecord, State};
use retry_examples::portal::coverage::ContractError;
use retry_examples::portal::later::{self, PortalDb, save_for_later};
use retry_examples::portal::{Claim, ContractService};
use retry_runtime::{GiveUp, GiveUpReason, IdempotencyKey};
use std::time::Duration;

/// Where a worker is killed in the middle of a job, and what the service sees then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The job is claimed; the service has not been called.
    Claimed,
    /// The service is executing the check (it holds the request until the worker is dead).
    InCall,
    /// The service answered; the outcome is not recorded.
    Answered,
    /// The job's completion and its e-mail are committed.
    Recorded,
}

const STEPS: [Step; 4] = [Step::Claimed, Step::InCall, Step::Answered, Step::Recorded];

impl Step {
    /// `claims-portal --pause-at` for this step (the service holds the call for `InCall`).
    fn pause_at(self) -> Option<&'static str> {
        match self {
            Step::Claimed => Some("claimed"),
            Step::InCall => None,
            Step::Answered => Some("answered"),
            Step::Recorded => Some("recorded"),
        }
    }

    /// Requests with the job's key that reach the service: a second one unless the first
    /// worker died before calling or after recording.
    fn requests(self) -> u32 {
        match self {
            Step::Claimed | Step::Recorded => 1,
            Step::InCall | Step::Answered => 2,
        }
    }

    /// Claims of the job: a second one unless it was done before the kill.
    fn attempts(self) -> u32 {
        if self == Step::Recorded { 1 } else { 2 }
    }
}

/// The lease of a worker that is killed: short, so that the next one takes its job over soon.
const KILLED: &str = "300";
/// The lease of a worker that runs to the end: long, so that a loaded machine cannot make its
/// own claim expire mid-job and let its second slot claim the job again (a third attempt).
const SURVIVES: &str = "30000";

/// A worker run on `database`, until the queue is empty, with a lease of `lease_ms`.
fn worker_args<'a>(
    database: &'a str,
    contract: &'a str,
    pause_at: Option<&'a str>,
    lease_ms: &'a str,
) -> Vec<&'a str> {
    let mut args = vec![
        "work",
        "--database",
        database,
        "--contract",
        contract,
        "--until-empty",
        "--lease-ms",
        lease_ms,
        "--poll-ms",
        "20",
        "--backoff-ms",
        "10",
        "--per-second",
        "1000",
        "--concurrency",
        "2",
    ];
    if let Some(step) = pause_at {
        args.extend(["--pause-at", step]);
    }
    args
}

/// One run: a saved claim's job, a worker killed at `step`, a second worker that finishes.
async fn kill_worker_at<B: PortalDb>(engine: Engine, test: &str, step: Step) -> Option<()> {
    let database = Database::fresh(engine, test).await?;
    let queue = database.queue::<B>().await;
    let service = ContractService::start().await.expect("the service starts");
    let contract = service.addr().to_string();
    let claim = Claim::new(4714, "dana@example.com");
    let key = IdempotencyKey::new();
    // What the portal's form did when the check was not possible: the claim saved, its job queued.
    let saved = save_for_later(&queue, &claim, &key, ContractError::Overloaded, gave_up()).await;
    assert!(
        matches!(saved, Err(ContractError::Deferred { .. })),
        "{saved:?}"
    );

    if step == Step::InCall {
        service.hold_next_check().await;
    }
    let first = Portal::start(
        &format!("{test}: first worker"),
        &worker_args(&database.url, &contract, step.pause_at(), KILLED),
    );
    let first = match step.pause_at() {
        Some(at) => {
            let prefix = format!("paused at {at}");
            blocking(move || {
                first.wait_for_line(&prefix);
                first
            })
            .await
        }
        None => {
            tokio::time::timeout(common::PATIENCE, service.held_check_started())
                .await
                .unwrap_or_else(|_| panic!("{test}: the check never reached the service"));
            first
        }
    };
    blocking(move || first.kill()).await;
    if step == Step::InCall {
        // The service finishes the check it was executing and answers a dead connection.
        service.release();
    }

    let second = Portal::start(
        &format!("{test}: second worker"),
        &worker_args(&database.url, &contract, None, SURVIVES),
    );
    let output = blocking(move || second.wait_success()).await;

    let jobs = queue.jobs().await.expect("the jobs");
    let job = only_job(&jobs, test, &output);
    assert_eq!(job.state, State::Done, "{test}: {job:?}\n{output}");
    assert_eq!(
        job.key,
        key.as_str(),
        "{test}: the job keeps the claim's key"
    );
    assert_eq!(job.attempts, step.attempts(), "{test}: {job:?}");
    assert_eq!(
        service.executions(key.as_str()).await,
        1,
        "{test}: the check ran twice"
    );
    assert_eq!(
        service.requests(key.as_str()).await,
        step.requests(),
        "{test}"
    );
    let emails = later::outbox(&queue).await.expect("the outbox");
    assert_eq!(emails.len(), 1, "{test}: one e-mail, not {emails:?}");
    assert_eq!(
        emails[0].message,
        "Claim 4714 is covered; we will arrange the payout."
    );
    Some(())
}

/// What the form's loop passes to its fallback after four overloaded calls.
fn gave_up() -> GiveUp {
    GiveUp::new(
        "check_coverage",
        GiveUpReason::Exhausted,
        4,
        Duration::from_secs(7),
    )
}

fn only_job<'a>(jobs: &'a [JobRecord], test: &str, output: &str) -> &'a JobRecord {
    assert_eq!(jobs.len(), 1, "{test}: {jobs:?}\n{output}");
    &jobs[0]
}

async fn worker_killed_at_each_step<B: PortalDb>(engine: Engine) {
    for step in STEPS {
        let test = format!("worker_killed_{step:?}_{engine:?}");
        if kill_worker_at::<B>(engine, &test, step).await.is_none() {
            return;
        }
    }
}

async fn worker_killed_at_random_steps<B: PortalDb>(engine: Engine) {
    let mut schedule = Schedule::from_env(&format!("worker_killed_at_random_steps_{engine:?}"));
    for run in 0..6 {
        let step = STEPS[schedule.below(STEPS.len() as u64) as usize];
        let test = format!("worker_killed_at_random_{engine:?}_{run}_{step:?}");
        if kill_worker_at::<B>(engine, &test, step).await.is_none() {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_in_the_middle_of_a_job_leaves_it_to_the_next_sqlite() {
    worker_killed_at_each_step::<sqlx::Sqlite>(Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_in_the_middle_of_a_job_leaves_it_to_the_next_postgres() {
    worker_killed_at_each_step::<sqlx::Postgres>(Engine::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_at_random_steps_lose_nothing_and_repeat_nothing_sqlite() {
    worker_killed_at_random_steps::<sqlx::Sqlite>(Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_at_random_steps_lose_nothing_and_repeat_nothing_postgres() {
    worker_killed_at_random_steps::<sqlx::Postgres>(Engine::Postgres).await;
}

/// Two workers drain twelve jobs; one is killed at a moment drawn from the seed; the other
/// takes its jobs over after their leases. Every job is done once, every check executed once,
/// every customer e-mailed once.
async fn one_of_two_workers_killed<B: PortalDb>(engine: Engine) -> Option<()> {
    let test = format!("one_of_two_workers_killed_{engine:?}");
    let mut schedule = Schedule::from_env(&test);
    let database = Database::fresh(engine, &test).await?;
    let queue = database.queue::<B>().await;
    let service = ContractService::start().await.expect("the service starts");
    let contract = service.addr().to_string();
    let mut keys = Vec::new();
    for claim in 4714..4726 {
        let key = IdempotencyKey::new();
        let claim = Claim::new(claim, &format!("customer-{claim}@example.com"));
        let saved =
            save_for_later(&queue, &claim, &key, ContractError::Overloaded, gave_up()).await;
        assert!(
            matches!(saved, Err(ContractError::Deferred { .. })),
            "{saved:?}"
        );
        keys.push(key);
    }
    // Each at most 20 claims a second, so that the kill lands while both are busy.
    let slow = |lease_ms| {
        let mut args = worker_args(&database.url, &contract, None, lease_ms);
        if let Some(rate) = args.iter().position(|arg| *arg == "--per-second") {
            args[rate + 1] = "20";
        }
        args
    };
    let doomed = Portal::start(&format!("{test}: worker A"), &slow(KILLED));
    let survivor = Portal::start(&format!("{test}: worker B"), &slow(SURVIVES));
    let kill_after = Duration::from_millis(50 + schedule.below(250));
    tokio::time::sleep(kill_after).await;
    blocking(move || doomed.kill()).await;
    let output = blocking(move || survivor.wait_success()).await;

    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!(jobs.len(), 12, "{test}: {jobs:?}");
    assert!(
        jobs.iter().all(|job| job.state == State::Done),
        "{test}, killed after {kill_after:?}: {jobs:?}\n{output}"
    );
    for key in &keys {
        assert_eq!(
            service.executions(key.as_str()).await,
            1,
            "{test}: key {key}"
        );
    }
    let emails = later::outbox(&queue).await.expect("the outbox");
    assert_eq!(emails.len(), 12, "{test}: {emails:?}");
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_workers_killed_at_random_loses_nothing_sqlite() {
    one_of_two_workers_killed::<sqlx::Sqlite>(Engine::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_workers_killed_at_random_loses_nothing_postgres() {
    one_of_two_workers_killed::<sqlx::Postgres>(Engine::Postgres).await;
}

/// The portal is killed after it saved a claim and queued its check (`saved`), or in the
/// middle of the transaction that does both (`saving`). After a restart, the saved job is still
/// there and is done; the unsaved one left no trace, and its customer was never told
/// "saved".
async fn portal_killed<B: PortalDb>(engine: Engine, pause_at: &str) -> Option<()> {
    let test = format!("portal_killed_at_{pause_at}_{engine:?}");
    let database = Database::fresh(engine, &test).await?;
    let queue = database.queue::<B>().await;
    let service = ContractService::start().await.expect("the service starts");
    service.overload_next_checks(u32::MAX).await;
    let contract = service.addr().to_string();
    // Five customers, 20 ms apart: the fifth call fails too and opens the breaker, which ends
    // that customer's loop at once, so claim 4720 is saved first (the others would be saved
    // when the breaker refuses their retry, after their pause of at least 1 s).
    let portal = Portal::start(
        &format!("{test}: portal"),
        &[
            "report",
            "--database",
            &database.url,
            "--contract",
            &contract,
            "--pause-at",
            pause_at,
            "4714:dana@example.com",
            "4715:emil@example.com",
            "4716:fatma@example.com",
            "4718:hanna@example.com",
            "4720:jana@example.com",
        ],
    );
    let prefix = format!("paused at {pause_at}: claim 4720");
    let (portal, paused) = blocking(move || {
        let line = portal.wait_for_line(&prefix);
        (portal, line)
    })
    .await;
    let output = portal.output();
    blocking(move || portal.kill()).await;
    assert!(
        !output.contains("told: "),
        "{test}: nobody was answered yet:\n{output}"
    );
    let key = paused
        .rsplit_once("key ")
        .map(|(_, key)| key.to_owned())
        .unwrap_or_else(|| panic!("{test}: a key in {paused:?}"));

    let jobs = queue.jobs().await.expect("the jobs");
    let claims = later::saved_claims(&queue).await.expect("the saved claims");
    if pause_at == "saving" {
        assert!(
            jobs.is_empty() && claims.is_empty(),
            "{test}: {jobs:?} {claims:?}"
        );
    } else {
        let job = only_job(&jobs, &test, &output);
        assert_eq!((job.state, job.attempts), (State::Available, 0), "{test}");
        assert_eq!(job.key, key);
        assert_eq!(claims.len(), 1, "{test}: {claims:?}");
    }

    service.overload_next_checks(0).await;
    let restarted = Portal::start(
        &format!("{test}: restarted portal"),
        &worker_args(&database.url, &contract, None, SURVIVES),
    );
    let output = blocking(move || restarted.wait_success()).await;
    let jobs = queue.jobs().await.expect("the jobs");
    let emails = later::outbox(&queue).await.expect("the outbox");
    if pause_at == "saving" {
        assert!(
            jobs.is_empty() && emails.is_empty(),
            "{test}: {jobs:?}\n{output}"
        );
        assert_eq!(service.total_executions().await, 0);
    } else {
        let job = only_job(&jobs, &test, &output);
        assert_eq!(
            (job.state, job.attempts),
            (State::Done, 1),
            "{test}: {job:?}"
        );
        assert_eq!(service.executions(&key).await, 1, "{test}");
        assert_eq!(service.total_executions().await, 1, "{test}");
        assert_eq!(emails.len(), 1, "{test}: {emails:?}");
        assert_eq!(emails[0].to, "jana@example.com");
    }
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_portal_killed_after_saving_finds_the_job_after_a_restart_sqlite() {
    if portal_killed::<sqlx::Sqlite>(Engine::Sqlite, "saved")
        .await
        .is_some()
    {
        portal_killed::<sqlx::Sqlite>(Engine::Sqlite, "saving").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_portal_killed_after_saving_finds_the_job_after_a_restart_postgres() {
    if portal_killed::<sqlx::Postgres>(Engine::Postgres, "saved")
        .await
        .is_some()
    {
        portal_killed::<sqlx::Postgres>(Engine::Postgres, "saving").await;
    }
}

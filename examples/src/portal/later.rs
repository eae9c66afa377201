//! What happens when the check cannot be made now: the claim is saved, a coverage-check job is
//! queued under the claim's idempotency key, and a worker makes the check when the contract
//! service is back and e-mails the result.

use super::coverage::{ContractError, Coverage, check_coverage};
use super::{Claim, ClaimId, ContractClient};
use crate::crash;
use retry_durable::queue::{Job, JobId, Outcome, Queue, QueueError, Tx};
use retry_durable::store::{Backend, BoxFuture};
use retry_runtime::IdempotencyKey;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The name of the queue of coverage checks.
pub const QUEUE: &str = "coverage-checks";

/// What a coverage-check job carries; its idempotency key is the job's key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoverageJob {
    /// The claim, as the customer reported it.
    pub claim: Claim,
}

macro_rules! portal_tables {
    () => {
        "CREATE TABLE IF NOT EXISTS portal_claims (
            key   TEXT   PRIMARY KEY,
            claim BIGINT NOT NULL,
            email TEXT   NOT NULL
        );
        CREATE TABLE IF NOT EXISTS portal_outbox (
            key     TEXT   PRIMARY KEY,
            claim   BIGINT NOT NULL,
            email   TEXT   NOT NULL,
            message TEXT   NOT NULL
        );"
    };
}

/// An e-mail's row: key, claim, address, message.
pub type EmailRow = (String, i64, String, String);

/// The portal's own tables, next to the queue's on either engine (the portal chooses one at
/// run time, from its `--database`): each statement once, on the queue's typed pool and
/// transactions, so that a saved claim and its job, or an e-mail and its job's completion,
/// commit together.
pub trait PortalDb: Backend {
    /// Creates the tables if they are missing, under the engine's migration lock.
    fn migrate(pool: &sqlx::Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>>;

    /// Saves `claim` under `key` in `tx` (nothing if the key is saved already).
    fn save_claim<'a>(
        tx: &'a mut Tx<Self>,
        key: &'a str,
        claim: &'a Claim,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>>;

    /// Writes the e-mail `message` about `claim` under `key` in `tx`.
    fn write_email<'a>(
        tx: &'a mut Tx<Self>,
        key: &'a str,
        claim: &'a Claim,
        message: &'a str,
    ) -> BoxFuture<'a, Result<(), sqlx::Error>>;

    /// The e-mails of the checks whose keys are in `queue`, oldest job first: key, claim,
    /// address, message.
    fn emails<'a>(
        pool: &'a sqlx::Pool<Self>,
        queue: &'a str,
    ) -> BoxFuture<'a, Result<Vec<EmailRow>, sqlx::Error>>;

    /// The claims saved with keys in `queue`, oldest job first: key, claim.
    fn claims<'a>(
        pool: &'a sqlx::Pool<Self>,
        queue: &'a str,
    ) -> BoxFuture<'a, Result<Vec<(String, i64)>, sqlx::Error>>;
}

const SAVE_CLAIM: &str = "INSERT INTO portal_claims (key, claim, email) VALUES ($1, $2, $3) \
                          ON CONFLICT (key) DO NOTHING";
const WRITE_EMAIL: &str =
    "INSERT INTO portal_outbox (key, claim, email, message) VALUES ($1, $2, $3, $4)";
const EMAILS: &str = "SELECT o.key, o.claim, o.email, o.message FROM portal_outbox o \
                      JOIN retry_jobs j ON j.key = o.key AND j.queue = $1 ORDER BY j.id";
const CLAIMS: &str = "SELECT c.key, c.claim FROM portal_claims c \
                      JOIN retry_jobs j ON j.key = c.key AND j.queue = $1 ORDER BY j.id";

macro_rules! portal_db {
    ($($db:ty => $migration:expr),* $(,)?) => {$(
        impl PortalDb for $db {
            fn migrate(pool: &sqlx::Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>> {
                Box::pin(async move { sqlx::raw_sql($migration).execute(pool).await.map(drop) })
            }

            fn save_claim<'a>(
                tx: &'a mut Tx<Self>,
                key: &'a str,
                claim: &'a Claim,
            ) -> BoxFuture<'a, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query(SAVE_CLAIM)
                        .bind(key)
                        .bind(i64::from(claim.id.0))
                        .bind(&claim.email)
                        .execute(&mut **tx)
                        .await
                        .map(drop)
                })
            }

            fn write_email<'a>(
                tx: &'a mut Tx<Self>,
                key: &'a str,
                claim: &'a Claim,
                message: &'a str,
            ) -> BoxFuture<'a, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query(WRITE_EMAIL)
                        .bind(key)
                        .bind(i64::from(claim.id.0))
                        .bind(&claim.email)
                        .bind(message)
                        .execute(&mut **tx)
                        .await
                        .map(drop)
                })
            }

            fn emails<'a>(
                pool: &'a sqlx::Pool<Self>,
                queue: &'a str,
            ) -> BoxFuture<'a, Result<Vec<EmailRow>, sqlx::Error>> {
                Box::pin(sqlx::query_as(EMAILS).bind(queue).fetch_all(pool))
            }

            fn claims<'a>(
                pool: &'a sqlx::Pool<Self>,
                queue: &'a str,
            ) -> BoxFuture<'a, Result<Vec<(String, i64)>, sqlx::Error>> {
                Box::pin(sqlx::query_as(CLAIMS).bind(queue).fetch_all(pool))
            }
        }
    )*};
}

portal_db!(
    sqlx::Sqlite => concat!("BEGIN IMMEDIATE;", portal_tables!(), "COMMIT;"),
    sqlx::Postgres => concat!("SELECT pg_advisory_xact_lock(7412);", portal_tables!()),
);

/// Creates the portal's own tables next to the queue's, if they are missing: the claims saved
/// for later, and the e-mails with results, each keyed by the check's idempotency key so that a
/// repeat adds nothing.
pub async fn migrate<B: PortalDb>(queue: &Queue<B>) -> Result<(), QueueError> {
    B::migrate(queue.pool()).await?;
    Ok(())
}

/// The fallback of [`check_coverage`] (`fallback = |error, why| save_for_later(queue, claim,
/// key, error, why)`), called when its loop gave up: saves the claim and queues its check under
/// `key`, in one transaction, and returns what the customer is told, [`ContractError::Deferred`]
/// with `why` and the last error.
///
/// Both rows are keyed by `key`, so calling it again for the same check (a second click, or
/// the worker whose own attempt gave up) adds nothing and names the same job. If the database
/// cannot save them, the customer is told the truth: the original error, nothing saved.
pub async fn save_for_later<B: PortalDb>(
    queue: &Queue<B>,
    claim: &Claim,
    key: &IdempotencyKey,
    error: ContractError,
    why: retry_runtime::GiveUp,
) -> Result<Coverage, ContractError> {
    match save(queue, claim, key).await {
        Ok(job) => Err(ContractError::Deferred {
            job,
            why,
            cause: Box::new(error),
        }),
        Err(e) => {
            eprintln!("    [portal] cannot save claim {}: {e}", claim.id);
            Err(error)
        }
    }
}

async fn save<B: PortalDb>(
    queue: &Queue<B>,
    claim: &Claim,
    key: &IdempotencyKey,
) -> Result<JobId, QueueError> {
    // The claim and its job in one transaction on the queue's pool: both or neither.
    let mut tx = queue.begin().await?;
    B::save_claim(&mut tx, key.as_str(), claim).await?;
    let job = CoverageJob {
        claim: claim.clone(),
    };
    let enqueued = queue.enqueue_in(&mut tx, key.as_str(), &job).await?;
    let what = format!("claim {} as job {}, key {key}", claim.id, enqueued.job);
    crash::point("saving", &what).await;
    tx.commit().await?;
    crash::point("saved", &what).await;
    Ok(enqueued.job)
}

/// The worker's handler of a coverage-check job: asks the same way the form does
/// ([`check_coverage`], with the job's key), and decides from the answer.
///
/// - An answer: the e-mail with the result is written in a transaction that the worker commits
///   together with the job's completion, so it is sent once however often the job runs.
/// - The breaker refused the call (the service was not asked): snooze until it lets calls
///   through again; the attempt does not count.
/// - The loop gave up on a passing failure: retry with the worker's backoff, dead after the
///   job's last attempt.
/// - A permanent error (no such claim): dead at once, with the error.
pub async fn check_later<B: PortalDb>(
    client: ContractClient,
    queue: Queue<B>,
    job: Job<CoverageJob>,
) -> Outcome<Coverage, B> {
    let key = IdempotencyKey::from(job.key.as_str());
    let claim = job.payload.claim;
    let what = format!(
        "job {}, claim {}, attempt {}",
        job.id, claim.id, job.attempt
    );
    crash::point("claimed", &what).await;
    let answer = check_coverage(&client, &queue, &claim, &key).await;
    crash::point("answered", &what).await;
    let outcome = match answer {
        Ok(coverage) => match write_email(&queue, &claim, &key, coverage).await {
            Ok(tx) => Outcome::DoneIn(tx, coverage),
            Err(e) => Outcome::RetryLater(format!("the e-mail cannot be written: {e}")),
        },
        // The fallback found the job saved already (its key): only this attempt failed.
        Err(ContractError::Deferred { cause, .. }) => match *cause {
            ContractError::Refused(open) => Outcome::Snooze {
                pause: open.remaining().unwrap_or(Duration::from_secs(1)),
                reason: open.to_string(),
            },
            cause => Outcome::RetryLater(cause.to_string()),
        },
        // The breaker's refusal or a passing failure that could not be saved again: the claim
        // is saved already, so only the attempt failed.
        Err(error) if error.may_pass() => Outcome::RetryLater(error.to_string()),
        Err(permanent) => Outcome::Dead(permanent.to_string()),
    };
    let verdict = match &outcome {
        Outcome::Done(coverage) | Outcome::DoneIn(_, coverage) => {
            format!("{coverage}; the e-mail goes out with the job's completion")
        }
        Outcome::RetryLater(error) => format!("{error}; again after a backoff"),
        Outcome::Snooze { reason, .. } => format!("{reason}; the attempt does not count"),
        Outcome::Dead(error) => format!("{error}; dead letter"),
    };
    println!("    worker: {what}: {verdict}");
    outcome
}

/// The e-mail to the customer, as a row written in a transaction that the caller commits.
async fn write_email<B: PortalDb>(
    queue: &Queue<B>,
    claim: &Claim,
    key: &IdempotencyKey,
    coverage: Coverage,
) -> Result<Tx<B>, QueueError> {
    let message = match coverage {
        Coverage::Covered => format!("Claim {} is covered; we will arrange the payout.", claim.id),
        Coverage::NotCovered => format!("Claim {} is not covered by your policy.", claim.id),
    };
    let mut tx = queue.begin().await?;
    B::write_email(&mut tx, key.as_str(), claim, &message).await?;
    Ok(tx)
}

/// An e-mail in the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Email {
    /// The key of the check it reports.
    pub key: String,
    /// The claim.
    pub claim: ClaimId,
    /// To whom.
    pub to: String,
    /// What it says.
    pub message: String,
}

/// The e-mails of the checks whose keys are in `queue`, oldest job first.
pub async fn outbox<B: PortalDb>(queue: &Queue<B>) -> Result<Vec<Email>, QueueError> {
    let rows = B::emails(queue.pool(), queue.name()).await?;
    Ok(rows
        .into_iter()
        .map(|(key, claim, to, message)| Email {
            key,
            claim: ClaimId(u32::try_from(claim).unwrap_or(0)),
            to,
            message,
        })
        .collect())
}

/// The claims saved for later with keys in `queue`, by key.
pub async fn saved_claims<B: PortalDb>(
    queue: &Queue<B>,
) -> Result<Vec<(String, ClaimId)>, QueueError> {
    let rows = B::claims(queue.pool(), queue.name()).await?;
    Ok(rows
        .into_iter()
        .map(|(key, claim)| (key, ClaimId(u32::try_from(claim).unwrap_or(0))))
        .collect())
}

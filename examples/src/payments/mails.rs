//! The receipt e-mails: a job per payout in the `receipt-mails` queue (`retry_durable::queue`),
//! enqueued in the transaction that writes the ledger row and completes the payout's key, so
//! that the e-mail's job exists if and only if the payout committed; and the worker that sends
//! them, whose "mail server" is a table (`sent_mails`) written in the transaction that completes
//! the job: each e-mail is sent once, however often its job runs.

use super::Receipt;
use super::service::{Database, LedgerTransaction};
use retry_durable::queue::{Drained, Job, Outcome, Queue, QueueError, Worker};
use retry_durable::store::Backend;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The name of the queue of receipt e-mails.
pub const QUEUE: &str = "receipt-mails";

/// What a receipt e-mail's job carries; its key is the payout's idempotency key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptMail {
    /// The receipt the e-mail confirms.
    pub receipt: String,
    /// The body's one line.
    pub text: String,
}

impl ReceiptMail {
    /// The e-mail that confirms `receipt`.
    pub fn of(receipt: &Receipt) -> Self {
        ReceiptMail {
            receipt: receipt.receipt.clone(),
            text: format!(
                "Claim {}: {} paid, {receipt}.",
                receipt.claim, receipt.cents
            ),
        }
    }
}

/// Sends the queued e-mails: each in the transaction that completes its job (the mail server's
/// table and the job's state commit together). Until the queue is empty with `until_empty`, or
/// for ever. `lease` is the jobs' lease (the service's, so that a killed worker's job comes back
/// as soon as a payout's key would).
pub async fn send<B: Backend>(
    mails: &Queue<B>,
    lease: Duration,
    until_empty: bool,
) -> Result<Drained, QueueError>
where
    sqlx::Transaction<'static, B>: LedgerTransaction,
{
    let mut worker = Worker::new("mail-sender")
        .concurrency(4)
        .per_second(f64::INFINITY)
        .lease(lease)
        .poll(Duration::from_millis(100));
    if until_empty {
        worker = worker.until_empty();
    }
    let queue = mails.clone();
    worker
        .run(mails, move |job: Job<ReceiptMail>| {
            let queue = queue.clone();
            async move {
                let mut tx = match queue.begin().await {
                    Ok(tx) => tx,
                    Err(e) => return Outcome::RetryLater(e.to_string()),
                };
                match tx.record_mail(&job.key, &job.payload).await {
                    Ok(()) => Outcome::DoneIn(tx, job.payload.receipt),
                    Err(e) => Outcome::RetryLater(e.to_string()),
                }
            }
        })
        .await
}

/// Sends every e-mail queued in `database` and returns once none is waiting or running: the
/// worker of [`send`] with `until_empty`, on a pool of its own (for a test, or a one-off run).
pub async fn send_all(database: &Database, lease: Duration) -> Result<Drained, QueueError> {
    match database {
        Database::Sqlite(path) => {
            let location = format!("sqlite:{}", path.display());
            let mails = Queue::<sqlx::Sqlite>::open(&location, QUEUE).await?;
            let drained = send(&mails, lease, true).await;
            mails.pool().close().await;
            drained
        }
        Database::Postgres(url) => {
            let mails = Queue::<sqlx::Postgres>::open(url, QUEUE).await?;
            let drained = send(&mails, lease, true).await;
            mails.pool().close().await;
            drained
        }
    }
}

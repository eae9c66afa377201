//! How full a queue is ([`Queue::observe`]), and the queue's instruments (feature `metrics`):
//! its depth and the age of its oldest due job as gauges, the attempts the worker recorded and
//! the jobs that went dead as counters. The table is `docs/metrics.md`.
//!
//! The only label is the queue's name, which the application chooses: never a job's key, payload
//! or error.

use super::sql::RunQueue;
use super::{Queue, QueueError, RunOn};
use crate::sql::Backend;
use std::time::Duration;

/// How many jobs wait in a queue and for how long: what [`Queue::observe`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Jobs waiting to be claimed: available now, or at their `run_at` (after a backoff or a
    /// snooze). Not counted: running, done and dead jobs.
    pub depth: u64,
    /// How long the oldest due job has waited past its `run_at`; zero when no job is due. A
    /// number that grows while the queue drains means the workers do not keep up.
    pub oldest_due_age: Duration,
}

impl<B: Backend> Queue<B> {
    /// How many jobs wait and how long the oldest due one has waited, in one statement. With
    /// the feature `metrics` it sets the gauges `retry_queue_depth` and
    /// `retry_queue_oldest_due_age_seconds` too.
    ///
    /// A [`Worker`](super::Worker) calls it (with the feature) at most once per poll interval
    /// and whenever it finds nothing to claim. While no worker runs (the breaker is open, or the
    /// workers are elsewhere), call it where the metrics are read, such as the `/metrics`
    /// handler before rendering, so that the gauges are those of the moment of the scrape.
    ///
    /// # Errors
    ///
    /// [`QueueError::Database`] if the statement failed; the gauges keep their last values.
    pub async fn observe(&self) -> Result<QueueStats, QueueError> {
        let (depth, earliest) =
            RunOn::<B>::numbers(&self.pool, &self.sql().observe, &self.name).await?;
        let depth = depth.unwrap_or(0);
        let overdue = earliest.map_or(0, |gap| gap.saturating_neg().max(0));
        let stats = QueueStats {
            depth: u64::try_from(depth).unwrap_or(0),
            oldest_due_age: Duration::from_millis(u64::try_from(overdue).unwrap_or(0)),
        };
        #[cfg(feature = "metrics")]
        {
            let queue = self.name.to_string();
            metrics::gauge!(DEPTH, "queue" => queue.clone()).set(stats.depth as f64);
            metrics::gauge!(OLDEST_DUE_AGE, "queue" => queue)
                .set(stats.oldest_due_age.as_secs_f64());
        }
        Ok(stats)
    }
}

/// `retry_queue_depth{queue}`.
#[cfg(feature = "metrics")]
const DEPTH: &str = "retry_queue_depth";
/// `retry_queue_oldest_due_age_seconds{queue}`.
#[cfg(feature = "metrics")]
const OLDEST_DUE_AGE: &str = "retry_queue_oldest_due_age_seconds";
/// `retry_queue_attempts_total{queue, outcome}`.
#[cfg(feature = "metrics")]
const ATTEMPTS: &str = "retry_queue_attempts_total";
/// `retry_queue_dead_letters_total{queue}`.
#[cfg(feature = "metrics")]
const DEAD_LETTERS: &str = "retry_queue_dead_letters_total";

/// What the worker recorded for one attempt, as the `outcome` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Attempt {
    /// `done`: the job is done.
    Done,
    /// `retry`: failed, available again after the backoff.
    Retry,
    /// `dead`: failed for good, or its last attempt failed. A dead letter too.
    Dead,
}

/// Counts an attempt of a job of `queue` whose outcome the worker wrote.
pub(super) fn attempt(queue: &str, attempt: Attempt) {
    #[cfg(feature = "metrics")]
    {
        let outcome = match attempt {
            Attempt::Done => "done",
            Attempt::Retry => "retry",
            Attempt::Dead => "dead",
        };
        metrics::counter!(ATTEMPTS, "queue" => queue.to_owned(), "outcome" => outcome).increment(1);
        if attempt == Attempt::Dead {
            dead_letters(queue, 1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, attempt);
}

/// Counts `jobs` of `queue` that went dead without an attempt's outcome: buried after their
/// last lease ended, or dead on arrival (a payload the worker cannot read).
pub(super) fn dead_letters(queue: &str, jobs: u64) {
    #[cfg(feature = "metrics")]
    if jobs > 0 {
        metrics::counter!(DEAD_LETTERS, "queue" => queue.to_owned()).increment(jobs);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (queue, jobs);
}

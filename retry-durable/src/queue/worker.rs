//! The worker: claims due jobs and runs a handler on each, at a bounded rate, with the same
//! circuit breaker as the calls the jobs make.

use super::metrics::{self, Attempt};
use super::{Claim, Claimed, Job, JobId, Queue, QueueError, Retried};
use crate::sql::Backend;
use retry_runtime::{BreakerState, CircuitBreaker, Policy, Transient};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

/// What a handler decided about its job. The worker carries it out under the job's claim, so
/// that a worker whose job was taken over changes nothing. `B` is the queue's engine (the
/// transaction of [`DoneIn`](Outcome::DoneIn) is on it).
#[derive(Debug)]
pub enum Outcome<R, B: sqlx::Database> {
    /// Done, with this result.
    Done(R),
    /// Done, with this result, committed in this transaction together with the handler's own
    /// rows (the e-mail with the result): both or neither.
    DoneIn(sqlx::Transaction<'static, B>, R),
    /// The attempt failed with this error and another may succeed: available again after the
    /// worker's backoff for this attempt, or dead if it was the last.
    RetryLater(String),
    /// Not now, for a reason that is not the job's (the circuit breaker refused the call, so
    /// the service was never asked): available again after `pause`, the attempt not counted.
    Snooze {
        /// How long to wait.
        pause: Duration,
        /// Why, kept as the job's last error.
        reason: String,
    },
    /// A permanent failure: dead, with this error, for a person to look at.
    Dead(String),
}

/// How a [`Worker::run`] ended: its jobs by what became of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Completed.
    pub done: u32,
    /// Failed and put back with a backoff.
    pub retried: u32,
    /// Put back without counting the attempt.
    pub snoozed: u32,
    /// Dead: a permanent failure, the last attempt failed, or a payload this worker cannot read.
    pub dead: u32,
    /// Taken over by another worker after this one's lease ended: the outcome was discarded.
    pub lost: u32,
    /// The outcome could not be written (the database failed): the lease returns the job.
    pub unrecorded: u32,
}

/// Claims due jobs from a [`Queue`] and runs a handler on each.
///
/// - **Concurrency**: at most [`concurrency`](Worker::concurrency) jobs at a time.
/// - **Pace**: at most [`per_second`](Worker::per_second) claims a second, so that a long queue
///   drains as a steady stream, not a burst, into a service that has just recovered.
/// - **The breaker**: with [`breaker`](Worker::breaker), the same [`CircuitBreaker`] as the
///   calls the jobs make. While it is open the worker claims nothing (a refused call would only
///   cost the job an attempt); while it is half-open it lets one job run alone, whose call is the
///   trial; once it is closed it drains.
/// - **Leases**: each job is claimed for [`lease`](Worker::lease), renewed every third of it
///   while the handler runs. A worker that dies stops renewing, and the job is claimed again
///   after its lease; a worker whose renewal finds the job taken over drops the handler.
/// - **Backoff**: a failed attempt ([`Outcome::RetryLater`]) comes back after
///   [`backoff`](Worker::backoff)`.delay(attempt)`, stored as the job's `run_at`, so it
///   survives a restart.
#[derive(Clone, Debug)]
pub struct Worker {
    name: String,
    concurrency: usize,
    per_second: f64,
    lease: Duration,
    poll: Duration,
    backoff: Policy,
    breaker: Option<&'static CircuitBreaker>,
    until_empty: bool,
    on_recorded: Option<fn(JobId)>,
}

impl Worker {
    /// A worker named `name` (kept on the jobs it claims), with 2 jobs at a time, 10 claims a
    /// second, a lease of 30 s, a poll every second when idle, a backoff of 1 s doubling to at
    /// most 5 min with the default jitter, no breaker, and no end.
    pub fn new(name: &str) -> Self {
        Worker {
            name: name.to_owned(),
            concurrency: 2,
            per_second: 10.0,
            lease: Duration::from_secs(30),
            poll: Duration::from_secs(1),
            backoff: Policy::new()
                .base(Duration::from_secs(1))
                .max_delay(Duration::from_secs(300)),
            breaker: None,
            until_empty: false,
            on_recorded: None,
        }
    }

    /// At most `jobs` at a time (at least 1).
    pub fn concurrency(mut self, jobs: usize) -> Self {
        self.concurrency = jobs.max(1);
        self
    }

    /// At most `claims` a second (`f64::INFINITY` for no limit).
    pub fn per_second(mut self, claims: f64) -> Self {
        self.per_second = claims;
        self
    }

    /// How long a claimed job is held before another worker may take it over (renewed every
    /// third of it while the handler runs).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(3));
        self
    }

    /// How often an idle worker looks for jobs that were added (it also wakes when the next
    /// known job is due).
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// The pause before a failed job's next attempt: `policy.delay(attempt)` (its `max` is not
    /// used: the job's `max_attempts` is).
    pub fn backoff(mut self, policy: Policy) -> Self {
        self.backoff = policy;
        self
    }

    /// The breaker the jobs' calls go through; the worker claims nothing while it is open.
    pub fn breaker(mut self, breaker: &'static CircuitBreaker) -> Self {
        self.breaker = Some(breaker);
        self
    }

    /// Return once the queue has no available or running job left (every job is done or dead),
    /// instead of waiting for more.
    pub fn until_empty(mut self) -> Self {
        self.until_empty = true;
        self
    }

    /// Calls `hook` with a job's id each time this worker has written what became of the job
    /// (done, retried, snoozed or dead; or failed to write it), before it counts the job and
    /// moves on. Not called for a job that was taken over while its handler ran.
    ///
    /// For fault tests and tracing: a process that is killed in `hook` has recorded the job's
    /// outcome and nothing after it, so the test can check that the outcome stands.
    pub fn on_recorded(mut self, hook: fn(JobId)) -> Self {
        self.on_recorded = Some(hook);
        self
    }

    /// Runs `handler` on the queue's due jobs until the queue is empty (with
    /// [`until_empty`](Worker::until_empty)) or for ever.
    ///
    /// # Errors
    ///
    /// A database error that is not transient; transient ones are waited out.
    pub async fn run<B, P, R, F, Fut>(
        &self,
        queue: &Queue<B>,
        handler: F,
    ) -> Result<Drained, QueueError>
    where
        B: Backend,
        P: DeserializeOwned + Send + 'static,
        R: Serialize + Send + Sync + 'static,
        F: Fn(Job<P>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome<R, B>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let mut in_flight: JoinSet<Finished> = JoinSet::new();
        let mut drained = Drained::default();
        let mut pace = (self.per_second.is_finite() && self.per_second > 0.0).then(|| {
            let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / self.per_second));
            pace.set_missed_tick_behavior(MissedTickBehavior::Delay);
            pace
        });
        // The gauges of the queue's depth and oldest due job: at most once per poll interval,
        // and whenever nothing is due.
        #[cfg(feature = "metrics")]
        let mut observed: Option<Instant> = None;
        loop {
            #[cfg(feature = "metrics")]
            if observed.is_none_or(|at| at.elapsed() >= self.poll) {
                observe(queue).await;
                observed = Some(Instant::now());
            }
            while let Some(finished) = in_flight.try_join_next() {
                drained.count(finished);
            }
            if in_flight.len() >= self.concurrency {
                wait_for_one(&mut in_flight, &mut drained).await;
                continue;
            }
            if let Some(wait) = self.breaker_says_wait(in_flight.is_empty()) {
                wait_or_one_finishes(wait, &mut in_flight, &mut drained).await;
                continue;
            }
            if let Some(pace) = &mut pace {
                pace.tick().await;
            }
            match queue.claim::<P>(&self.name, self.lease).await {
                Ok(Some(claimed)) => {
                    let handler = Arc::clone(&handler);
                    in_flight.spawn(self.run_one(claimed, move |job| (*handler)(job)));
                }
                Ok(None) => {
                    let buried = count(queue.bury_abandoned().await);
                    metrics::dead_letters(queue.name(), u64::from(buried));
                    drained.dead += buried;
                    #[cfg(feature = "metrics")]
                    {
                        observe(queue).await;
                        observed = Some(Instant::now());
                    }
                    let next = match queue.next_due().await {
                        Ok(next) => next,
                        Err(e) if e.is_transient() => Some(self.poll),
                        Err(e) => return Err(e),
                    };
                    if self.until_empty && next.is_none() && in_flight.is_empty() {
                        return Ok(drained);
                    }
                    let wait = next.map_or(self.poll, |next| next.min(self.poll));
                    // Never spin: a due job that cannot be claimed yet is held by another
                    // worker's transaction for a moment.
                    let wait = wait.max(Duration::from_millis(5));
                    wait_or_one_finishes(wait, &mut in_flight, &mut drained).await;
                }
                // A payload this build cannot read: `claim` has buried it.
                Err(QueueError::Codec(e)) => {
                    tracing::warn!(error = %e, "a job was dead on arrival");
                    metrics::dead_letters(queue.name(), 1);
                    drained.dead += 1;
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(error = %e, "cannot claim a job; trying again");
                    wait_or_one_finishes(self.poll, &mut in_flight, &mut drained).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// How long to wait before claiming, as the breaker sees it: while open, until it lets a
    /// trial through; while half-open, until the job in flight (perhaps the trial) finishes.
    fn breaker_says_wait(&self, idle: bool) -> Option<Duration> {
        let breaker = self.breaker?;
        match breaker.state(Instant::now().into_std()) {
            BreakerState::Open { remaining } => Some(remaining.min(self.poll)),
            BreakerState::HalfOpen if !idle => Some(self.poll),
            _ => None,
        }
    }

    /// Runs `handler` on one job while renewing its lease, then records the outcome.
    fn run_one<B, P, R, F, Fut>(
        &self,
        claimed: Claimed<P, B>,
        handler: F,
    ) -> impl Future<Output = Finished> + Send + 'static
    where
        B: Backend,
        P: Send + 'static,
        R: Serialize + Send + Sync + 'static,
        F: FnOnce(Job<P>) -> Fut + Send + 'static,
        Fut: Future<Output = Outcome<R, B>> + Send + 'static,
    {
        let lease = self.lease;
        let backoff = self.backoff;
        let on_recorded = self.on_recorded;
        async move {
            let (job, claim) = claimed.into_parts();
            let (id, attempt) = (job.id, job.attempt);
            let work = handler(job);
            tokio::pin!(work);
            // The lease is renewed every third of it beside the handler, never instead of it: on
            // SQLite, a handler's open write transaction holds the file's write lock, which a
            // renewal's `UPDATE` waits for; awaited alone, it waited out the busy timeout (5 s)
            // while the handler, which would have released the lock, was not polled. Ends only
            // when the job was taken over.
            let renewing = async {
                let mut renewal = tokio::time::interval_at(Instant::now() + lease / 3, lease / 3);
                renewal.set_missed_tick_behavior(MissedTickBehavior::Delay);
                loop {
                    renewal.tick().await;
                    match claim.renew(lease).await {
                        Ok(()) => {}
                        Err(QueueError::Superseded { .. }) => return,
                        // The lease may still hold; the next renewal tries again.
                        Err(e) => tracing::warn!(job = %id, error = %e, "cannot renew the lease"),
                    }
                    // A slow renewal does not make the next one come at once.
                    renewal.reset();
                }
            };
            // A renewal still under way when the handler ends is dropped: the outcome is
            // recorded under the claim's token, which a renewal does not change.
            let outcome = tokio::select! {
                outcome = &mut work => outcome,
                () = renewing => {
                    tracing::warn!(job = %id, "the job was taken over; dropping its handler");
                    return Finished::Lost;
                }
            };
            let finished = record(claim, outcome, attempt, &backoff).await;
            if let Some(hook) = on_recorded {
                hook(id);
            }
            finished
        }
    }
}

/// What became of one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Finished {
    Done,
    Retried,
    Snoozed,
    Dead,
    Lost,
    Unrecorded,
}

impl Drained {
    fn count(&mut self, finished: Result<Finished, tokio::task::JoinError>) {
        match finished {
            Ok(Finished::Done) => self.done += 1,
            Ok(Finished::Retried) => self.retried += 1,
            Ok(Finished::Snoozed) => self.snoozed += 1,
            Ok(Finished::Dead) => self.dead += 1,
            Ok(Finished::Lost) => self.lost += 1,
            // A handler that panicked recorded nothing; its lease returns the job.
            Ok(Finished::Unrecorded) | Err(_) => self.unrecorded += 1,
        }
    }
}

async fn record<B: Backend, R: Serialize + Sync>(
    claim: Claim<B>,
    outcome: Outcome<R, B>,
    attempt: u32,
    backoff: &Policy,
) -> Finished {
    let id = claim.job();
    let queue = Arc::clone(&claim.queue.name);
    let recorded = match outcome {
        Outcome::Done(result) => claim.complete(&result).await.map(|()| Finished::Done),
        Outcome::DoneIn(tx, result) => claim
            .complete_in(tx, &result)
            .await
            .map(|()| Finished::Done),
        Outcome::RetryLater(error) => {
            let pause = backoff.delay(attempt, Duration::ZERO);
            claim
                .retry_later(&error, pause)
                .await
                .map(|retried| match retried {
                    Retried::Later => Finished::Retried,
                    Retried::Dead => Finished::Dead,
                })
        }
        Outcome::Snooze { pause, reason } => claim
            .snooze(pause, &reason)
            .await
            .map(|()| Finished::Snoozed),
        Outcome::Dead(error) => claim.kill(&error).await.map(|()| Finished::Dead),
    };
    match &recorded {
        Ok(Finished::Done) => metrics::attempt(&queue, Attempt::Done),
        Ok(Finished::Retried) => metrics::attempt(&queue, Attempt::Retry),
        Ok(Finished::Dead) => metrics::attempt(&queue, Attempt::Dead),
        _ => {}
    }
    recorded.unwrap_or_else(|e| match e {
        QueueError::Superseded { .. } => {
            tracing::warn!(job = %id, "the job was taken over; its outcome here is discarded");
            Finished::Lost
        }
        e => {
            tracing::warn!(job = %id, error = %e, "cannot record the outcome");
            Finished::Unrecorded
        }
    })
}

async fn wait_for_one(in_flight: &mut JoinSet<Finished>, drained: &mut Drained) {
    if let Some(finished) = in_flight.join_next().await {
        drained.count(finished);
    }
}

async fn wait_or_one_finishes(
    wait: Duration,
    in_flight: &mut JoinSet<Finished>,
    drained: &mut Drained,
) {
    if in_flight.is_empty() {
        tokio::time::sleep(wait).await;
        return;
    }
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        Some(finished) = in_flight.join_next() => drained.count(finished),
    }
}

/// Sets the queue's gauges; a failure leaves them as they were.
#[cfg(feature = "metrics")]
async fn observe<B: Backend>(queue: &Queue<B>) {
    if let Err(e) = queue.observe().await {
        tracing::debug!(error = %e, "cannot read the queue's depth for its gauges");
    }
}

fn count(buried: Result<u64, QueueError>) -> u32 {
    match buried {
        Ok(n) => u32::try_from(n).unwrap_or(u32::MAX),
        Err(e) => {
            tracing::warn!(error = %e, "cannot bury abandoned jobs");
            0
        }
    }
}

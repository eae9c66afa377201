//! The portal's long outage, as scene 5 of `cargo run --example portal` tells it, checked on
//! SQLite and then on PostgreSQL: the breaker opens after five failures, every customer's claim
//! is saved and queued, and when the service is back the worker drains the queue through the
//! same `#[retry]` function: each check executed once, each result e-mailed once, the unknown
//! claim in the dead-letter state with its error.
//!
//! One test for both engines, one after the other, because the portal's budget and breaker are
//! statics of this process.

use crate::common::{Database, Engine};
use futures_util::future::join_all;
use retry_durable::queue::{Job, State, Worker};
use retry_examples::portal::coverage::{CONTRACT_BREAKER, ContractError, check_coverage};
use retry_examples::portal::later::{self, CoverageJob, PortalDb};
use retry_examples::portal::{Claim, ContractClient, ContractService};
use retry_runtime::{BreakerState, GiveUpReason, IdempotencyKey, Policy};
use std::time::Duration;
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_outage_is_saved_and_drained_later_on_both_engines() {
    long_outage::<sqlx::Sqlite>(Engine::Sqlite).await;
    long_outage::<sqlx::Postgres>(Engine::Postgres).await;
}

/// Waits until [`CONTRACT_BREAKER`] is open.
async fn breaker_open(test: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(
        CONTRACT_BREAKER.state(Instant::now().into_std()),
        BreakerState::Open { .. }
    ) {
        assert!(
            Instant::now() < deadline,
            "{test}: the breaker did not open within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn long_outage<B: PortalDb>(engine: Engine) {
    let test = format!("a_long_outage_{engine:?}");
    let Some(database) = Database::fresh(engine, &test).await else {
        return;
    };
    let queue = database.queue::<B>().await;
    let service = ContractService::start().await.expect("the service starts");
    let client = ContractClient::new(service.addr());
    service.overload_next_checks(u32::MAX).await;
    let customers: Vec<Claim> = [4714, 4715, 4716, 4717, 4718, 4791]
        .into_iter()
        .map(|claim| Claim::new(claim, &format!("customer-{claim}@example.com")))
        .collect();
    let reports = customers.iter().zip(0u32..).map(|(claim, i)| {
        let (client, queue, test) = (&client, &queue, &test);
        async move {
            tokio::time::sleep(Duration::from_millis(20) * i).await;
            if i == 5 {
                // The sixth customer comes once the breaker has opened: 20 ms after the fifth
                // is usually later than its failure, but not on a loaded machine, where the
                // closed breaker let a sixth attempt through while the fifth was under way.
                breaker_open(test).await;
            }
            let key = IdempotencyKey::new();
            let answer = check_coverage(client, queue, claim, &key).await;
            (answer, key, Instant::now())
        }
    });
    let answers = join_all(reports).await;
    // The first answer back came after the call that opened the breaker (the fifth failure) and
    // its fallback's save. The last one can be seconds later on a loaded machine, past the
    // breaker's `open_for`, so the state is read as of the first.
    let opened_by_then = answers
        .iter()
        .map(|(_, _, back)| *back)
        .min()
        .expect("six answers");
    for (answer, _, _) in &answers {
        assert!(
            matches!(
                answer,
                Err(ContractError::Deferred { why, .. })
                    if why.reason == GiveUpReason::BreakerOpen
            ),
            "{test}: {answer:?}"
        );
    }
    let reached: u32 = join_all(customers.iter().map(|c| service.coverage_checks(c.id)))
        .await
        .into_iter()
        .sum();
    assert_eq!(
        reached, 5,
        "{test}: five failures open the breaker; nothing after reaches it"
    );
    assert!(matches!(
        CONTRACT_BREAKER.state(opened_by_then.into_std()),
        BreakerState::Open { .. }
    ));

    service.overload_next_checks(0).await;
    let worker_queue = queue.clone();
    let drained = Worker::new(&test)
        .concurrency(2)
        .per_second(f64::INFINITY)
        .poll(Duration::from_millis(20))
        .backoff(Policy::new().base(Duration::from_millis(20)))
        .breaker(&CONTRACT_BREAKER)
        .until_empty()
        .run(&queue, move |job: Job<CoverageJob>| {
            later::check_later(client.clone(), worker_queue.clone(), job)
        })
        .await
        .expect("the worker drains the queue");
    // Nothing snoozed: the worker claimed nothing while the breaker was open (a refused call
    // would have been), and sent the trial alone.
    assert_eq!(
        (drained.done, drained.dead, drained.retried, drained.snoozed),
        (5, 1, 0, 0)
    );

    let jobs = queue.jobs().await.expect("the jobs");
    assert_eq!(jobs.len(), 6, "{test}: {jobs:?}");
    for (_, key, _) in &answers {
        assert_eq!(
            service.executions(key.as_str()).await,
            1,
            "{test}: key {key}"
        );
    }
    let dead: Vec<_> = jobs.iter().filter(|job| job.state == State::Dead).collect();
    assert_eq!(dead.len(), 1, "{test}: {jobs:?}");
    assert_eq!(
        dead[0].last_error.as_deref(),
        Some("no claim 4791 on record")
    );
    assert_eq!(dead[0].attempts, 1);
    let emails = later::outbox(&queue).await.expect("the outbox");
    let mut told: Vec<_> = emails
        .iter()
        .map(|e| (e.claim.0, e.message.as_str()))
        .collect();
    told.sort_unstable();
    assert_eq!(
        told,
        [
            (4714, "Claim 4714 is covered; we will arrange the payout."),
            (4715, "Claim 4715 is covered; we will arrange the payout."),
            (4716, "Claim 4716 is covered; we will arrange the payout."),
            (4717, "Claim 4717 is not covered by your policy."),
            (4718, "Claim 4718 is covered; we will arrange the payout."),
        ]
    );
}

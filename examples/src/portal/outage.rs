//! Scene 5 of `cargo run --example portal`, the long outage, as a library function: the example
//! plays it, and so does the benchmark that draws the metrics an operator would watch during it
//! (`cargo run -p retry-bench --features metrics --bin metrics`).

use super::config::contract_breaker;
use super::coverage::{ContractError, Coverage, check_coverage};
use super::later::{self, CoverageJob, PortalDb};
use super::story::scene_time;
use super::{Claim, ClaimId, ContractClient, ContractService};
use futures_util::future::join_all;
use retry_durable::queue::{Job, Queue, State, Worker};
use retry_runtime::{BreakerState, GiveUpReason, IdempotencyKey, Policy};
use std::error::Error;
use std::time::Duration;
use tokio::time::Instant;

/// Scene 5 of `cargo run --example portal`: a long outage. Six customers report claims while
/// the contract service is down; five failures in a row open the contract service's breaker
/// ([`contract_breaker`]: the configured one, or the written default), which then
/// refuses every call at once, and the fallback saves each claim and queues its check. When the
/// service is back, a worker drains the queue through the same `#[retry]` function, budget and
/// breaker, at most 2 checks at a time and 10 a second; the claim the service does not know goes
/// to the dead-letter state with its error, and every other result is e-mailed.
///
/// The scene checks its own story as it goes (which calls reached the service, what each
/// customer was told, what the worker drained) and panics if it does not hold. `retry-bench`'s
/// `metrics` binary runs it to draw `docs/metrics.png`.
pub async fn long_outage<B: PortalDb>(
    service: &ContractService,
    client: &ContractClient,
    queue: &Queue<B>,
) -> Result<(), Box<dyn Error>> {
    service.overload_next_checks(u32::MAX).await;
    let customers = [
        Claim::new(4714, "dana@example.com"),
        Claim::new(4715, "emil@example.com"),
        Claim::new(4716, "fatma@example.com"),
        Claim::new(4717, "goran@example.com"),
        Claim::new(4718, "hanna@example.com"),
        // A typo: the service has no claim 4791.
        Claim::new(4791, "ivo@example.com"),
    ];
    println!(
        "  the contract service is down; {} customers report claims, 50 ms apart",
        customers.len()
    );
    let reports = customers.iter().zip(0u32..).map(|(claim, i)| async move {
        tokio::time::sleep(Duration::from_millis(50) * i).await;
        let answer = check_coverage(client, queue, claim, &IdempotencyKey::new()).await;
        if let Err(e @ ContractError::Deferred { .. }) = &answer {
            println!("    claim {} at {:5.2} s: {e}", claim.id, scene_time());
        }
        tell_customer(claim.id, &answer);
        answer
    });
    let answers = join_all(reports).await;
    // The first five calls failed; the fifth opened the breaker, which ended that customer's
    // loop at once (no pause). After that no call reached the service: each customer's next
    // attempt was refused at once, the loop gave up, and the fallback saved every claim.
    let reached: u32 = join_all(customers.iter().map(|c| service.coverage_checks(c.id)))
        .await
        .into_iter()
        .sum();
    println!("  calls that reached the service during the outage: {reached}");
    assert_eq!(reached, 5);
    assert!(answers.iter().all(|answer| matches!(
        answer,
        Err(ContractError::Deferred { why, .. }) if why.reason == GiveUpReason::BreakerOpen
    )));

    service.overload_next_checks(0).await;
    println!(
        "\n  the contract service is back; a worker drains the queue (2 at a time, 10 a second)"
    );
    if let BreakerState::Open { remaining } = contract_breaker().state(Instant::now().into_std()) {
        println!(
            "  the breaker stays open for another {:.2} s: the worker claims nothing until then",
            remaining.as_secs_f64()
        );
    }
    let worker = Worker::new("portal-example")
        .concurrency(2)
        .per_second(10.0)
        .lease(Duration::from_secs(10))
        .poll(Duration::from_millis(100))
        .backoff(Policy::new().base(Duration::from_millis(500)))
        .breaker(contract_breaker())
        .until_empty();
    let (worker_client, worker_queue) = (client.clone(), queue.clone());
    let drained = worker
        .run(queue, move |job: Job<CoverageJob>| {
            later::check_later(worker_client.clone(), worker_queue.clone(), job)
        })
        .await?;

    println!(
        "  drained: {} done, {} dead, {} retried",
        drained.done, drained.dead, drained.retried
    );
    println!("\n  delivered later by e-mail:");
    let emails = later::outbox(queue).await?;
    for email in &emails {
        println!("    to {}: {}", email.to, email.message);
    }
    println!("  in the dead-letter state:");
    let jobs = queue.jobs().await?;
    for job in jobs.iter().filter(|job| job.state == State::Dead) {
        let error = job.last_error.as_deref().unwrap_or("no error kept");
        println!(
            "    job {} after {} attempt(s): {error}",
            job.id, job.attempts
        );
    }
    // The five known claims of this scene and any saved before it (the example's scene 2), each
    // checked once by the service; the unknown one dead.
    let waiting = jobs.len() - customers.len();
    assert_eq!(emails.len(), waiting + 5);
    assert_eq!((drained.done, drained.dead), (waiting as u32 + 5, 1));
    for job in &jobs {
        assert_eq!(service.executions(&job.key).await, 1, "job {}", job.id);
    }
    Ok(())
}

/// What the customer reads. The match is the point of the whole design: "not covered" can only
/// come from an `Ok`, so an outage can never be mistaken for a refusal, and "your details are
/// saved" only from the fallback, once they are.
pub fn tell_customer(claim: ClaimId, answer: &Result<Coverage, ContractError>) {
    let message = match answer {
        Ok(Coverage::Covered) => format!("Claim {claim} is covered; we will arrange the payout."),
        Ok(Coverage::NotCovered) => format!("Claim {claim} is not covered by your policy."),
        Err(ContractError::Deferred { .. }) => "The coverage check is not possible right now; \
             your details are saved and you will get the result by e-mail."
            .to_owned(),
        // The fallback could not save the claim (its database failed): nothing is promised.
        Err(e) if e.may_pass() => {
            "The coverage check is not possible right now; please try again later.".to_owned()
        }
        Err(e) => format!("We cannot check claim {claim}: {e}."),
    };
    println!("  Portal ({claim}): {message}");
}

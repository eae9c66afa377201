//! The storm rehearsed: `cargo run --example portal -- --rehearse [--seed N]`, and
//! `claims-portal rehearse`, which the tests run.
//!
//! The contract service answers every check as its records say; the outage is injected by
//! `retry-chaos` into the coverage check itself, at the call site named `check_coverage`: before
//! an attempt is sent, a seeded draw may fail it with the portal's own error (an injected fault
//! is [`ContractError::Overloaded`] by `impl From<Injected> for ContractError`, so the classifier
//! judges it as it judges the service's real "overloaded") or make it slower. The policy, its
//! budget and its breaker are the portal's, read from `examples/rehearsal.toml` (the shipped
//! ones with short pauses and no jitter). What each customer is told, the breaker's state and the
//! number of queued checks are printed after each customer; then the faults are switched off
//! ([`retry_chaos::switch`]) and a worker drains the queue.
//!
//! The customers come one after another, so that the attempts ask the site's draws in one order:
//! the same seed tells the same story, word for word, apart from the attempts' times (the
//! `at 0.05 s` of each attempt's line).

use super::config::contract_breaker;
use super::coverage::{ContractError, Coverage, check_coverage};
use super::later::{self, CoverageJob, PortalDb};
use super::outage::tell_customer;
use super::story::scene;
use super::{Claim, ClaimId, ContractClient, ContractService, contract};
use retry_chaos::{Rule, Site, Stats, Switch};
use retry_durable::queue::{Job, Queue, State, Worker};
use retry_runtime::{BreakerState, IdempotencyKey, Policy};
use std::error::Error;
use std::time::{Duration, Instant};

/// The call site the faults go into: the coverage check's function name, which `#[retry]` gives
/// its loop.
pub const SITE: &str = "check_coverage";

/// The share of the attempts that fail "overloaded" before they are sent.
pub const ERROR_RATE: f64 = 0.7;

/// The latency added to a share ([`LATENCY_RATE`]) of the attempts that were not failed.
pub const LATENCY: Duration = Duration::from_millis(100);

/// The share of the attempts not failed that take [`LATENCY`] longer.
pub const LATENCY_RATE: f64 = 0.2;

/// The customers of the rehearsal, in the order they report: claims the service knows (4713 and
/// 4717 are not covered, the others are).
pub fn customers() -> Vec<Claim> {
    [
        (4711, "alma"),
        (4712, "bruno"),
        (4713, "carla"),
        (4714, "dana"),
        (4715, "emil"),
        (4716, "fatma"),
        (4717, "goran"),
        (4718, "hanna"),
    ]
    .into_iter()
    .map(|(id, name)| Claim::new(id, &format!("{name}@example.com")))
    .collect()
}

/// What the rehearsal showed, for the checks at its end.
#[derive(Debug)]
pub struct Rehearsed {
    /// The seed of the site's draws.
    pub seed: u64,
    /// What the site injected while the faults were on.
    pub stats: Stats,
    /// Each customer's answer: `Some(coverage)`, or `None` for "saved, the result by e-mail".
    pub told: Vec<(ClaimId, Option<Coverage>)>,
    /// Whether the breaker was seen open after a customer's check.
    pub breaker_opened: bool,
    /// The most checks seen queued at once.
    pub most_queued: usize,
}

/// Rehearses the storm against a contract service of its own that answers normally, with the
/// faults of [`SITE`] seeded by `seed` (else `RETRY_CHAOS_SEED`, else a random one; printed),
/// the queue in `queue`. Checks its own story as it goes, and returns it.
pub async fn rehearse<B: PortalDb>(
    queue: &Queue<B>,
    seed: Option<u64>,
) -> Result<Rehearsed, Box<dyn Error>> {
    let service = ContractService::start()
        .await
        .map_err(|e| format!("cannot start the contract service on a loopback port: {e}"))?;
    let client = ContractClient::new(service.addr());
    let mut site = Site::new(SITE)
        .rule(Rule::error().rate(ERROR_RATE))
        .rule(Rule::latency(LATENCY).rate(LATENCY_RATE));
    if let Some(seed) = seed {
        site = site.seed(seed);
    }
    let site = site.install();
    let seed = site.seed();

    scene(
        "R",
        "the storm, rehearsed: faults injected by retry-chaos, not by the service",
    );
    println!("  seed {seed}: `--seed {seed}` (or RETRY_CHAOS_SEED={seed}) tells this story again");
    println!(
        "  at `{SITE}`: {:.0} % of the attempts fail \"overloaded\" before they are sent, \
         {:.0} % of the others take {} ms longer",
        ERROR_RATE * 100.0,
        LATENCY_RATE * 100.0,
        LATENCY.as_millis()
    );
    let customers = customers();
    println!(
        "  the contract service answers every check; {} customers report claims, one after another",
        customers.len()
    );

    let mut told = Vec::new();
    let (mut breaker_opened, mut most_queued) = (false, 0);
    for claim in &customers {
        println!("  is claim {} covered?", claim.id);
        let answer = check_coverage(&client, queue, claim, &IdempotencyKey::new()).await;
        tell_customer(claim.id, &answer);
        let breaker = breaker_state();
        let queued = queued(queue).await?;
        println!("    breaker {breaker}; queued checks: {queued}");
        breaker_opened |= breaker == "open";
        most_queued = most_queued.max(queued);
        told.push((claim.id, answered(claim.id, &answer)?));
    }

    let stats = site.stats();
    let mut reached = 0;
    for claim in &customers {
        reached += service.coverage_checks(claim.id).await;
    }
    println!(
        "  injected: {} errors and {} latencies, in {} attempts asked; \
         checks that reached the service: {reached}",
        stats.errors, stats.latencies, stats.asked
    );

    retry_chaos::switch(Switch::Off);
    println!(
        "\n  the faults are switched off (retry_chaos::switch(Switch::Off)); \
         a worker drains the queue, one check at a time"
    );
    if breaker_state() == "open" {
        println!(
            "  the breaker is open: the worker claims nothing until it lets a trial call through"
        );
    }
    let drained = drain(&client, queue).await?;
    println!(
        "  drained: {} done, {} dead, {} retried",
        drained.done, drained.dead, drained.retried
    );
    println!("\n  delivered later by e-mail:");
    let emails = later::outbox(queue).await?;
    for email in &emails {
        println!("    to {}: {}", email.to, email.message);
    }
    let after = site.stats();
    println!(
        "  injected after the switch: {} errors, {} latencies",
        after.errors - stats.errors,
        after.latencies - stats.latencies
    );

    // The story's invariants: the customers whose check was deferred got their answer by
    // e-mail, the faults stopped with the switch, and nothing queued is left.
    let deferred = told.iter().filter(|(_, answer)| answer.is_none()).count();
    if emails.len() != deferred || drained.done as usize != deferred || drained.dead != 0 {
        return Err(format!(
            "the rehearsal's queue did not drain as told: {deferred} deferred, {} e-mails, {drained:?}",
            emails.len()
        )
        .into());
    }
    if after != stats {
        return Err("faults were injected after the switch was turned off".into());
    }
    site.remove();
    Ok(Rehearsed {
        seed,
        stats,
        told,
        breaker_opened,
        most_queued,
    })
}

/// What the customer was told, as the rehearsal keeps it. "Not covered" only from the service's
/// records: an injected failure that reached a customer as "not covered" is the bug the
/// rehearsal exists to find.
fn answered(
    claim: ClaimId,
    answer: &Result<Coverage, ContractError>,
) -> Result<Option<Coverage>, Box<dyn Error>> {
    match answer {
        Ok(coverage) => {
            let record = if *coverage == Coverage::Covered {
                "COVERED"
            } else {
                "NOT_COVERED"
            };
            if contract::record(claim) != Some(record) {
                return Err(
                    format!("claim {claim} was told {coverage}, against the records").into(),
                );
            }
            Ok(Some(*coverage))
        }
        Err(ContractError::Deferred { .. }) => Ok(None),
        Err(e) => Err(format!("claim {claim} got no answer and was not saved: {e}").into()),
    }
}

/// The breaker's state, without the time left (it differs from run to run).
fn breaker_state() -> &'static str {
    match contract_breaker().state(Instant::now()) {
        BreakerState::Closed => "closed",
        BreakerState::Open { .. } => "open",
        BreakerState::HalfOpen => "half-open",
        _ => "in another state",
    }
}

/// The checks waiting in the queue.
async fn queued<B: PortalDb>(queue: &Queue<B>) -> Result<usize, Box<dyn Error>> {
    Ok(queue
        .jobs()
        .await?
        .iter()
        .filter(|job| job.state == State::Available)
        .count())
}

/// The worker of scene 5, one check at a time (so that its lines come in one order).
async fn drain<B: PortalDb>(
    client: &ContractClient,
    queue: &Queue<B>,
) -> Result<retry_durable::queue::Drained, Box<dyn Error>> {
    let worker = Worker::new("portal-rehearsal")
        .concurrency(1)
        .per_second(10.0)
        .lease(Duration::from_secs(10))
        .poll(Duration::from_millis(100))
        .backoff(Policy::new().base(Duration::from_millis(500)))
        .breaker(contract_breaker())
        .until_empty();
    let (worker_client, worker_queue) = (client.clone(), queue.clone());
    Ok(worker
        .run(queue, move |job: Job<CoverageJob>| {
            later::check_later(worker_client.clone(), worker_queue.clone(), job)
        })
        .await?)
}

//! A claims portal that asks a contract service about storm claims, with `#[retry]` deciding
//! when to ask again, and a durable queue for the checks that cannot be made now.
//!
//! ```text
//! cargo run --example portal                                   # the queue in a SQLite file
//! cargo run --example portal -- --database-url postgres://...   # or in PostgreSQL
//! cargo run --example portal -- --metrics 127.0.0.1:9464        # and GET /metrics there
//! cargo run --example portal -- --config my-portal.toml         # the policies of another file
//! cargo run --example portal -- --rehearse --seed 42            # the storm, with injected faults
//! ```
//!
//! The retry policy of the coverage checks, with its budget and breaker, is read at start-up from
//! `examples/portal.toml`, which is compiled into the example (`include_str!`), so that the first
//! command needs nothing else; `--config FILE` reads another file with the same tables instead
//! (copy `examples/portal.toml` and change `max`, `base`, `jitter`, the budget or the breaker;
//! the scenes' checks assume the shipped values). The portal builds a `retry_config::Registry`
//! from the file, installs it as the process's resolver, and prints which policies it read; the
//! coverage check, `#[retry(policy = "contract-service", ...)]`, finds its policy there.
//!
//! The run takes fifteen to twenty seconds, because the pauses are real. Five scenes:
//!
//! 1. The contract service is overloaded for a moment: it answers "overloaded" to the first two
//!    coverage checks, and the third attempt, after pauses of about 1 s and 2 s, gets "covered".
//! 2. The service stays overloaded: after 4 calls the portal gives up. It never says "not
//!    covered", because that is a business answer, and the service never gave it. The fallback
//!    saves the claim and queues its check: the customer is told that the details are saved and
//!    the result will come by e-mail.
//! 3. A claim that is not covered: the answer is an `Ok`, so it is returned after one call.
//! 4. A payout whose response is lost on the way back. The retry carries the same
//!    [`IdempotencyKey`], the service recognises it and answers with the stored receipt, and the
//!    claim is paid exactly once.
//! 5. A long outage. Six customers report claims while the service is down; five failures in a
//!    row open the circuit breaker, which then refuses every call at once, and the fallback saves
//!    each claim and queues its check under the claim's idempotency key. When the service is
//!    back, a worker drains the queue through the same `#[retry]` function, budget and breaker,
//!    at most 2 checks at a time and 10 a second; a claim the service does not know goes to the
//!    dead-letter state with its error; every other result is e-mailed.
//!
//! `--rehearse [--seed N]` plays, instead of the five scenes, the storm rehearsed as a team would
//! rehearse it in staging (`portal::rehearse`, retry-chaos's guide "Rehearsing a policy in
//! staging"): the contract service answers every check, and retry-chaos injects the outage into
//! the coverage check at its call site (`check_coverage`), "overloaded" errors of the portal's
//! own type and latencies, by rate and seed. It prints the seed and what each customer was told,
//! the breaker's state and the queued checks after each one, then switches the faults off and
//! drains the queue. The policies are `examples/rehearsal.toml`'s (the shipped ones with 50 ms
//! pauses and no jitter), so that it takes a few seconds and the same seed tells the same story.
//!
//! What the output shows comes from the runtime, not from bookkeeping of the portal's own: each
//! attempt prints its number from [`retry_runtime::attempt()`], and the `notify` hook announces
//! each pause, with the jitter already drawn, before the pause is taken.
//!
//! The portal's code is in the `retry_examples` library, because the fault tests run it as
//! processes of their own (`claims-portal`): the coverage check and its fallback in
//! `portal::coverage`, the saved claims, the queued checks and the e-mails in `portal::later`,
//! the queue in `queue`, and a stand-in for the contract service (a `TcpListener` on a loopback
//! port and a one-line protocol, which counts the requests it gets) in `portal::contract`. Only
//! the payout of scene 4 is here, in [`payout`].

use retry_durable::queue::{Engine, Location, Queue};
use retry_examples::metrics::Metrics;
use retry_examples::portal::config;
use retry_examples::portal::coverage::{ContractError, Coverage, check_coverage};
use retry_examples::portal::later::{self, PortalDb};
use retry_examples::portal::outage::{long_outage, tell_customer};
use retry_examples::portal::story::scene;
use retry_examples::portal::{Claim, ClaimId, ContractClient, ContractService};
use retry_runtime::{GiveUpReason, IdempotencyKey};
use std::error::Error;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use payout::pay_out;

/// The claims in the contract service's records.
const STORM_ROOF: ClaimId = ClaimId(4711); // storm damage to a roof: covered
const STORM_FENCE: ClaimId = ClaimId(4712); // storm damage to a fence: covered
const GARDEN_SHED: ClaimId = ClaimId(4713); // a shed the policy does not include: not covered

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse()?;
    let policies = if args.rehearse {
        config::install_or(
            args.config.as_deref(),
            config::REHEARSAL,
            "examples/rehearsal.toml (built in)",
        )?
    } else {
        config::install(args.config.as_deref())?
    };
    println!("{}", policies.summary());
    let (database, queue_name) = where_the_queue_goes(args.database.clone())?;
    // The engine is the database's, chosen at run time; the story is one function, generic
    // over it.
    match Location::parse(&database).engine() {
        Engine::Sqlite => play::<sqlx::Sqlite>(args, &database, &queue_name).await,
        Engine::Postgres => play::<sqlx::Postgres>(args, &database, &queue_name).await,
    }
}

async fn play<B: PortalDb>(
    args: Args,
    database: &str,
    queue_name: &str,
) -> Result<(), Box<dyn Error>> {
    let queue = open_queue::<B>(database, queue_name).await?;
    if let Some(addr) = args.metrics {
        serve_metrics(addr, &queue).await?;
    }
    if args.rehearse {
        return rehearse(&queue, args.seed).await;
    }
    let service = ContractService::start()
        .await
        .map_err(|e| format!("cannot start the contract service on a loopback port: {e}"))?;
    println!("Contract service listening on {}", service.addr());
    let client = ContractClient::new(service.addr());

    scene(
        "1",
        "a storm: the contract service is overloaded for a moment",
    );
    service.overload_next_checks(2).await;
    let roof = Claim::new(STORM_ROOF.0, "alma@example.com");
    println!("  is claim {STORM_ROOF} covered? (at most 4 calls, pauses of about 1 s, 2 s, 4 s)");
    // One key per check, made before the first attempt: the service records each check once.
    let answer = check_coverage(&client, &queue, &roof, &IdempotencyKey::new()).await;
    tell_customer(STORM_ROOF, &answer);
    assert!(matches!(answer, Ok(Coverage::Covered)));
    // Two "overloaded", then the answer.
    assert_eq!(service.coverage_checks(STORM_ROOF).await, 3);

    scene("2", "the storm goes on: the service stays overloaded");
    service.overload_next_checks(u32::MAX).await;
    let fence = Claim::new(STORM_FENCE.0, "bruno@example.com");
    println!("  is claim {STORM_FENCE} covered?");
    let answer = check_coverage(&client, &queue, &fence, &IdempotencyKey::new()).await;
    tell_customer(STORM_FENCE, &answer);
    // `max = 3`: the first call and three retries; then the fallback saved the claim, with the
    // last error kept as the cause.
    assert!(matches!(
        &answer,
        Err(ContractError::Deferred { why, cause, .. })
            if why.reason == GiveUpReason::Exhausted && why.attempts == 4
                && matches!(**cause, ContractError::Overloaded)
    ));
    assert_eq!(service.coverage_checks(STORM_FENCE).await, 4);
    service.overload_next_checks(0).await;

    scene("3", "a claim that is not covered");
    let shed = Claim::new(GARDEN_SHED.0, "carla@example.com");
    println!("  is claim {GARDEN_SHED} covered?");
    let answer = check_coverage(&client, &queue, &shed, &IdempotencyKey::new()).await;
    tell_customer(GARDEN_SHED, &answer);
    // A business answer is an `Ok`: nothing to retry.
    assert!(matches!(answer, Ok(Coverage::NotCovered)));
    assert_eq!(service.coverage_checks(GARDEN_SHED).await, 1);

    scene("4", "a payout whose response is lost");
    service.lose_next_payout_response().await;
    // One key per payout, made before the first attempt. Being a parameter, it is the same for
    // every attempt, which is what lets the service recognise a repeat.
    let key = IdempotencyKey::new();
    let amount = Cents(125_000);
    println!("  paying {amount} for claim {STORM_ROOF} with key {key}");
    match pay_out(&client, STORM_ROOF, amount, &key).await {
        Ok(receipt) => println!("  Portal: paid {amount} for claim {STORM_ROOF}, {receipt}."),
        Err(e) => println!("  Portal: the payout for claim {STORM_ROOF} did not go through: {e}."),
    }
    let requests = service.payout_requests().await;
    let executed = service.payouts_executed().await;
    println!("  payouts executed by the contract service: {executed} (of {requests} requests)");
    // The lost response, then the repeat that the key turns into a lookup.
    assert_eq!(requests, 2);
    assert_eq!(
        executed, 1,
        "the lost response must not lead to a second payout"
    );

    scene(
        "5",
        "a long outage: the breaker opens, and the checks wait in the queue",
    );
    long_outage(&service, &client, &queue).await?;
    Ok(())
}

/// `--rehearse`: the storm with faults injected by retry-chaos.
#[cfg(feature = "rehearse")]
async fn rehearse<B: PortalDb>(queue: &Queue<B>, seed: Option<u64>) -> Result<(), Box<dyn Error>> {
    retry_examples::portal::rehearse::rehearse(queue, seed).await?;
    Ok(())
}

/// `--rehearse` in a build without the feature `rehearse`.
#[cfg(not(feature = "rehearse"))]
async fn rehearse<B: PortalDb>(_: &Queue<B>, _: Option<u64>) -> Result<(), Box<dyn Error>> {
    Err("`--rehearse` needs the feature `rehearse` of retry-examples (on by default)".into())
}

/// The command line.
struct Args {
    /// `--database-url URL`, else `DATABASE_URL`.
    database: Option<String>,
    /// `--metrics ADDR:PORT`: serve `GET /metrics` there.
    metrics: Option<SocketAddr>,
    /// `--config FILE`: the retry policies of this TOML file instead of the shipped ones.
    config: Option<PathBuf>,
    /// `--rehearse`: the storm with injected faults instead of the five scenes.
    rehearse: bool,
    /// `--seed N`: the rehearsal's seed.
    seed: Option<u64>,
}

const USAGE: &str = "usage: portal [--database-url postgres://...] [--metrics 127.0.0.1:9464] [--config portal.toml] [--rehearse [--seed N]]";

impl Args {
    fn parse() -> Result<Self, Box<dyn Error>> {
        let mut parsed = Args {
            database: None,
            metrics: None,
            config: None,
            rehearse: false,
            seed: None,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            if arg == "--rehearse" {
                parsed.rehearse = true;
                continue;
            }
            match (arg.as_str(), args.next()) {
                ("--database-url", Some(url)) => parsed.database = Some(url),
                ("--config", Some(file)) => parsed.config = Some(PathBuf::from(file)),
                ("--seed", Some(seed)) => {
                    parsed.seed = Some(seed.parse().map_err(|_| {
                        format!("`--seed` takes a whole number, such as 42, not {seed:?}")
                    })?);
                }
                ("--metrics", Some(addr)) => {
                    parsed.metrics = Some(addr.parse().map_err(|_| {
                        format!("`--metrics` takes ADDR:PORT, such as 127.0.0.1:9464, not {addr:?}")
                    })?);
                }
                _ => return Err(USAGE.into()),
            }
        }
        if parsed.seed.is_some() && !parsed.rehearse {
            return Err(format!("`--seed` is the rehearsal's: add `--rehearse`\n{USAGE}").into());
        }
        if parsed.database.is_none() {
            parsed.database = std::env::var("DATABASE_URL")
                .ok()
                .filter(|url| !url.is_empty());
        }
        Ok(parsed)
    }
}

/// `GET /metrics` on `addr` for the rest of the run: the retry loops', the breaker's, the
/// budget's and the queue's instruments in Prometheus's text format, the queue's depth read at
/// each scrape.
async fn serve_metrics<B: PortalDb>(
    addr: SocketAddr,
    queue: &Queue<B>,
) -> Result<(), Box<dyn Error>> {
    let metrics = Metrics::install()?.observe(queue);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} for /metrics: {e}"))?;
    println!("Metrics: http://{}/metrics", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = metrics.serve(listener).await {
            eprintln!("the /metrics server stopped: {e}");
        }
    });
    Ok(())
}

/// Where the queue of checks that cannot be made now goes, and its name: in PostgreSQL given
/// `--database-url URL` or `DATABASE_URL`, otherwise in a SQLite file made afresh for this run.
fn where_the_queue_goes(given: Option<String>) -> Result<(String, String), Box<dyn Error>> {
    Ok(match given {
        Some(url)
            if Location::parse(&url).engine() == Engine::Postgres || url.starts_with("sqlite:") =>
        {
            // A shared database may hold jobs of earlier runs: this run's go in a queue of its own.
            let run = IdempotencyKey::new();
            let name = format!("{}-{}", later::QUEUE, &run.as_str()[..8]);
            (url, name)
        }
        Some(url) => {
            return Err(format!(
                "the database URL must start with postgres://, postgresql:// or sqlite:, not {url:?}"
            )
            .into());
        }
        None => {
            let dir = std::env::temp_dir().join("retry-portal-example");
            std::fs::create_dir_all(&dir)?;
            let file = dir.join("portal.db");
            for stale in ["portal.db", "portal.db-wal", "portal.db-shm"] {
                let _ = std::fs::remove_file(dir.join(stale));
            }
            (file.display().to_string(), later::QUEUE.to_owned())
        }
    })
}

/// The queue at `database`, with the portal's tables beside it.
async fn open_queue<B: PortalDb>(
    database: &str,
    queue_name: &str,
) -> Result<Queue<B>, Box<dyn Error>> {
    let queue = Queue::open(database, queue_name)
        .await
        .map_err(|e| format!("cannot open the job queue at {database}: {e}"))?;
    later::migrate(&queue).await?;
    match Location::parse(database).engine() {
        Engine::Sqlite => println!("Job queue: SQLite file {database}, queue {queue_name}"),
        Engine::Postgres => println!("Job queue: PostgreSQL, queue {queue_name}"),
    }
    Ok(queue)
}

/// An amount of money in euro cents, so that no payout is ever rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cents(u64);

impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EUR {}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// The portal's payout: a call that changes state, so a repeat must not pay twice.
mod payout {
    use super::Cents;
    use retry_examples::portal::story::{announce_give_up, announce_pause, scene_time};
    use retry_examples::portal::{ClaimId, ContractClient};
    use retry_runtime::{IdempotencyKey, attempt, non_idempotent, retry};
    use std::{fmt, io};

    /// The service's confirmation of a payout.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Receipt(String);

    /// Why a payout has no confirmation.
    #[derive(Debug)]
    pub enum PayError {
        /// The connection broke, perhaps after the service paid: worth another try, but only
        /// because the key makes a repeat harmless.
        ConnectionLost(io::Error),
        /// The service does not know the claim.
        InvalidClaim(ClaimId),
        /// An answer this portal does not understand.
        Protocol(String),
    }

    /// The `on = ...` of [`pay_out`].
    pub fn is_transient(error: &PayError) -> bool {
        matches!(error, PayError::ConnectionLost(_))
    }

    /// Pays `amount` for `claim`: `PAY 4711 125000 <key>` over the wire, answered by one line.
    ///
    /// `#[non_idempotent]` makes `#[retry]` insist on the `key` parameter: without it this would
    /// not compile, because a retry after a lost response would pay a second time. Full jitter
    /// (a pause anywhere in 0–500 ms) because here the pause is not the point; the key is.
    #[non_idempotent]
    #[retry(
        max = 2,
        base = "500ms",
        jitter = full,
        on = is_transient,
        notify = announce_pause,
        on_give_up = announce_give_up,
    )]
    pub async fn pay_out(
        client: &ContractClient,
        claim: ClaimId,
        amount: Cents,
        key: &IdempotencyKey,
    ) -> Result<Receipt, PayError> {
        // The attempt carries the key parameter, so code below the annotated function (an HTTP
        // layer setting the header, a log line) can reach it without being handed it.
        let now = attempt();
        let sent_key = now.key().map_or("none", IdempotencyKey::as_str);
        println!(
            "    attempt {} at {:5.2} s, {}: {sent_key}",
            now.number(),
            scene_time(),
            IdempotencyKey::HEADER,
        );
        let line = client
            .request(&format!("PAY {claim} {} {key}", amount.0))
            .await
            .map_err(PayError::ConnectionLost)?;
        match line.split_once(' ') {
            Some(("PAID", receipt)) => Ok(Receipt(receipt.to_owned())),
            _ if line == "UNKNOWN_CLAIM" => Err(PayError::InvalidClaim(claim)),
            _ => Err(PayError::Protocol(line)),
        }
    }

    impl fmt::Display for Receipt {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "receipt {}", self.0)
        }
    }

    impl fmt::Display for PayError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                PayError::ConnectionLost(e) => write!(f, "connection lost: {e}"),
                PayError::InvalidClaim(claim) => write!(f, "no claim {claim} on record"),
                PayError::Protocol(line) => write!(f, "unexpected answer {line:?}"),
            }
        }
    }

    impl std::error::Error for PayError {}
}

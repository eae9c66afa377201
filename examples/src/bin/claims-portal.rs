//! The claims portal as a process of its own, for the fault tests (`examples/tests/it/queue_*.rs`),
//! which start it, kill it with `SIGKILL` and start it again on the same database.
//!
//! ```text
//! claims-portal report --database DB --contract ADDR [--pause-at STEP] [--config FILE] CLAIM:EMAIL...
//! claims-portal work   --database DB --contract ADDR [--until-empty] [--lease-ms 30000]
//!                      [--concurrency 2] [--per-second 10] [--backoff-ms 1000]
//!                      [--poll-ms 1000] [--pause-at STEP] [--config FILE]
//! claims-portal rehearse --database DB [--seed N] [--config FILE]
//! ```
//!
//! Both read the portal's retry policies as `cargo run --example portal` does: the shipped
//! `examples/portal.toml`, or `--config FILE`; the first line printed says which.
//!
//! `report` is the form: each customer's claim is checked (20 ms apart, concurrently) with
//! `check_coverage` (whose fallback saves the claim and queues its check), and the customer's
//! answer printed. `work` is the worker that drains the
//! queue of coverage checks. `DB` is a SQLite file or a `postgres://` URL; `ADDR` is where the
//! contract service listens. `--pause-at STEP` stops the process at a crash point (`saving`,
//! `saved`, `claimed`, `answered`, `recorded`) until it is killed.
//!
//! `rehearse` is `cargo run --example portal -- --rehearse`'s storm
//! (`retry_examples::portal::rehearse`), against a contract service of its own, with the policies
//! of `examples/rehearsal.toml` (or `--config FILE`): the tests run it twice with one seed and
//! compare what it printed.

use retry_durable::queue::{Engine, Location, Queue, Worker};
use retry_examples::crash;
use retry_examples::portal::config;
use retry_examples::portal::coverage::{ContractError, check_coverage};
use retry_examples::portal::later::{self, CoverageJob, PortalDb};
use retry_examples::portal::{Claim, ContractClient};
use retry_runtime::{IdempotencyKey, Policy};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage: claims-portal report --database DB --contract ADDR [--pause-at STEP] [--config FILE] CLAIM:EMAIL...
       claims-portal work --database DB --contract ADDR [--until-empty] [--lease-ms N] [--concurrency N] [--per-second N] [--backoff-ms N] [--poll-ms N] [--pause-at STEP] [--config FILE]
       claims-portal rehearse --database DB [--seed N] [--config FILE]";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("claims-portal: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let command = args.next().ok_or(USAGE)?;
    #[cfg(feature = "rehearse")]
    if command == "rehearse" {
        return rehearse(args).await;
    }
    let options = Options::parse(args)?;
    if let Some(step) = &options.pause_at {
        crash::pause_at(step);
    }
    let policies = config::install(options.config.as_deref())?;
    println!("{}", policies.summary());
    // The engine is chosen at run time, by the database's location; the rest is one program
    // generic over it.
    match Location::parse(&options.database).engine() {
        Engine::Sqlite => run_on::<sqlx::Sqlite>(&command, &options).await,
        Engine::Postgres => run_on::<sqlx::Postgres>(&command, &options).await,
    }
}

/// `claims-portal rehearse`: the portal's rehearsal, as `cargo run --example portal --
/// --rehearse` plays it.
#[cfg(feature = "rehearse")]
async fn rehearse(
    mut args: impl Iterator<Item = String>,
) -> Result<(), Box<dyn std::error::Error>> {
    use retry_examples::portal::rehearse::rehearse;
    let (mut database, mut seed, mut file) = (None, None, None);
    while let Some(arg) = args.next() {
        let value = args
            .next()
            .ok_or_else(|| format!("`{arg}` needs a value\n{USAGE}"))?;
        match arg.as_str() {
            "--database" => database = Some(value),
            "--seed" => {
                seed = Some(
                    value
                        .parse::<u64>()
                        .map_err(|e| format!("`--seed {value}`: {e}"))?,
                );
            }
            "--config" => file = Some(PathBuf::from(value)),
            other => return Err(format!("unknown option {other:?}\n{USAGE}").into()),
        }
    }
    let database = database.ok_or_else(|| format!("`--database` is missing\n{USAGE}"))?;
    let policies = config::install_or(
        file.as_deref(),
        config::REHEARSAL,
        "examples/rehearsal.toml (built in)",
    )?;
    println!("{}", policies.summary());
    match Location::parse(&database).engine() {
        Engine::Sqlite => {
            let queue = Queue::<sqlx::Sqlite>::open(&database, later::QUEUE).await?;
            later::migrate(&queue).await?;
            rehearse(&queue, seed).await.map(drop)
        }
        Engine::Postgres => {
            let queue = Queue::<sqlx::Postgres>::open(&database, later::QUEUE).await?;
            later::migrate(&queue).await?;
            rehearse(&queue, seed).await.map(drop)
        }
    }
}

async fn run_on<B: PortalDb>(
    command: &str,
    options: &Options,
) -> Result<(), Box<dyn std::error::Error>> {
    let queue = Queue::<B>::open(&options.database, later::QUEUE).await?;
    later::migrate(&queue).await?;
    let client = ContractClient::new(options.contract);
    match command {
        "report" => report(&client, &queue, &options.claims).await,
        "work" => work(client, queue, options).await,
        _ => Err(format!("unknown command {command:?}\n{USAGE}").into()),
    }
}

/// The form: every claim checked concurrently, 20 ms apart; each customer's answer printed.
async fn report<B: PortalDb>(
    client: &ContractClient,
    queue: &Queue<B>,
    claims: &[Claim],
) -> Result<(), Box<dyn std::error::Error>> {
    let reports = claims.iter().enumerate().map(|(i, claim)| async move {
        tokio::time::sleep(Duration::from_millis(20) * u32::try_from(i).unwrap_or(u32::MAX)).await;
        let key = IdempotencyKey::new();
        let answer = check_coverage(client, queue, claim, &key).await;
        let told = match &answer {
            Ok(coverage) => format!("claim {} is {coverage}", claim.id),
            Err(ContractError::Deferred { job, .. }) => {
                format!("claim {} saved as job {job}, key {key}", claim.id)
            }
            Err(e) => format!("claim {}: {e}", claim.id),
        };
        println!("told: {told}");
    });
    futures_util::future::join_all(reports).await;
    Ok(())
}

async fn work<B: PortalDb>(
    client: ContractClient,
    queue: Queue<B>,
    options: &Options,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut worker = Worker::new(&format!("claims-portal-{}", std::process::id()))
        .concurrency(options.concurrency)
        .per_second(options.per_second)
        .lease(options.lease)
        .poll(options.poll)
        .backoff(
            Policy::new()
                .base(options.backoff)
                .max_delay(options.backoff * 64),
        )
        .breaker(config::contract_breaker())
        .on_recorded(|job| crash::point_blocking("recorded", &format!("job {job}")));
    if options.until_empty {
        worker = worker.until_empty();
    }
    let handler_queue = queue.clone();
    let drained = worker
        .run(
            &queue,
            move |job: retry_durable::queue::Job<CoverageJob>| {
                later::check_later(client.clone(), handler_queue.clone(), job)
            },
        )
        .await?;
    println!("drained: {drained:?}");
    Ok(())
}

struct Options {
    database: String,
    contract: SocketAddr,
    pause_at: Option<String>,
    config: Option<PathBuf>,
    until_empty: bool,
    lease: Duration,
    concurrency: usize,
    per_second: f64,
    backoff: Duration,
    poll: Duration,
    claims: Vec<Claim>,
}

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut database = None;
        let mut contract = None;
        let mut options = Options {
            database: String::new(),
            contract: SocketAddr::from(([127, 0, 0, 1], 0)),
            pause_at: None,
            config: None,
            until_empty: false,
            lease: Duration::from_secs(30),
            concurrency: 2,
            per_second: 10.0,
            backoff: Duration::from_secs(1),
            poll: Duration::from_secs(1),
            claims: Vec::new(),
        };
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .ok_or_else(|| format!("`{name}` needs a value\n{USAGE}"))
            };
            let millis = |text: String, name: &str| {
                text.parse()
                    .map(Duration::from_millis)
                    .map_err(|e| format!("`{name} {text}`: {e}"))
            };
            match arg.as_str() {
                "--database" => database = Some(value("--database")?),
                "--contract" => {
                    let text = value("--contract")?;
                    contract = Some(
                        text.parse()
                            .map_err(|e| format!("`--contract {text}`: {e}"))?,
                    );
                }
                "--pause-at" => options.pause_at = Some(value("--pause-at")?),
                "--config" => options.config = Some(PathBuf::from(value("--config")?)),
                "--until-empty" => options.until_empty = true,
                "--lease-ms" => options.lease = millis(value("--lease-ms")?, "--lease-ms")?,
                "--backoff-ms" => options.backoff = millis(value("--backoff-ms")?, "--backoff-ms")?,
                "--poll-ms" => options.poll = millis(value("--poll-ms")?, "--poll-ms")?,
                "--concurrency" => {
                    let text = value("--concurrency")?;
                    options.concurrency = text
                        .parse()
                        .map_err(|e| format!("`--concurrency {text}`: {e}"))?;
                }
                "--per-second" => {
                    let text = value("--per-second")?;
                    options.per_second = text
                        .parse()
                        .map_err(|e| format!("`--per-second {text}`: {e}"))?;
                }
                claim if !claim.starts_with("--") => {
                    let (id, email) = claim
                        .split_once(':')
                        .ok_or_else(|| format!("a claim is `NUMBER:EMAIL`, not {claim:?}"))?;
                    let id = id.parse().map_err(|e| format!("claim {claim:?}: {e}"))?;
                    options.claims.push(Claim::new(id, email));
                }
                other => return Err(format!("unknown option {other:?}\n{USAGE}")),
            }
        }
        options.database = database.ok_or_else(|| format!("`--database` is missing\n{USAGE}"))?;
        options.contract = contract.ok_or_else(|| format!("`--contract` is missing\n{USAGE}"))?;
        Ok(options)
    }
}

//! A payout over real HTTP, on a real database: an `axum` payment service that keeps its
//! responses by idempotency key and its ledger in the same database, a bank it pays through,
//! and a `reqwest` client whose `#[retry]` sends the same key on every attempt.
//!
//! ```text
//! cargo run --example payments                                         # a SQLite file
//! cargo run --example payments -- --database-url postgres://user@host/db   # or DATABASE_URL
//! ```
//!
//! Without a URL the database is a SQLite file in the temp dir (its path is printed first), so
//! the example needs no server. The service runs as a process of its own (this program started
//! again with `--serve`), as it would in production, so that scenes 5 and 6 can kill it with
//! SIGKILL and start it again on the same database. Seven scenes, in about four seconds:
//!
//! 1. The response to a payout is lost: the service pays, commits, and closes the connection
//!    without answering. The client retries with the same key and gets the stored receipt; the
//!    ledger holds the payout once.
//! 2. The customer clicks "pay" twice. The second click's request arrives while the first is
//!    still at the bank and gets 409 with `Retry-After: 1`; it is retried as a passing failure
//!    and then gets the stored receipt.
//! 3. The same key for a different amount: 422, a mistake that waiting will not fix, so it is
//!    not retried.
//! 4. A request without a key: 400.
//! 5. The service is killed after the commit, before it answers, and started again: the key
//!    is in the database, so the client's retry gets the stored receipt.
//! 6. The service is killed in the middle of a payout: the bank has paid and the ledger row is
//!    written, but not committed. The row is rolled back with the transaction; the key stays
//!    claimed until its lease ends (one second here, a minute by default), and the client's
//!    retry then executes the payout again. The bank gets the same key again and answers with
//!    the first transfer: one payout in the ledger, one transfer at the bank.
//! 7. Two replicas share the database: the first attempt is paid by one, its response lost,
//!    and the retry lands on the other, which answers with the stored receipt.
//!
//! The service is [`retry_examples::payments::service`]; the client and the bank are next to it.

use retry_examples::payments::bank::Bank;
use retry_examples::payments::client::{
    PayClient, PayError, outcome, pay_out, pay_out_without_key,
};
use retry_examples::payments::faults::Step;
use retry_examples::payments::process::ServiceProcess;
use retry_examples::payments::service::{self, Config, Database, LedgerRow, read_ledger};
use retry_examples::payments::{Cents, ClaimId};
use retry_runtime::IdempotencyKey;
use std::error::Error;
use std::net::SocketAddr;
use std::time::Duration;

const STORM_ROOF: ClaimId = ClaimId(4711);
const STORM_FENCE: ClaimId = ClaimId(4712);
const STORM_SHED: ClaimId = ClaimId(4713);
const STORM_CAR: ClaimId = ClaimId(4714);
const STORM_GARDEN: ClaimId = ClaimId(4715);

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--serve") {
        // This is the child: the service itself.
        return service::run(Config::from_args(args.skip(1))?).await;
    }
    let database = database(args)?;
    println!("Database: {database}");
    let bank = Bank::start(Duration::ZERO).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let config = Config {
        database: database.clone(),
        bank: Some(bank.url().to_owned()),
        lease: Duration::from_secs(1),
        ..Config::default()
    };
    let mut paid = Vec::new();

    scene("1", "the response to a payout is lost");
    let lossy = Config {
        lose_first_response: true,
        ..config.clone()
    };
    let service = start(&lossy).await?;
    println!(
        "  payment service at {}, bank at {}",
        service.url(),
        bank.url()
    );
    let portal = PayClient::new("portal", &http, service.url());
    let key = IdempotencyKey::new(); // once per payout, before the first attempt
    let amount = Cents(125_000);
    println!("  portal: paying {amount} for claim {STORM_ROOF} with key {key}");
    let receipt = pay_out(&portal, STORM_ROOF, amount, &key).await?;
    println!("  portal: paid, {receipt}");
    assert_eq!(portal.attempts(), 2, "one lost response, one retry");
    paid_once(&database, &bank, &key, &mut paid).await?;

    scene(
        "2",
        "a second click while the first payout is still at the bank",
    );
    bank.slow_next_transfer(Duration::from_millis(300));
    let key = IdempotencyKey::new(); // the form's key: both clicks send it
    let amount = Cents(48_000);
    println!("  paying {amount} for claim {STORM_FENCE} with key {key}");
    let first = PayClient::new("click 1", &http, service.url());
    let second = PayClient::new("click 2", &http, service.url());
    let (first_receipt, second_receipt) =
        tokio::join!(pay_out(&first, STORM_FENCE, amount, &key), async {
            // Sent once the first request is at the bank, so that it finds the key claimed.
            bank.transfer_started().await;
            pay_out(&second, STORM_FENCE, amount, &key).await
        });
    let (first_receipt, second_receipt) = (first_receipt?, second_receipt?);
    println!("  click 1 got {first_receipt}, click 2 got {second_receipt}");
    assert_eq!(first_receipt, second_receipt);
    assert_eq!((first.attempts(), second.attempts()), (1, 2));
    paid_once(&database, &bank, &key, &mut paid).await?;

    scene("3", "the same key for a different amount");
    let other_amount = Cents(990_000);
    println!("  paying {other_amount} for claim {STORM_FENCE} with the key of scene 2");
    let reused = PayClient::new("portal", &http, service.url());
    let answer = pay_out(&reused, STORM_FENCE, other_amount, &key).await;
    println!("  portal: not paid: {}", outcome(&answer));
    assert!(matches!(answer, Err(PayError::KeyReused)));
    assert_eq!(reused.attempts(), 1, "a 422 is not worth a retry");

    scene("4", "an old client that sends no key");
    let answer = pay_out_without_key(&http, service.url(), STORM_ROOF, amount).await;
    println!("  old client: {}", outcome(&answer));
    assert!(matches!(
        answer,
        Err(PayError::Rejected { status: 400, .. })
    ));
    service.kill()?;

    scene(
        "5",
        "the service is killed after the commit, before it answers",
    );
    let key = IdempotencyKey::new();
    let amount = Cents(23_000);
    let (receipt, portal) =
        pay_through_a_crash(&config, Step::AfterCommit, STORM_SHED, amount, &key, &http).await?;
    println!("  portal: paid, {receipt}");
    assert!(portal.attempts() >= 2, "no answer from the killed service");
    paid_once(&database, &bank, &key, &mut paid).await?;

    scene(
        "6",
        "the service is killed after the ledger write, before the commit",
    );
    let key = IdempotencyKey::new();
    let amount = Cents(310_000);
    let (receipt, _) = pay_through_a_crash(
        &config,
        Step::AfterLedgerWrite,
        STORM_CAR,
        amount,
        &key,
        &http,
    )
    .await?;
    println!("  portal: paid, {receipt}");
    let row = paid_once(&database, &bank, &key, &mut paid).await?;
    assert_eq!(row.entry.execution, 2, "executed again after the lease");
    assert_eq!(bank.requests(key.as_str()), 2, "the bank was asked twice");

    scene(
        "7",
        "two replicas share the database; the retry lands on the other",
    );
    let replica_a = start(&Config {
        name: "replica a".to_owned(),
        lose_first_response: true,
        ..config.clone()
    })
    .await?;
    let replica_b = start(&Config {
        name: "replica b".to_owned(),
        ..config.clone()
    })
    .await?;
    let balanced = PayClient::replicas("portal", &http, &[replica_a.url(), replica_b.url()]);
    let key = IdempotencyKey::new();
    let amount = Cents(7_500);
    println!(
        "  paying {amount} for claim {STORM_GARDEN}; attempts go to {} and {} in turn",
        replica_a.url(),
        replica_b.url()
    );
    let receipt = pay_out(&balanced, STORM_GARDEN, amount, &key).await?;
    println!("  portal: paid, {receipt}");
    assert_eq!(balanced.attempts(), 2);
    paid_once(&database, &bank, &key, &mut paid).await?;
    replica_a.kill()?;
    replica_b.kill()?;

    println!(
        "\n{} payouts for {} keys, each in the ledger once and transferred by the bank once.",
        paid.len(),
        paid.len()
    );
    Ok(())
}

/// `--database-url URL`, else `DATABASE_URL`, else a SQLite file in the temp dir.
fn database(mut args: impl Iterator<Item = String>) -> Result<Database, String> {
    let usage = "usage: cargo run --example payments [-- --database-url URL]";
    match (args.next().as_deref(), args.next(), args.next()) {
        (None, ..) => match std::env::var("DATABASE_URL") {
            Ok(url) => url.parse(),
            Err(_) => Ok(Database::default_sqlite()),
        },
        (Some("--database-url"), Some(url), None) => url.parse(),
        _ => Err(usage.to_owned()),
    }
}

/// Starts the service as a child process (this program with `--serve`), echoing its lines.
async fn start(config: &Config) -> std::io::Result<ServiceProcess> {
    let program = std::env::current_exe()?;
    ServiceProcess::start(&program, &["--serve"], config, true).await
}

/// Pays while the service is told to stop at `step`; kills it there with SIGKILL and starts it
/// again on the same port and database, while the client's `#[retry]` keeps trying.
async fn pay_through_a_crash(
    config: &Config,
    step: Step,
    claim: ClaimId,
    amount: Cents,
    key: &IdempotencyKey,
    http: &reqwest::Client,
) -> Result<(retry_examples::payments::Receipt, PayClient), Box<dyn Error>> {
    let mut service = start(&Config {
        stop_at: Some(step),
        ..config.clone()
    })
    .await?;
    let portal = PayClient::new("portal", http, service.url());
    let same_port = SocketAddr::from(([127, 0, 0, 1], service.port()));
    println!("  portal: paying {amount} for claim {claim} with key {key}");
    let crash_and_restart = async {
        let stopped = service.stopped().await?;
        println!("  the service stopped {stopped}: killed with SIGKILL, and started again");
        service.kill()?;
        start(&Config {
            listen: same_port,
            ..config.clone()
        })
        .await
    };
    let (receipt, restarted) =
        tokio::join!(pay_out(&portal, claim, amount, key), crash_and_restart);
    let restarted = restarted?;
    let receipt = receipt?;
    restarted.kill()?;
    Ok((receipt, portal))
}

/// Checks that `key` was paid once: one ledger row, one bank transfer.
async fn paid_once(
    database: &Database,
    bank: &Bank,
    key: &IdempotencyKey,
    paid: &mut Vec<IdempotencyKey>,
) -> Result<LedgerRow, Box<dyn Error>> {
    let rows: Vec<LedgerRow> = read_ledger(database)
        .await?
        .into_iter()
        .filter(|row| row.entry.key == key.as_str())
        .collect();
    let transfers = bank.transfers_executed(key.as_str());
    assert_eq!(rows.len(), 1, "the ledger holds the payout once: {rows:?}");
    assert_eq!(transfers, 1, "the bank transferred once");
    println!(
        "  the ledger holds this payout once (row P-{}), the bank transferred once",
        rows[0].id
    );
    paid.push(key.clone());
    Ok(rows.into_iter().next().ok_or("no row")?)
}

fn scene(number: &str, title: &str) {
    println!("\nScene {number}: {title}");
}

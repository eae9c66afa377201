//! A claims portal that asks a contract service about storm claims, with `#[retry]` deciding
//! when to ask again.
//!
//! ```text
//! cargo run --example portal
//! ```
//!
//! The run takes about fifteen seconds, because the pauses are real. Four scenes:
//!
//! 1. The contract service is overloaded for a moment: it answers "overloaded" to the first two
//!    coverage checks, and the third attempt, after pauses of about 1 s and 2 s, gets "covered".
//! 2. The service stays overloaded: after 4 calls the portal gives up and tells the customer that
//!    the check is not possible right now. It never says "not covered", because that is a
//!    business answer, and the service never gave it.
//! 3. A claim that is not covered: the answer is an `Ok`, so it is returned after one call.
//! 4. A payout whose response is lost on the way back. The retry carries the same
//!    [`IdempotencyKey`], the service recognises it and answers with the stored receipt, and the
//!    claim is paid exactly once.
//!
//! What the output shows comes from the runtime, not from bookkeeping of the portal's own: each
//! attempt prints its number from [`retry_runtime::attempt()`], and the `notify` hook announces
//! each pause, with the jitter already drawn, before the pause is taken.
//!
//! The contract service is a stand-in written with plain tokio: a `TcpListener` on a loopback
//! port and a one-line protocol, in [`contract_service`]. It counts the requests it gets, which
//! is what the asserts check. Everything that a real portal would contain is in [`coverage`] and
//! [`payout`].

use retry_runtime::{IdempotencyKey, RetryEvent};
use std::error::Error;
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use contract_client::ContractClient;
use contract_service::ContractService;
use coverage::{ContractError, Coverage, check_coverage};
use payout::pay_out;

/// The claims in the contract service's records.
const STORM_ROOF: ClaimId = ClaimId(4711); // storm damage to a roof: covered
const STORM_FENCE: ClaimId = ClaimId(4712); // storm damage to a fence: covered
const GARDEN_SHED: ClaimId = ClaimId(4713); // a shed the policy does not include: not covered

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
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
    println!("  is claim {STORM_ROOF} covered? (at most 4 calls, pauses of about 1 s, 2 s, 4 s)");
    let answer = check_coverage(&client, STORM_ROOF).await;
    tell_customer(STORM_ROOF, &answer);
    assert!(matches!(answer, Ok(Coverage::Covered)));
    // Two "overloaded", then the answer.
    assert_eq!(service.coverage_checks(STORM_ROOF).await, 3);

    scene("2", "the storm goes on: the service stays overloaded");
    service.overload_next_checks(u32::MAX).await;
    println!("  is claim {STORM_FENCE} covered?");
    let answer = check_coverage(&client, STORM_FENCE).await;
    tell_customer(STORM_FENCE, &answer);
    // `max = 3`: the first call and three retries, then the last error, unchanged.
    assert!(matches!(answer, Err(ContractError::Overloaded)));
    assert_eq!(service.coverage_checks(STORM_FENCE).await, 4);
    service.overload_next_checks(0).await;

    scene("3", "a claim that is not covered");
    println!("  is claim {GARDEN_SHED} covered?");
    let answer = check_coverage(&client, GARDEN_SHED).await;
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
    Ok(())
}

/// When the current scene began. The attempts print their time from it, so that the output
/// shows the pauses as they were really taken, next to the pauses `notify` announced.
static SCENE_STARTED: Mutex<Option<Instant>> = Mutex::new(None);

fn scene(number: &str, title: &str) {
    println!("\nScene {number}: {title}");
    *SCENE_STARTED.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
}

/// Seconds since [`scene`] was last called.
fn scene_time() -> f64 {
    let started = *SCENE_STARTED.lock().unwrap_or_else(PoisonError::into_inner);
    started.map_or(0.0, |started| started.elapsed().as_secs_f64())
}

/// The `notify` hook of both retried functions. The loop calls it after a transient failure and
/// before the pause, so the line appears while the portal waits, and the pause it names is the
/// one about to be taken, jitter included.
fn announce_pause<E: fmt::Display>(error: &E, event: &RetryEvent) {
    println!(
        "      {error} (transient); next attempt in {:.2} s",
        event.pause.as_secs_f64()
    );
}

/// The `on_give_up` hook: the last attempt failed transiently and no retry is left. The error
/// itself goes back to the caller unchanged; this line only tells the story.
fn announce_give_up<E: fmt::Display>(error: &E) {
    println!("      {error} (transient); no retries left, giving up");
}

/// What the customer reads. The match is the point of the whole design: "not covered" can only
/// come from an `Ok`, so an outage can never be mistaken for a refusal.
fn tell_customer(claim: ClaimId, answer: &Result<Coverage, ContractError>) {
    let message = match answer {
        Ok(Coverage::Covered) => format!("Claim {claim} is covered; we will arrange the payout."),
        Ok(Coverage::NotCovered) => format!("Claim {claim} is not covered by your policy."),
        Err(e) if coverage::is_transient(e) => {
            "The coverage check is not possible right now; your details are saved.".to_owned()
        }
        Err(e) => format!("We cannot check claim {claim}: {e}."),
    };
    println!("  Portal: {message}");
}

/// A claim number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClaimId(u32);

impl fmt::Display for ClaimId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An amount of money in euro cents, so that no payout is ever rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cents(u64);

impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EUR {}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// The portal's question: does the policy cover this claim?
mod coverage {
    use super::{ClaimId, announce_give_up, announce_pause, scene_time};
    use crate::contract_client::ContractClient;
    use retry_runtime::{attempt, retry};
    use std::{fmt, io};

    /// The service's answer. Both variants are answers, so both are `Ok`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Coverage {
        Covered,
        NotCovered,
    }

    /// Why there is no answer.
    #[derive(Debug)]
    pub enum ContractError {
        /// The service is busy and said so: worth another try.
        Overloaded,
        /// The connection broke before the answer arrived: worth another try.
        ConnectionLost(io::Error),
        /// The service does not know the claim. Asking again will not change that.
        InvalidClaim(ClaimId),
        /// The service answered something this portal does not understand. Nor that.
        Protocol(String),
    }

    /// The `on = ...` of [`check_coverage`]: which errors pass by themselves.
    pub fn is_transient(error: &ContractError) -> bool {
        matches!(
            error,
            ContractError::Overloaded | ContractError::ConnectionLost(_)
        )
    }

    /// Asks the contract service whether `claim` is covered: `COVERAGE 4711` over the wire,
    /// answered by one line.
    ///
    /// Up to 3 retries, so at most 4 calls, with pauses of about 1 s, 2 s and 4 s, each
    /// lengthened by up to half at random so that portals that failed together do not come back
    /// together.
    #[retry(
        max = 3,
        base = "1s",
        jitter,
        on = is_transient,
        notify = announce_pause,
        on_give_up = announce_give_up,
    )]
    pub async fn check_coverage(
        client: &ContractClient,
        claim: ClaimId,
    ) -> Result<Coverage, ContractError> {
        // The body runs once per attempt; the runtime tells it which one this is.
        println!(
            "    attempt {} at {:5.2} s",
            attempt().number(),
            scene_time()
        );
        // `?` ends this attempt, not the call: a lost connection is retried like "overloaded".
        let line = client
            .request(&format!("COVERAGE {claim}"))
            .await
            .map_err(ContractError::ConnectionLost)?;
        match line.as_str() {
            "COVERED" => Ok(Coverage::Covered),
            "NOT_COVERED" => Ok(Coverage::NotCovered),
            "OVERLOADED" => Err(ContractError::Overloaded),
            "UNKNOWN_CLAIM" => Err(ContractError::InvalidClaim(claim)),
            _ => Err(ContractError::Protocol(line)),
        }
    }

    impl fmt::Display for Coverage {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(match self {
                Coverage::Covered => "covered",
                Coverage::NotCovered => "not covered",
            })
        }
    }

    impl fmt::Display for ContractError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                ContractError::Overloaded => f.write_str("the contract service is overloaded"),
                ContractError::ConnectionLost(e) => write!(f, "connection lost: {e}"),
                ContractError::InvalidClaim(claim) => write!(f, "no claim {claim} on record"),
                ContractError::Protocol(line) => write!(f, "unexpected answer {line:?}"),
            }
        }
    }

    impl std::error::Error for ContractError {}
}

/// The portal's payout: a call that changes state, so a repeat must not pay twice.
mod payout {
    use super::{Cents, ClaimId, announce_give_up, announce_pause, scene_time};
    use crate::contract_client::ContractClient;
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

/// The portal's side of the wire: one connection per request, one line each way.
mod contract_client {
    use std::io;
    use std::net::SocketAddr;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::TcpStream;

    pub struct ContractClient {
        addr: SocketAddr,
    }

    impl ContractClient {
        pub fn new(addr: SocketAddr) -> Self {
            Self { addr }
        }

        /// Sends one request line and reads one answer line.
        pub async fn request(&self, request: &str) -> io::Result<String> {
            let mut stream = TcpStream::connect(self.addr).await?;
            stream.write_all(format!("{request}\n").as_bytes()).await?;
            let mut answer = String::new();
            if BufReader::new(stream).read_line(&mut answer).await? == 0 {
                // The service closed the connection without a word: the request may or may not
                // have been carried out, which is exactly the case an idempotency key is for.
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "closed without an answer",
                ));
            }
            Ok(answer.trim_end().to_owned())
        }
    }
}

/// A stand-in for the insurer's contract service, on a loopback port.
///
/// The protocol: the client connects, sends one line, reads one line, and the connection ends.
///
/// - `COVERAGE <claim>` is answered `COVERED`, `NOT_COVERED`, `OVERLOADED` or `UNKNOWN_CLAIM`.
/// - `PAY <claim> <cents> <key>` is answered `PAID <receipt>` or `UNKNOWN_CLAIM`, or not at all
///   when the response is lost.
/// - Anything else is answered `BAD_REQUEST`.
///
/// It counts what arrives, so that `main` can check the number of attempts from the receiving
/// end, where a retry that should not have happened would show.
mod contract_service {
    use super::{ClaimId, GARDEN_SHED, STORM_FENCE, STORM_ROOF};
    use std::collections::HashMap;
    use std::io;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::Mutex;

    /// The handle `main` keeps: where the service listens, knobs to make it misbehave, and
    /// its counts.
    pub struct ContractService {
        addr: SocketAddr,
        state: Arc<Mutex<State>>,
    }

    #[derive(Default)]
    struct State {
        /// How many of the next coverage checks to answer with `OVERLOADED`.
        overloaded_checks: u32,
        /// Whether to close the connection instead of answering the next new payout.
        lose_next_payout_response: bool,
        /// Receipts by idempotency key: a repeat gets the stored receipt, not a second payout.
        receipts: HashMap<String, String>,
        /// Coverage checks received, per claim, whatever the answer.
        coverage_checks: HashMap<ClaimId, u32>,
        payout_requests: u32,
        payouts_executed: u32,
    }

    impl ContractService {
        /// Listens on a free loopback port and serves in a background task.
        pub async fn start() -> io::Result<Self> {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            let addr = listener.local_addr()?;
            let state = Arc::new(Mutex::new(State::default()));
            tokio::spawn(serve(listener, Arc::clone(&state)));
            Ok(Self { addr, state })
        }

        pub fn addr(&self) -> SocketAddr {
            self.addr
        }

        pub async fn overload_next_checks(&self, count: u32) {
            self.state.lock().await.overloaded_checks = count;
        }

        pub async fn lose_next_payout_response(&self) {
            self.state.lock().await.lose_next_payout_response = true;
        }

        pub async fn coverage_checks(&self, claim: ClaimId) -> u32 {
            let state = self.state.lock().await;
            state.coverage_checks.get(&claim).copied().unwrap_or(0)
        }

        pub async fn payout_requests(&self) -> u32 {
            self.state.lock().await.payout_requests
        }

        pub async fn payouts_executed(&self) -> u32 {
            self.state.lock().await.payouts_executed
        }
    }

    async fn serve(listener: TcpListener, state: Arc<Mutex<State>>) {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let state = Arc::clone(&state);
                    tokio::spawn(async move {
                        if let Err(e) = handle(stream, &state).await {
                            eprintln!("    [service] connection failed: {e}");
                        }
                    });
                }
                // Running out of file descriptors, for instance: the next accept may succeed.
                Err(e) => eprintln!("    [service] accept failed: {e}"),
            }
        }
    }

    async fn handle(stream: TcpStream, state: &Mutex<State>) -> io::Result<()> {
        let mut stream = BufReader::new(stream);
        let mut request = String::new();
        stream.read_line(&mut request).await?;
        let words: Vec<&str> = request.split_whitespace().collect();
        let answer = match words.as_slice() {
            ["COVERAGE", claim] => coverage(&mut *state.lock().await, claim),
            ["PAY", claim, cents, key] => pay(&mut *state.lock().await, claim, cents, key),
            _ => Some("BAD_REQUEST".to_owned()),
        };
        match answer {
            Some(answer) => stream.write_all(format!("{answer}\n").as_bytes()).await,
            // Dropping the stream closes the connection without a word.
            None => Ok(()),
        }
    }

    fn coverage(state: &mut State, claim: &str) -> Option<String> {
        let claim = parse_claim(claim);
        if let Some(claim) = claim {
            *state.coverage_checks.entry(claim).or_default() += 1;
        }
        if state.overloaded_checks > 0 {
            state.overloaded_checks -= 1;
            return Some("OVERLOADED".to_owned());
        }
        let answer = match claim {
            Some(STORM_ROOF | STORM_FENCE) => "COVERED",
            Some(GARDEN_SHED) => "NOT_COVERED",
            _ => "UNKNOWN_CLAIM",
        };
        Some(answer.to_owned())
    }

    /// `None` means: close the connection instead of answering.
    fn pay(state: &mut State, claim: &str, cents: &str, key: &str) -> Option<String> {
        state.payout_requests += 1;
        if let Some(receipt) = state.receipts.get(key) {
            println!(
                "      [service] key seen before: answering with the stored {receipt}, paying nothing"
            );
            return Some(format!("PAID {receipt}"));
        }
        if !matches!(parse_claim(claim), Some(STORM_ROOF | STORM_FENCE)) {
            return Some("UNKNOWN_CLAIM".to_owned());
        }
        state.payouts_executed += 1;
        let receipt = format!("R-{}", state.payouts_executed);
        println!("      [service] payout of {cents} cents for claim {claim} executed ({receipt})");
        state.receipts.insert(key.to_owned(), receipt.clone());
        if std::mem::take(&mut state.lose_next_payout_response) {
            println!("      [service] ...and the response is lost on the way back");
            return None;
        }
        Some(format!("PAID {receipt}"))
    }

    fn parse_claim(claim: &str) -> Option<ClaimId> {
        claim.parse().ok().map(ClaimId)
    }
}

//! The wire between the portal and the insurer's contract service, and a stand-in for the
//! service on a loopback port.
//!
//! The protocol: the client connects, sends one line, reads one line, and the connection ends.
//!
//! - `COVERAGE <claim> <key>` is answered `COVERED`, `NOT_COVERED`, `UNKNOWN_CLAIM`,
//!   `OVERLOADED`, `BUSY` (the same key is being checked right now) or `KEY_REUSED` (the key was
//!   used for another claim).
//! - `PAY <claim> <cents> <key>` is answered `PAID <receipt>` or `UNKNOWN_CLAIM`, or not at all
//!   when the response is lost.
//! - Anything else is answered `BAD_REQUEST`.
//!
//! A coverage check is recorded by the service (it opens the claim's case file), so it carries
//! an idempotency key too: the service keeps its answers by key in an
//! [`IdempotencyStore`](retry_durable::store::IdempotencyStore), executes each key once and
//! answers a repeat with the stored answer.

use super::ClaimId;
use retry_durable::store::{Begin, Fingerprint, IdempotencyStore, MemoryStore};
use retry_runtime::IdempotencyKey;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Mutex, Notify};

/// The portal's side of the wire: one connection per request, one line each way.
#[derive(Clone, Debug)]
pub struct ContractClient {
    addr: SocketAddr,
}

impl ContractClient {
    /// A client of the service at `addr`.
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

/// What the service's records say about a claim.
pub fn record(claim: ClaimId) -> Option<&'static str> {
    match claim.0 {
        // Storm damage to a shed and a greenhouse the policies do not include.
        4713 | 4717 => Some("NOT_COVERED"),
        // Storm damage to roofs, fences, windows: covered.
        4711..=4730 => Some("COVERED"),
        _ => None,
    }
}

/// The stand-in service: where it listens, knobs to make it misbehave, and its counts, which
/// the example and the tests check from the receiving end, where a repeat that should not have
/// happened would show.
#[derive(Clone, Debug)]
pub struct ContractService {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    hold: Arc<Hold>,
}

#[derive(Debug, Default)]
struct State {
    /// How many of the next coverage checks to answer `OVERLOADED`.
    overloaded_checks: u32,
    /// Whether to close the connection instead of answering the next new payout.
    lose_next_payout_response: bool,
    /// Whether the next executed coverage check waits for [`ContractService::release`].
    hold_next_check: bool,
    /// Receipts by idempotency key: a repeat gets the stored receipt, not a second payout.
    receipts: HashMap<String, String>,
    /// Coverage requests received, per claim, whatever the answer.
    coverage_checks: HashMap<ClaimId, u32>,
    /// Coverage requests received, per key, whatever the answer.
    requests_by_key: HashMap<String, u32>,
    /// Coverage checks executed (recorded in the case file), per key.
    executed_by_key: HashMap<String, u32>,
    payout_requests: u32,
    payouts_executed: u32,
}

#[derive(Debug, Default)]
struct Hold {
    started: Notify,
    release: Notify,
}

impl ContractService {
    /// Listens on a free loopback port and serves in a background task.
    pub async fn start() -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let service = ContractService {
            addr,
            state: Arc::new(Mutex::new(State::default())),
            hold: Arc::new(Hold::default()),
        };
        // Answers by key, for as long as the service runs: one process, not restarted here.
        let answers = Arc::new(MemoryStore::<String>::new());
        tokio::spawn(serve(listener, service.clone(), answers));
        Ok(service)
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers the next `count` coverage checks `OVERLOADED` (`u32::MAX`: until told otherwise).
    pub async fn overload_next_checks(&self, count: u32) {
        self.state.lock().await.overloaded_checks = count;
    }

    /// Closes the connection instead of answering the next new payout.
    pub async fn lose_next_payout_response(&self) {
        self.state.lock().await.lose_next_payout_response = true;
    }

    /// The next coverage check that executes waits, after its key is claimed and before it is
    /// recorded, until [`release`](ContractService::release): for a test that kills the caller
    /// in the middle of a call.
    pub async fn hold_next_check(&self) {
        self.state.lock().await.hold_next_check = true;
    }

    /// Waits until a held check has started.
    pub async fn held_check_started(&self) {
        self.hold.started.notified().await;
    }

    /// Lets a held check go on.
    pub fn release(&self) {
        self.hold.release.notify_one();
    }

    /// Coverage requests received for `claim`, whatever the answer.
    pub async fn coverage_checks(&self, claim: ClaimId) -> u32 {
        let state = self.state.lock().await;
        state.coverage_checks.get(&claim).copied().unwrap_or(0)
    }

    /// Coverage requests received with `key`, whatever the answer.
    pub async fn requests(&self, key: &str) -> u32 {
        let state = self.state.lock().await;
        state.requests_by_key.get(key).copied().unwrap_or(0)
    }

    /// Coverage checks executed with `key`: at most one, whatever the repeats.
    pub async fn executions(&self, key: &str) -> u32 {
        let state = self.state.lock().await;
        state.executed_by_key.get(key).copied().unwrap_or(0)
    }

    /// Coverage checks executed, all keys.
    pub async fn total_executions(&self) -> u32 {
        self.state.lock().await.executed_by_key.values().sum()
    }

    /// Payout requests received.
    pub async fn payout_requests(&self) -> u32 {
        self.state.lock().await.payout_requests
    }

    /// Payouts executed.
    pub async fn payouts_executed(&self) -> u32 {
        self.state.lock().await.payouts_executed
    }
}

async fn serve(listener: TcpListener, service: ContractService, answers: Arc<MemoryStore<String>>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let service = service.clone();
                let answers = Arc::clone(&answers);
                tokio::spawn(async move {
                    if let Err(e) = handle(stream, &service, &answers).await {
                        eprintln!("    [service] connection failed: {e}");
                    }
                });
            }
            // Running out of file descriptors, for instance: the next accept may succeed.
            Err(e) => eprintln!("    [service] accept failed: {e}"),
        }
    }
}

async fn handle(
    stream: TcpStream,
    service: &ContractService,
    answers: &MemoryStore<String>,
) -> io::Result<()> {
    let mut stream = BufReader::new(stream);
    let mut request = String::new();
    stream.read_line(&mut request).await?;
    let words: Vec<&str> = request.split_whitespace().collect();
    let answer = match words.as_slice() {
        ["COVERAGE", claim, key] => Some(coverage(service, answers, claim, key).await),
        ["PAY", claim, cents, key] => pay(&mut *service.state.lock().await, claim, cents, key),
        _ => Some("BAD_REQUEST".to_owned()),
    };
    match answer {
        Some(answer) => stream.write_all(format!("{answer}\n").as_bytes()).await,
        // Dropping the stream closes the connection without a word.
        None => Ok(()),
    }
}

async fn coverage(
    service: &ContractService,
    answers: &MemoryStore<String>,
    claim: &str,
    key: &str,
) -> String {
    let claim = claim.parse().ok().map(ClaimId);
    let hold = {
        let mut state = service.state.lock().await;
        if let Some(claim) = claim {
            *state.coverage_checks.entry(claim).or_default() += 1;
        }
        *state.requests_by_key.entry(key.to_owned()).or_default() += 1;
        if state.overloaded_checks > 0 {
            state.overloaded_checks -= 1;
            return "OVERLOADED".to_owned();
        }
        std::mem::take(&mut state.hold_next_check)
    };
    let key = IdempotencyKey::from(key);
    let fingerprint = Fingerprint::of(claim.map_or(0, |c| c.0).to_string().as_bytes());
    match answers.begin(&key, fingerprint).await {
        Ok(Begin::Execute(guard)) => {
            if hold {
                service.hold.started.notify_one();
                service.hold.release.notified().await;
            }
            let answer = claim.and_then(record).unwrap_or("UNKNOWN_CLAIM").to_owned();
            // The check is recorded and its answer kept under the key, together.
            *service
                .state
                .lock()
                .await
                .executed_by_key
                .entry(key.to_string())
                .or_default() += 1;
            match guard.complete(&answer).await {
                Ok(()) => answer,
                Err(e) => {
                    eprintln!("    [service] cannot keep the answer for key {key}: {e}");
                    "BUSY".to_owned()
                }
            }
        }
        Ok(Begin::Replay(answer)) => answer,
        Ok(Begin::InProgress) => "BUSY".to_owned(),
        Ok(Begin::Mismatch) => "KEY_REUSED".to_owned(),
        Ok(_) | Err(_) => "BUSY".to_owned(),
    }
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
    if claim
        .parse()
        .ok()
        .map(ClaimId)
        .and_then(record)
        .is_none_or(|answer| answer != "COVERED")
    {
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

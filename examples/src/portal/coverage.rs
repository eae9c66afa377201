//! The portal's question: does the policy cover this claim? One `#[retry]` function asks it,
//! for the customer at the form and for the worker that drains the queue alike.

use super::later::{PortalDb, save_for_later};
use super::story::{announce_give_up, announce_pause, scene_time};
use super::{Claim, ClaimId, ContractClient};
use retry_durable::queue::{JobId, Queue};
use retry_runtime::{
    CircuitBreaker, CircuitOpen, GiveUp, IdempotencyKey, RetryBudget, attempt, non_idempotent,
    retry,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use std::{fmt, io};

/// The retries of coverage checks, from every customer and the worker together: at most a tenth
/// of the first calls, plus a reserve of 10 a second (the defaults).
/// `coverage` in the metrics. The default of [`check_coverage`]: the portal's configuration
/// gives `contract-service` a budget with the same settings (`contract-service` in the metrics).
pub static COVERAGE_BUDGET: RetryBudget = RetryBudget::new().name("coverage");

/// How long the breaker stays open before it lets one trial call through: 2 s, short so that the
/// example does not wait long; a real portal waits tens of seconds.
pub const OPEN_FOR: Duration = Duration::from_secs(2);

/// The contract service's breaker, shared by every coverage check of this process: open after 5
/// failures in a row, for [`OPEN_FOR`]. `contract` in the metrics. The default of
/// [`check_coverage`]: the portal's configuration gives `contract-service` a breaker with the same
/// settings, which [`config::contract_breaker`](super::config::contract_breaker) returns then.
pub static CONTRACT_BREAKER: CircuitBreaker = CircuitBreaker::new()
    .name("contract")
    .consecutive_failures(5)
    .open_for(OPEN_FOR);

/// The service's answer. Both variants are answers, so both are `Ok`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Coverage {
    /// The policy covers the claim.
    Covered,
    /// It does not.
    NotCovered,
}

/// Why there is no answer.
#[derive(Debug)]
pub enum ContractError {
    /// The service is busy and said so: worth another try.
    Overloaded,
    /// The service is checking this key right now (a repeat from a caller that gave up on the
    /// first call): worth another try, which gets the stored answer.
    Busy,
    /// The connection broke before the answer arrived: worth another try.
    ConnectionLost(io::Error),
    /// The circuit breaker refused the call: the service was not asked. It ends the call at once
    /// (the breaker is open because the service keeps failing).
    Refused(CircuitOpen),
    /// The service does not know the claim. Asking again will not change that.
    InvalidClaim(ClaimId),
    /// The key was used for another claim: a bug in the caller, not worth a retry.
    KeyReused(ClaimId),
    /// The service answered something this portal does not understand. Nor that.
    Protocol(String),
    /// No answer now, but the claim is saved and the check is queued under its key: the
    /// customer gets the result by e-mail. What [`save_for_later`], the fallback of
    /// [`check_coverage`], returns where the loop gave up.
    Deferred {
        /// The queued coverage check.
        job: JobId,
        /// Why the loop gave up.
        why: GiveUp,
        /// The last error.
        cause: Box<ContractError>,
    },
}

impl From<CircuitOpen> for ContractError {
    fn from(open: CircuitOpen) -> Self {
        ContractError::Refused(open)
    }
}

/// What a fault injected by the portal's rehearsal (`retry-chaos`, [`rehearse`](super::rehearse))
/// is in this error type: the service's own transient "overloaded", which the classifier then
/// judges as it judges a real one. `#[retry]` finds this impl by itself; the function is
/// unchanged.
#[cfg(feature = "rehearse")]
impl From<retry_chaos::Injected> for ContractError {
    fn from(_: retry_chaos::Injected) -> Self {
        ContractError::Overloaded
    }
}

/// The `on = ...` of [`check_coverage`]: which errors pass by themselves.
pub fn is_transient(error: &ContractError) -> bool {
    matches!(
        error,
        ContractError::Overloaded | ContractError::Busy | ContractError::ConnectionLost(_)
    )
}

impl ContractError {
    /// Whether this failure may pass by itself: a transient error, or the breaker's refusal
    /// (the service was not asked). What the customer is told when the claim could not even be
    /// saved, and what the worker retries later.
    pub fn may_pass(&self) -> bool {
        matches!(self, ContractError::Refused(_)) || is_transient(self)
    }
}

/// Asks the contract service whether `claim` is covered: `COVERAGE 4711 <key>` over the wire,
/// answered by one line.
///
/// The policy is the one named `contract-service` in the portal's configuration
/// (`examples/portal.toml`, installed by [`config::install`](super::config::install)), looked
/// up as each call starts: its timings, and its budget and breaker in place of those written
/// here. Where the name is not configured (no registry installed, as in the tests that call this
/// function in-process), what is written beside it runs, which is what the shipped file says:
/// up to 3 retries, so at most 4 calls, with pauses of about 1 s, 2 s and 4 s, each lengthened
/// by up to half at random so that portals that failed together do not come back together. The
/// retries come out of [`COVERAGE_BUDGET`], and every call asks [`CONTRACT_BREAKER`] first: while
/// it is open, the call ends at once with [`ContractError::Refused`].
///
/// When the loop gives up (retries used up, the budget empty, the breaker open), the fallback
/// [`save_for_later`] saves the claim and queues its check in `queue`, under the same key, and
/// the customer is told [`ContractError::Deferred`]. A permanent error (no such claim) is
/// returned as it is: it is an answer about the request.
///
/// `#[non_idempotent]`: the service records each check in the claim's case file, so every
/// attempt sends the same key, and so does the worker that makes the check later.
#[non_idempotent]
#[retry(
    policy = "contract-service",
    max = 3,
    base = "1s",
    jitter,
    on = is_transient,
    budget = COVERAGE_BUDGET,
    breaker = CONTRACT_BREAKER,
    notify = announce_pause,
    on_give_up = announce_give_up,
    fallback = |error, why| save_for_later(queue, claim, key, error, why),
)]
pub async fn check_coverage<B: PortalDb>(
    client: &ContractClient,
    queue: &Queue<B>,
    claim: &Claim,
    key: &IdempotencyKey,
) -> Result<Coverage, ContractError> {
    // The body runs once per attempt; the runtime tells it which one this is.
    println!(
        "    claim {}: attempt {} at {:5.2} s",
        claim.id,
        attempt().number(),
        scene_time()
    );
    // `?` ends this attempt, not the call: a lost connection is retried like "overloaded".
    let line = client
        .request(&format!("COVERAGE {} {key}", claim.id))
        .await
        .map_err(ContractError::ConnectionLost)?;
    match line.as_str() {
        "COVERED" => Ok(Coverage::Covered),
        "NOT_COVERED" => Ok(Coverage::NotCovered),
        "OVERLOADED" => Err(ContractError::Overloaded),
        "BUSY" => Err(ContractError::Busy),
        "UNKNOWN_CLAIM" => Err(ContractError::InvalidClaim(claim.id)),
        "KEY_REUSED" => Err(ContractError::KeyReused(claim.id)),
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
            ContractError::Busy => f.write_str("the contract service is checking this key already"),
            ContractError::ConnectionLost(e) => write!(f, "connection lost: {e}"),
            ContractError::Refused(open) => write!(f, "not called: {open}"),
            ContractError::InvalidClaim(claim) => write!(f, "no claim {claim} on record"),
            ContractError::KeyReused(claim) => {
                write!(
                    f,
                    "the key of claim {claim}'s check was used for another claim"
                )
            }
            ContractError::Protocol(line) => write!(f, "unexpected answer {line:?}"),
            ContractError::Deferred { job, cause, .. } => {
                write!(f, "saved for later as job {job}; the last attempt: {cause}")
            }
        }
    }
}

impl std::error::Error for ContractError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ContractError::ConnectionLost(e) => Some(e),
            ContractError::Refused(e) => Some(e),
            ContractError::Deferred { cause, .. } => Some(&**cause),
            _ => None,
        }
    }
}

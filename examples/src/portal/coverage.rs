//! The portal's question: does the policy cover this claim? One `#[retry]` function asks it,
//! for the customer at the form and for the worker that drains the queue alike.

use super::later::save_for_later;
use super::story::{announce_give_up, announce_pause, scene_time};
use super::{Claim, ClaimId, ContractClient};
use crate::queue::{JobId, Queue};
use retry_runtime::{
    CircuitBreaker, CircuitOpen, IdempotencyKey, RetryBudget, attempt, non_idempotent, retry,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use std::{fmt, io};

/// The retries of coverage checks, from every customer and the worker together: at most a tenth
/// of the first calls, plus a reserve of 10 a second (the defaults).
pub static COVERAGE_BUDGET: RetryBudget = RetryBudget::new();

/// How long the breaker stays open before it lets one trial call through: 2 s, short so that the
/// example does not wait long; a real portal waits tens of seconds.
pub const OPEN_FOR: Duration = Duration::from_secs(2);

/// The contract service's breaker, shared by every coverage check of this process: open after 5
/// failures in a row, for [`OPEN_FOR`].
pub static CONTRACT_BREAKER: CircuitBreaker = CircuitBreaker::new()
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
    /// customer gets the result by e-mail. What [`save_for_later`] returns where the loop gave
    /// up.
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

/// The `on = ...` of [`check_coverage`]: which errors pass by themselves.
pub fn is_transient(error: &ContractError) -> bool {
    matches!(
        error,
        ContractError::Overloaded | ContractError::Busy | ContractError::ConnectionLost(_)
    )
}

/// Why the retry loop gave up: a stand-in for the library's `GiveUp` of issue 11, which
/// `#[retry(fallback = ...)]` will pass to the fallback with the attempts and the time spent.
/// Until then [`check_or_save`] tells the cases apart from the error, which cannot show whether
/// the retries were used up or the budget refused one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// The breaker refused the call.
    BreakerOpen,
    /// The last attempt failed transiently and no retry was left: retries used up, or the
    /// budget refused one.
    Exhausted,
}

impl GiveUp {
    /// Why the loop gave up, if `error` is one it gives up on: a transient error, or the
    /// breaker's refusal. `None` for an answer about the request (a permanent error), which the
    /// caller must see.
    pub fn of(error: &ContractError) -> Option<Self> {
        match error {
            ContractError::Refused(_) => Some(GiveUp::BreakerOpen),
            error if is_transient(error) => Some(GiveUp::Exhausted),
            _ => None,
        }
    }
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GiveUp::BreakerOpen => "the circuit breaker is open",
            GiveUp::Exhausted => "no retry left",
        })
    }
}

/// Asks the contract service whether `claim` is covered: `COVERAGE 4711 <key>` over the wire,
/// answered by one line.
///
/// Up to 3 retries, so at most 4 calls, with pauses of about 1 s, 2 s and 4 s, each lengthened
/// by up to half at random so that portals that failed together do not come back together. The
/// retries come out of [`COVERAGE_BUDGET`], and every call asks [`CONTRACT_BREAKER`] first: while
/// it is open, the call ends at once with [`ContractError::Refused`].
///
/// `#[non_idempotent]`: the service records each check in the claim's case file, so every
/// attempt sends the same key, and so does the worker that makes the check later.
#[non_idempotent]
#[retry(
    max = 3,
    base = "1s",
    jitter,
    on = is_transient,
    budget = COVERAGE_BUDGET,
    breaker = CONTRACT_BREAKER,
    notify = announce_pause,
    on_give_up = announce_give_up,
)]
pub async fn check_coverage(
    client: &ContractClient,
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

/// The portal's coverage question, as the form and the worker ask it: [`check_coverage`], and
/// [`save_for_later`] where its loop gave up.
///
/// Until `#[retry(fallback = ...)]` exists the fallback is called here by hand, at the one place
/// where the loop's result comes back. The switch: add a `queue: &Queue` parameter and
/// `fallback = |e, why| save_for_later(queue, claim, key, e, why)` to `check_coverage`, drop the
/// `match` below, and give `save_for_later` the library's `GiveUp` for this module's stand-in.
pub async fn check_or_save(
    client: &ContractClient,
    queue: &Queue,
    claim: &Claim,
    key: &IdempotencyKey,
) -> Result<Coverage, ContractError> {
    let answer = check_coverage(client, claim, key).await;
    // switch to fallback = |e, why| save_for_later(queue, claim, key, e, why)
    match answer {
        Err(error) => match GiveUp::of(&error) {
            Some(why) => save_for_later(queue, claim, key, error, why).await,
            None => Err(error),
        },
        answer => answer,
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

// A policy named at run time, with the timings written beside it as the default: on a sync and
// an async function and a block, whose error type needs no `From<CircuitOpen>` (without
// `breaker =`, the name's breaker is not asked); and with a written budget and breaker, which
// the name's replace.
use retry_runtime::{retry, retry_block, CircuitBreaker, CircuitOpen, GiveUp, RetryBudget};
use std::io;

#[retry(policy = "contract-service")]
fn defaults() -> io::Result<u32> {
    Ok(1)
}

#[retry(policy = "payments.v2_eu", max = 0, base = "10ms", jitter = none)]
async fn written_default() -> io::Result<u32> {
    Err(io::ErrorKind::TimedOut.into())
}

#[derive(Debug)]
enum ContractError {
    Open,
}

impl From<CircuitOpen> for ContractError {
    fn from(_: CircuitOpen) -> Self {
        ContractError::Open
    }
}

static BUDGET: RetryBudget = RetryBudget::new();
static BREAKER: CircuitBreaker = CircuitBreaker::new();

#[retry(policy = "contract-service", max = 1, on = |_| true, budget = BUDGET, breaker = BREAKER)]
fn protected() -> Result<u32, ContractError> {
    Ok(2)
}

fn saved(_: ContractError, _: GiveUp) -> Result<u32, ContractError> {
    Ok(4)
}

// With every kind of builder after it: a fallback by path (which wraps the builder), hedging,
// a timeout.
#[retry(policy = "contract-service", max = 0, on = |_| true, breaker = BREAKER,
        fallback = saved, hedge = "1s", timeout = "2s")]
async fn everything() -> Result<u32, ContractError> {
    Err(ContractError::Open)
}

impl From<retry_runtime::Elapsed> for ContractError {
    fn from(_: retry_runtime::Elapsed) -> Self {
        ContractError::Open
    }
}

fn main() {
    assert_eq!(defaults().unwrap(), 1);
    assert_eq!(protected().unwrap(), 2);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    assert!(runtime.block_on(written_default()).is_err());
    assert_eq!(runtime.block_on(everything()).unwrap(), 4);
    let answer: io::Result<u32> = retry_block!(policy = "contract-service", max = 0 => { Ok(3) });
    assert_eq!(answer.unwrap(), 3);
    let _ = ContractError::Open;
}

// A policy named at run time, with the timings written beside it as the default: on a sync and
// an async function and a block, whose error type needs no `From<CircuitOpen>` (without
// `breaker =`, the name's breaker is not asked); and with a written budget and breaker, which
// the name's replace.
use retry_runtime::{retry, retry_block, CircuitBreaker, CircuitOpen, RetryBudget};
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

fn main() {
    assert_eq!(defaults().unwrap(), 1);
    assert_eq!(protected().unwrap(), 2);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    assert!(runtime.block_on(written_default()).is_err());
    let answer: io::Result<u32> = retry_block!(policy = "contract-service", max = 0 => { Ok(3) });
    assert_eq!(answer.unwrap(), 3);
    let _ = ContractError::Open;
}

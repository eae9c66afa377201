use retry_runtime::{
    retry, AdaptiveThrottling, AdmissionGate, CircuitBreaker, CircuitOpen, Elapsed, GiveUp, Rejected,
    RetryBudget, RetryEvent, Verdict,
};

#[derive(Debug)]
enum ContractError {
    Overloaded,
    TimedOut(Elapsed),
    Unavailable(CircuitOpen),
    Shed(Rejected),
}

impl From<Elapsed> for ContractError {
    fn from(e: Elapsed) -> Self {
        ContractError::TimedOut(e)
    }
}

impl From<CircuitOpen> for ContractError {
    fn from(e: CircuitOpen) -> Self {
        ContractError::Unavailable(e)
    }
}

impl From<Rejected> for ContractError {
    fn from(e: Rejected) -> Self {
        ContractError::Shed(e)
    }
}

fn classify(error: &ContractError) -> Verdict {
    match error {
        ContractError::Overloaded | ContractError::TimedOut(_) => Verdict::Retry,
        ContractError::Unavailable(_) | ContractError::Shed(_) => Verdict::Fail,
    }
}

fn log_retry(_: &ContractError, _: &RetryEvent) {}
fn log_failure(_: &ContractError) {}
async fn save_for_later(
    outcome: Result<u16, ContractError>,
    _: GiveUp,
) -> Result<u16, ContractError> {
    outcome
}
fn is_pending(status: &u16) -> bool {
    *status == 202
}

static BUDGET: RetryBudget = RetryBudget::new();
static BREAKER: CircuitBreaker = CircuitBreaker::new();
static GATE: AdmissionGate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());

#[retry(
    max = 4,
    base = "250ms",
    factor = 1.5,
    backoff = exponential,
    max_delay = "5s",
    deadline = "20s",
    jitter = decorrelated,
    on = classify,
    on_result = is_pending,
    timeout = "2s",
    notify = log_retry,
    on_give_up = log_failure,
    budget = BUDGET,
    breaker = BREAKER,
    gate = GATE,
    nested = retry,
    fallback = save_for_later,
    log_level = "warn"
)]
async fn check_coverage(claim: u32) -> Result<u16, ContractError> {
    let _ = claim;
    Ok(200)
}

fn main() {}

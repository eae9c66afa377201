use retry_runtime::{retry, CircuitBreaker, Transient};

static CONTRACT_BREAKER: CircuitBreaker = CircuitBreaker::new();

#[derive(Debug)]
enum ContractError {
    Overloaded,
}

impl Transient for ContractError {
    fn is_transient(&self) -> bool {
        matches!(self, ContractError::Overloaded)
    }
}

#[retry(max = 3, breaker = CONTRACT_BREAKER)]
fn check_contract() -> Result<(), ContractError> {
    Err(ContractError::Overloaded)
}

fn main() {}

use retry_runtime::{retry, Transient};

#[derive(Debug)]
enum ContractError {
    Overloaded,
}

impl Transient for ContractError {
    fn is_transient(&self) -> bool {
        matches!(self, ContractError::Overloaded)
    }
}

// `ContractError` has no variant for a timed-out attempt.
#[retry(max = 3, timeout = "2s")]
async fn check_coverage() -> Result<bool, ContractError> {
    Err(ContractError::Overloaded)
}

fn main() {}

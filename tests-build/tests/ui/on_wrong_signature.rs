use retry_runtime::retry;

#[derive(Debug)]
enum ContractError {
    Overloaded,
}

// Takes the error by value instead of by reference.
fn is_transient(error: ContractError) -> bool {
    matches!(error, ContractError::Overloaded)
}

#[retry(max = 3, on = is_transient)]
fn check_coverage(claim: u32) -> Result<bool, ContractError> {
    let _ = claim;
    Err(ContractError::Overloaded)
}

fn main() {}

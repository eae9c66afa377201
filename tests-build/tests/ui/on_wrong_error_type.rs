use retry_runtime::retry;

#[derive(Debug)]
enum ContractError {
    Overloaded,
}

fn is_transient(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::TimedOut
}

#[retry(max = 3, on = is_transient)]
fn check_coverage(claim: u32) -> Result<bool, ContractError> {
    let _ = claim;
    Err(ContractError::Overloaded)
}

fn main() {}

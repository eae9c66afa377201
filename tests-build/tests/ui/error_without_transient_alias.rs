use retry_runtime::retry;

#[derive(Debug)]
enum ContractError {
    Overloaded,
}

type Result<T> = std::result::Result<T, ContractError>;

#[retry(max = 3, base = "1s")]
fn check_coverage(claim: u32) -> Result<bool> {
    let _ = claim;
    Err(ContractError::Overloaded)
}

fn main() {}

use retry_runtime::retry;

#[derive(Debug)]
enum ContractError {
    Overloaded,
    NotCovered,
}

#[retry(max = 3, base = "1s")]
fn check_coverage(claim: u32) -> Result<bool, ContractError> {
    match claim {
        4711 => Err(ContractError::Overloaded),
        _ => Err(ContractError::NotCovered),
    }
}

fn main() {}

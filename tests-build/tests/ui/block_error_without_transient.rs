use retry_runtime::retry_block;

#[derive(Debug)]
enum ContractError {
    Overloaded,
}

fn check_coverage(claim: u32) -> Result<bool, ContractError> {
    let _ = claim;
    Err(ContractError::Overloaded)
}

fn main() {
    let _ = retry_block!(max = 3 => { check_coverage(4711) });
}

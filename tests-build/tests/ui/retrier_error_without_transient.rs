use retry_runtime::{Policy, Retrier};

#[derive(Debug)]
enum ContractError {
    Overloaded,
}

fn check_coverage(claim: u32) -> Result<bool, ContractError> {
    let _ = claim;
    Err(ContractError::Overloaded)
}

fn main() {
    let policy = Policy::new();
    let _ = Retrier::new(&policy).run(|| check_coverage(4711));
}

use retry_runtime::retry;

pub struct ContractClient;
pub struct Claim;
pub struct Coverage;
#[derive(Debug)]
pub enum ContractError {
    Overloaded,
}

fn is_transient(error: &ContractError) -> bool {
    matches!(error, ContractError::Overloaded)
}

impl ContractClient {
    async fn coverage(&self, _claim: &Claim) -> Result<Coverage, ContractError> {
        Ok(Coverage)
    }
}

#[retry(max = 3, base = "1s", jitter, on = is_transient)]
async fn check_coverage(client: &ContractClient, claim: &Claim) -> Result<Coverage, ContractError> {
    client.coverage(claim).await
}

fn main() {}

use retry_runtime::retry_block;

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

async fn check_coverage(client: &ContractClient, claim: &Claim) -> Result<Coverage, ContractError> {
    retry_block!(max = 3, base = "1s", jitter, on = is_transient => async { client.coverage(claim).await }).await
}

fn read_config(path: &str) -> Result<String, ContractError> {
    retry_block!(max = 3, on = is_transient => { Ok(path.to_owned()) })
}

fn main() {}

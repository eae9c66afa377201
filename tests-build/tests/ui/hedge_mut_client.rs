use retry_runtime::retry;
use std::io;

// A cheap `Clone` handle, as a tonic client is: each copy of a hedged call clones it.
#[derive(Clone)]
struct QuoteClient;

impl QuoteClient {
    async fn quote(&mut self) -> io::Result<u32> {
        Ok(7)
    }
}

#[retry(hedge = "50ms")]
async fn quote(client: &mut QuoteClient) -> io::Result<u32> {
    client.quote().await
}

fn main() {}

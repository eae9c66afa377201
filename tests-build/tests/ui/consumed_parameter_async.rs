use retry_runtime::retry;

#[derive(Debug)]
struct SendError;

fn is_transient(_: &SendError) -> bool {
    true
}

async fn consume(payload: String) -> Result<(), SendError> {
    drop(payload);
    Ok(())
}

#[retry(max = 2, base = "10ms", on = is_transient)]
async fn send(payload: String) -> Result<(), SendError> {
    consume(payload).await
}

fn main() {}

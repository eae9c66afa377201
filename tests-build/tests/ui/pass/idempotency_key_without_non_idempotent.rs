use retry_runtime::retry;

#[derive(Debug)]
struct SendError;

fn is_transient(_: &SendError) -> bool {
    true
}

#[retry(max = 2, base = "1ms", on = is_transient)]
fn send(#[idempotency_key] request_id: &str, body: &str) -> Result<(), SendError> {
    let _ = (request_id, body);
    Ok(())
}

fn main() {
    send("req-1", "hello").unwrap();
}

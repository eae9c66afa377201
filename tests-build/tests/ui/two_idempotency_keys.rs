use retry_runtime::{non_idempotent, retry};

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

#[non_idempotent]
#[retry(max = 2, on = is_transient)]
fn pay_out(#[idempotency_key] payout_id: &str, #[idempotency_key] request_id: &str) -> Result<(), PayError> {
    let _ = (payout_id, request_id);
    Ok(())
}

fn main() {}

use retry_runtime::{non_idempotent, retry, IdempotencyKey};

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

#[non_idempotent]
#[retry(max = 2, on = is_transient)]
fn pay_out(payout: &IdempotencyKey, request: &IdempotencyKey) -> Result<(), PayError> {
    let _ = (payout, request);
    Ok(())
}

fn main() {}

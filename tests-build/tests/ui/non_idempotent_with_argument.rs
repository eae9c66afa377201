use retry_runtime::{non_idempotent, retry, IdempotencyKey};

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

#[non_idempotent(x)]
#[retry(max = 2, on = is_transient)]
fn pay_out(key: &IdempotencyKey) -> Result<(), PayError> {
    let _ = key;
    Ok(())
}

fn main() {}

use retry_runtime::{non_idempotent, retry, IdempotencyKey};

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", on = is_transient)]
fn pay_out(claim: u32, key: &IdempotencyKey) -> Result<(), PayError> {
    let _ = (claim, key.as_str());
    Ok(())
}

fn main() {
    pay_out(4711, &IdempotencyKey::new()).unwrap();
}

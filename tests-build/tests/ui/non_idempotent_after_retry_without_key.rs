use retry_runtime::{non_idempotent, retry};

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

#[retry(max = 2, base = "500ms", on = is_transient)]
#[non_idempotent]
fn pay_out(claim: u32, amount: u64) -> Result<(), PayError> {
    let _ = (claim, amount);
    Ok(())
}

fn main() {}

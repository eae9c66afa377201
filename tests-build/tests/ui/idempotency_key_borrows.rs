use retry_runtime::{non_idempotent, retry};
use std::borrow::Cow;

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

#[non_idempotent]
#[retry(max = 2, on = is_transient)]
fn pay_out(#[idempotency_key] reference: Cow<'_, str>) -> Result<(), PayError> {
    let _ = reference;
    Ok(())
}

fn main() {}

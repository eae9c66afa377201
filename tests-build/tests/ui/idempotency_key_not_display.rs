use retry_runtime::{non_idempotent, retry};

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

/// An order as the shop keeps it: nothing says how to write it as a key.
struct Order {
    number: u64,
}

#[non_idempotent]
#[retry(max = 2, on = is_transient)]
fn pay_out(#[idempotency_key] order: &Order) -> Result<(), PayError> {
    let _ = order.number;
    Ok(())
}

fn main() {}

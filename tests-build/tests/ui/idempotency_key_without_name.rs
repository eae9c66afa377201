use retry_runtime::{non_idempotent, retry};
use std::fmt;

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

struct OrderNumber(u64);

impl fmt::Display for OrderNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "order-{}", self.0)
    }
}

#[non_idempotent]
#[retry(max = 2, on = is_transient)]
fn pay_out(#[idempotency_key] OrderNumber(number): OrderNumber) -> Result<u64, PayError> {
    Ok(number)
}

fn main() {}

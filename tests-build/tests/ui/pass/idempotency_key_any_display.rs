use retry_runtime::{non_idempotent, retry, IdempotencyKey};
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
#[retry(max = 2, base = "1ms", on = is_transient)]
fn by_number(#[idempotency_key] order: u64) -> Result<u64, PayError> {
    Ok(order)
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", on = is_transient)]
fn by_own_type(#[idempotency_key] order: &OrderNumber) -> Result<u64, PayError> {
    Ok(order.0)
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", on = is_transient)]
fn by_string(#[idempotency_key] reference: String) -> Result<usize, PayError> {
    Ok(reference.len())
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", on = is_transient)]
fn by_marked_key(#[idempotency_key] key: IdempotencyKey) -> Result<usize, PayError> {
    Ok(key.as_str().len())
}

fn main() {
    assert_eq!(by_number(4711).unwrap(), 4711);
    assert_eq!(by_own_type(&OrderNumber(7)).unwrap(), 7);
    assert_eq!(by_string("claim-4711-payout-1".to_owned()).unwrap(), 19);
    assert_eq!(by_marked_key(IdempotencyKey::from("k")).unwrap(), 1);
}

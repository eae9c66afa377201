use retry_runtime::{non_idempotent, retry};

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

#[non_idempotent]
#[retry(max = 2, base = "1ms", on = is_transient)]
fn pay_out(claim: u32, #[idempotency_key] payout_id: &str) -> Result<(), PayError> {
    let _ = (claim, payout_id);
    Ok(())
}

#[retry(max = 2, base = "1ms", on = is_transient)]
#[non_idempotent]
fn pay_out_again(#[idempotency_key] payout_id: &str) -> Result<(), PayError> {
    let _ = payout_id;
    Ok(())
}

fn main() {
    pay_out(4711, "claim-4711-payout-1").unwrap();
    pay_out_again("claim-4711-payout-1").unwrap();
}

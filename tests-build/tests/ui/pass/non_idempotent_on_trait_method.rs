use retry_runtime::{non_idempotent, retry, IdempotencyKey};

#[derive(Debug)]
struct PayError;

fn is_transient(_: &PayError) -> bool {
    true
}

// On a declaration the mark only documents the method; each `impl` retries its own body.
trait Payouts {
    #[non_idempotent]
    fn pay_out(&self, claim: u32, key: &IdempotencyKey) -> Result<(), PayError>;
}

struct Bank;

impl Payouts for Bank {
    #[non_idempotent]
    #[retry(max = 2, base = "1ms", on = is_transient)]
    fn pay_out(&self, claim: u32, key: &IdempotencyKey) -> Result<(), PayError> {
        let _ = (claim, key);
        Ok(())
    }
}

fn main() {
    Bank.pay_out(4711, &IdempotencyKey::new()).unwrap();
}

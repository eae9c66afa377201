use retry_runtime::{non_idempotent, retry};

// Argument errors, the return type and the missing key: all reported in one compile.
#[non_idempotent]
#[retry(max = -1, backoff = constant, factor = 3)]
fn pay_out(claim: u32) -> Option<u64> {
    Some(u64::from(claim))
}

fn main() {}

use retry_runtime::{non_idempotent, retry, IdempotencyKey};
use std::io;

#[non_idempotent]
#[retry(max = 2, base = "500ms", jitter = full)]
async fn pay_out(claim: u32, amount: u64, key: &IdempotencyKey) -> io::Result<String> {
    Ok(format!("{claim} {amount} {key}"))
}

fn main() {}

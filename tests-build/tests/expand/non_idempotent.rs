use retry_runtime::{non_idempotent, retry, GiveUp, IdempotencyKey};
use std::io;

#[non_idempotent]
#[retry(max = 2, base = "500ms", jitter = full)]
async fn pay_out(claim: u32, amount: u64, key: &IdempotencyKey) -> io::Result<String> {
    Ok(format!("{claim} {amount} {key}"))
}

/// A key of any type that implements `Display`, marked; a sync function.
#[non_idempotent]
#[retry(max = 2, base = "500ms")]
fn send_receipt(#[idempotency_key] order: u64, to: &str) -> io::Result<()> {
    let _ = (order, to);
    Ok(())
}

/// With a fallback: it runs with the key lent, as the attempts do (`next_keyed`).
#[non_idempotent]
#[retry(max = 2, base = "500ms", fallback = |error, why| defer(order, error, why))]
fn refund(#[idempotency_key] order: u64) -> io::Result<()> {
    let _ = order;
    Ok(())
}

fn defer(order: u64, error: io::Error, why: GiveUp) -> io::Result<()> {
    let _ = (order, error, why);
    Ok(())
}

fn main() {}

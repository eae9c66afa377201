use retry_runtime::retry;
use std::io;

// `key` and `non_idempotent` are a block's: a function has its `#[non_idempotent]` mark and a
// key parameter.
#[retry(max = 2, key = 4711)]
fn pay_out(claim: u32) -> io::Result<()> {
    let _ = claim;
    Ok(())
}

fn main() {}

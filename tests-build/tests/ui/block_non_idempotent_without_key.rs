use retry_runtime::retry_block;
use std::io;

fn pay_out(claim: u32, cents: u64) -> io::Result<()> {
    let _ = (claim, cents);
    Ok(())
}

fn main() {
    let claim = 4711;
    let _ = retry_block!(non_idempotent, max = 2 => { pay_out(claim, 1999) });
}

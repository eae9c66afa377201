use retry_runtime::retry;

// An error type from another crate (here std's): `impl Transient for ParseIntError` would be
// E0117 in this crate, so the message must offer `on = ...` too.
#[retry(max = 3, base = "1s")]
fn parse_claim(claim: &str) -> Result<u32, std::num::ParseIntError> {
    claim.parse()
}

fn main() {}

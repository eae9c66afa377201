// `missing_docs` points at the function, as on a function without the attribute.
#![deny(missing_docs)]
//! A crate.

use retry_runtime::retry;

#[retry(max = 1, base = "1ms")]
pub fn undocumented() -> std::io::Result<()> {
    Ok(())
}

fn main() {}

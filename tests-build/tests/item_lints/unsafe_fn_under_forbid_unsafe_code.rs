// Regression: `#[retry]` on an `unsafe fn` hid the declaration from `forbid(unsafe_code)`.
#![forbid(unsafe_code)]

use retry_runtime::retry;

/// # Safety
///
/// None.
#[retry(max = 1, base = "1ms")]
pub unsafe fn unchecked() -> std::io::Result<()> {
    Ok(())
}

fn main() {}

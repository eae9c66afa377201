// Regression: an unused annotated function drew no `dead_code` warning, because the function's
// braces carried the macro's span.
#![deny(dead_code)]

use retry_runtime::retry;

#[retry(max = 1, base = "1ms")]
fn never_called() -> std::io::Result<()> {
    Ok(())
}

#[retry(max = 1, base = "1ms")]
async fn never_awaited() -> std::io::Result<()> {
    Ok(())
}

fn main() {}

use retry_runtime::{retry, Policy};
use std::io;
use std::time::Duration;

const COVERAGE: Policy = Policy::new().max(3);

// The policy sets every timing; `base` would be silently ignored or silently win.
#[retry(policy = COVERAGE, base = "500ms", on = |_: &io::Error| true)]
fn read_tariffs() -> io::Result<String> {
    let _ = Duration::ZERO;
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

use retry_runtime::retry;
use std::io;

// Read from configuration, but never parsed into a `Policy`.
static COVERAGE_POLICY: &str = "max=3, base=1s";

#[retry(policy = COVERAGE_POLICY)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

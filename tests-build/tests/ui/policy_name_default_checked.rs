use retry_runtime::retry;
use std::io;

// Beside a name, the timing keys are the default, and the rules still hold for what is written.
#[retry(policy = "contract-service", base = "2s", max_delay = "1s")]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

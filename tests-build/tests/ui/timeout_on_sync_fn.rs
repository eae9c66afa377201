use retry_runtime::retry;
use std::io;

// A blocking call cannot be cut off from outside.
#[retry(max = 3, timeout = "2s")]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

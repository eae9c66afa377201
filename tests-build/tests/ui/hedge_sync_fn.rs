use retry_runtime::retry;
use std::io;

// A blocking function cannot run its body twice at once.
#[retry(max = 3, hedge = "50ms")]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

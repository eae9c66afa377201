use retry_runtime::retry;
use std::io;

#[retry(max = 3, log_level = "fatal")]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

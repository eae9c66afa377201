use retry_runtime::retry;
use std::io;

#[retry(max = 3, timeout = "0s")]
async fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

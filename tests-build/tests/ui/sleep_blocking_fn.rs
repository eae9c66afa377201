use retry_runtime::retry;
use std::io;

// `std::thread::sleep` blocks the executor's thread and returns no future.
#[retry(max = 3, sleep = std::thread::sleep)]
async fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

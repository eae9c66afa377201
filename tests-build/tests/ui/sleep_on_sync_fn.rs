use retry_runtime::retry;
use std::io;
use std::time::Duration;

async fn pause(duration: Duration) {
    let _ = duration;
}

#[retry(max = 3, sleep = pause)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

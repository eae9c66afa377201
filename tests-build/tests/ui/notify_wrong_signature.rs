use retry_runtime::retry;
use std::io;
use std::time::Duration;

// Takes the pause, but `notify` is called with the error and a `RetryEvent`.
fn log_retry(error: &io::Error, pause: Duration) {
    eprintln!("{error}; retrying in {pause:?}");
}

#[retry(max = 3, notify = log_retry)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

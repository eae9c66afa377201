use retry_runtime::{retry, RetryEvent};
use std::io;

// Records the failure and returns whether it was saved: a hook's future gives nothing.
async fn record_failure(error: &io::Error, event: &RetryEvent) -> bool {
    eprintln!("recording: {error} (attempt {})", event.attempt);
    true
}

#[retry(max = 3, notify = record_failure)]
async fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

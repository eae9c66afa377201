use retry_runtime::{retry, RetryEvent};
use std::io;

// Pages someone before each retry, asynchronously, but `read_tariffs` is a sync function.
async fn page_on_call(error: &io::Error, event: &RetryEvent) {
    eprintln!("paging: {error} (attempt {})", event.attempt);
}

#[retry(max = 3, notify = page_on_call)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

use retry_runtime::{retry, RetryEvent};
use std::io;

// Takes the error's message, but `notify` lends the error (or the whole outcome).
fn log_retry(message: &String, event: &RetryEvent) {
    eprintln!("{message}; retrying in {:?}", event.pause);
}

#[retry(max = 3, notify = log_retry)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

use retry_runtime::retry;
use std::io;

// Returns a description of the error instead of a decision.
fn describe(error: &io::Error) -> String {
    error.to_string()
}

#[retry(max = 3, on = describe)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

use retry_runtime::retry;
use std::io;

// Describes the status instead of saying whether to retry.
fn describe(status: &u16) -> String {
    format!("status {status}")
}

#[retry(max = 3, on_result = describe)]
fn fetch() -> io::Result<u16> {
    Ok(503)
}

fn main() {}

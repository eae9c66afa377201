use retry_runtime::retry;
use std::io;

// Borrows the error; a fallback takes it (and why the loop gave up) by value.
fn use_cached(error: &io::Error) -> io::Result<String> {
    let _ = error;
    Ok(String::from("cached tariffs"))
}

#[retry(max = 3, fallback = use_cached)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

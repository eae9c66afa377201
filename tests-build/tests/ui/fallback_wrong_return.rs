use retry_runtime::{retry, GiveUp};
use std::io;

// Returns the tariffs themselves, but the function's result is an `io::Result<String>`.
fn use_cached(_: io::Error, _: GiveUp) -> String {
    String::from("cached tariffs")
}

#[retry(max = 3, fallback = use_cached)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

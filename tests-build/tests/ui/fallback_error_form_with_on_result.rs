use retry_runtime::{retry, GiveUp};
use std::io;

// Takes the last error, but with `on_result` the loop can also give up on an `Ok` it rejected
// (a 429 every time): the fallback takes the outcome, `io::Result<u16>`, to hear that too.
fn use_cached(error: io::Error, why: GiveUp) -> io::Result<u16> {
    eprintln!("{why}: {error}");
    Ok(200)
}

#[retry(max = 3, on_result = |status: &u16| *status == 429, fallback = use_cached)]
fn get_status() -> io::Result<u16> {
    Ok(429)
}

fn main() {}

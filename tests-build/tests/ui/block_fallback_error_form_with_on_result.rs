use retry_runtime::{retry_block, GiveUp};
use std::io;

fn get_status() -> io::Result<u16> {
    Ok(429)
}

// Written for errors, but beside `on_result` the loop can give up on a rejected `Ok` too.
fn use_cached(error: io::Error, why: GiveUp) -> io::Result<u16> {
    eprintln!("{why}: {error}");
    Ok(200)
}

fn main() {
    let _ = retry_block!(max = 3, on_result = |status| *status == 429, fallback = use_cached => {
        get_status()
    });
}

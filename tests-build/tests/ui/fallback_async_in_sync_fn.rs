use retry_runtime::{retry, GiveUp};
use std::io;

// Saving writes to a database asynchronously, but `read_tariffs` is a sync function.
async fn save_for_later(_: io::Error, _: GiveUp) -> io::Result<String> {
    Ok(String::from("saved"))
}

#[retry(max = 3, fallback = save_for_later)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

use retry_runtime::retry;
use std::io;

// A closure that returns a future, as a fallback of a sync function.
#[retry(max = 3, fallback = |_error, _why| async { Ok(String::from("saved")) })]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

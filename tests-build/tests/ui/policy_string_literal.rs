use retry_runtime::retry;
use std::io;

// The string syntax is for configuration read at run time, through `str::parse`.
#[retry(policy = "max=3, base=1s")]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

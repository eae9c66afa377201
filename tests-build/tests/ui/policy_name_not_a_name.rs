use retry_runtime::retry;
use std::io;

// A space and a slash: a name must be a key of a configuration file and a metric label as it is.
#[retry(policy = "contract service/eu", max = 2)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

use retry_runtime::retry;
use std::io;

// Takes the error by value; `on_give_up` lends it.
fn alert(error: io::Error) {
    eprintln!("giving up: {error}");
}

#[retry(max = 3, on_give_up = alert)]
fn read_tariffs() -> io::Result<String> {
    Err(io::ErrorKind::TimedOut.into())
}

fn main() {}

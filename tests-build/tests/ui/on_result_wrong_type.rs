use retry_runtime::retry;
use std::io;

fn is_unavailable(status: &u16) -> bool {
    *status == 503
}

// The function returns a `String`, not a status code.
#[retry(max = 3, on_result = is_unavailable)]
fn read_tariffs() -> io::Result<String> {
    Ok(String::new())
}

fn main() {}

use retry_runtime::retry;

// With `max = 0` no pause is ever taken, so a deadline shorter than `base` is harmless.
#[retry(max = 0, base = "5s", deadline = "1s")]
fn read_tariffs() -> std::io::Result<String> {
    Ok(String::from("tariffs"))
}

fn main() {
    read_tariffs().unwrap();
}

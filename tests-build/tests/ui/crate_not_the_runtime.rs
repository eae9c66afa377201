use retry_runtime::retry;

// A path that exists, but is not the runtime.
#[retry(crate = std, max = 2)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {
    let _ = read_tariffs();
}

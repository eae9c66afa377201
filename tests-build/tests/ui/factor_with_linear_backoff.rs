use retry_runtime::retry;

#[retry(backoff = linear, factor = 1.5)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {}

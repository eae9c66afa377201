use retry_runtime::retry;

#[retry(jitter = -0.1)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {}

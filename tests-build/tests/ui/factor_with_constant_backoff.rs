use retry_runtime::retry;

#[retry(factor = 3, backoff = constant)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {}

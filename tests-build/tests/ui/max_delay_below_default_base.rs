use retry_runtime::retry;

#[retry(max_delay = "100ms")]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {}

use retry_runtime::retry;

#[retry(max_delay = 30 * SECOND)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {}

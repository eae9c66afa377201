use retry_runtime::retry;

#[retry(max = 3 base = "1s")]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {}

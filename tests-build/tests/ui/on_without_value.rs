use retry_runtime::retry;

#[retry(on)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {}

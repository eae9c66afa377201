use retry_runtime::retry;

#[retry(max = -1, base = "1 sec", jiter, factor = 0.5, max = 2)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {}

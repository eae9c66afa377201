use retry_runtime::retry;

#[retry(crate = "retry_runtime", max = 2)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {
    let _ = read_tariffs();
}

use retry_runtime::retry;

// A renamed dependency that is not in Cargo.toml under this name.
#[retry(crate = rt, max = 2)]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {
    let _ = read_tariffs();
}

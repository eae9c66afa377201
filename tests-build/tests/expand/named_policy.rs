use retry_runtime::retry;

#[retry(policy = "tariffs", max = 2, base = "50ms")]
fn read_tariffs(path: &std::path::Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

fn main() {}

use retry_runtime::retry_block;
use std::io;

async fn fetch(url: &str) -> io::Result<String> {
    Ok(url.to_owned())
}

fn main() {
    let url = String::from("http://contracts.internal/coverage");
    let _ = retry_block!(max = 3, hedge = "50ms" => async { fetch(&url).await });
}

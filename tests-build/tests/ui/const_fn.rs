use retry_runtime::retry;

#[retry(max = 2)]
const fn parse_port(text: &str) -> Result<u16, std::io::Error> {
    let _ = text;
    Ok(8080)
}

fn main() {}

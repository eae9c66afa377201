use retry_runtime::retry_block;
use std::io;

fn read_config(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path)
}

fn main() {
    let path = String::from("config.toml");
    let _ = retry_block!(retries = 3, base = "1s" => { read_config(&path) });
}

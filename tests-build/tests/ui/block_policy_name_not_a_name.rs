use retry_runtime::retry_block;
use std::io;

fn read_config(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path)
}

fn main() {
    let path = String::from("config.toml");
    let _ = retry_block!(policy = "config:reader", max = 2 => { read_config(&path) });
}

use retry_runtime::retry_block;
use std::io;

fn read(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path)
}

fn main() {
    // A name made at run time: the metrics' `function` label is written in the code.
    let name = format!("read {}", "config");
    let _ = retry_block!(max = 3, name = name => { read("app.toml") });
}

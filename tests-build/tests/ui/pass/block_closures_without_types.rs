// The block's type is known before its options are read, so their closures need no types
// written: `on = |e| ...`, `on_result = |v| ...`.
use retry_runtime::retry_block;
use std::io;

fn read_config(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path)
}

fn main() {
    let path = String::from("config.toml");
    let _ = retry_block!(
        max = 1,
        base = "1ms",
        on = |e| e.kind() == io::ErrorKind::Interrupted,
        on_result = |text| text.is_empty()
        => { read_config(&path) }
    );
}

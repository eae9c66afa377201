// Issue 13, defect 4: thirty fraction digits made the macro panic with "attempt to multiply with
// overflow", and the function vanished.
use retry_runtime::retry;

#[retry(max_delay = "1.999999999999999999999999999999s")]
fn read_tariffs() -> std::io::Result<String> {
    std::fs::read_to_string("tariffs.csv")
}

fn main() {
    // The function is still there: no second error here.
    let _ = read_tariffs();
}

use retry_runtime::retry;

#[retry(max = 2)]
fn count_claims() -> i32 {
    4711
}

fn main() {}

use retry_runtime::retry;

#[retry(max = 2)]
fn send_reminder(claim: u32) {
    let _ = claim;
}

fn main() {}

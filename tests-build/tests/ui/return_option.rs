use retry_runtime::retry;

#[retry(max = 2)]
fn find_claim(id: u32) -> Option<u32> {
    Some(id)
}

fn main() {}

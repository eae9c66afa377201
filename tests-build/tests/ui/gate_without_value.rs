use retry_runtime::retry;

#[retry(gate)]
fn reserve() -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}

use retry_runtime::{retry, GiveUp, Transient};

#[derive(Debug)]
struct Busy;

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

// Borrows the error, as `on_give_up` would; a fallback takes it by value (it may return it).
fn cached(error: &Busy, why: GiveUp) -> Result<u32, Busy> {
    eprintln!("{why}: {error:?}");
    Ok(7)
}

#[retry(max = 3, fallback = cached)]
async fn quote() -> Result<u32, Busy> {
    Err(Busy)
}

fn main() {}

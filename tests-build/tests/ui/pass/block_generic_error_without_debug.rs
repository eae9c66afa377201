// A block in a generic function whose error type has no `Debug` bound: the block adds none.
use retry_runtime::{retry_block, Transient};

fn generic<E: Transient>(call: impl Fn() -> Result<u32, E>) -> Result<u32, E> {
    retry_block!(max = 1, base = "1ms" => { call() })
}

async fn generic_async<E: Transient>(call: impl Fn() -> Result<u32, E>) -> Result<u32, E> {
    retry_block!(max = 1, base = "1ms" => async { call() }).await
}

struct Opaque;

impl Transient for Opaque {
    fn is_transient(&self) -> bool {
        false
    }
}

fn main() {
    assert!(generic(|| Err::<u32, _>(Opaque)).is_err());
    let _ = generic_async(|| Ok::<u32, Opaque>(1));
}

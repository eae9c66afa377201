// With the default `tracing` feature, a generic error type needs no `Debug` bound: an error
// without one is logged by its type name.
use retry_runtime::{retry, Transient};

#[retry(max = 2, base = "1ms")]
fn f<E: Transient>(make: impl Fn() -> E) -> Result<u32, E> {
    Err(make())
}

#[retry(max = 2, base = "1ms")]
async fn g<E: Transient>(make: impl Fn() -> E) -> Result<u32, E> {
    Err(make())
}

/// A concrete error type without `Debug`.
struct Opaque;

impl Transient for Opaque {
    fn is_transient(&self) -> bool {
        false
    }
}

#[retry(max = 2, base = "1ms")]
fn h() -> Result<u32, Opaque> {
    Err(Opaque)
}

fn main() {
    assert!(f(|| Opaque).is_err());
    assert!(h().is_err());
    let _ = g(|| Opaque);
}

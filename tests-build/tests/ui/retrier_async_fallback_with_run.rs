use retry_runtime::{GiveUp, Policy, Retrier, Transient};

#[derive(Debug)]
struct CallError;

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        true
    }
}

fn main() {
    let policy = Policy::new();
    // A blocking run cannot await an async fallback: it needs `run_async`.
    let _ = Retrier::new(&policy)
        .fallback(async |error: CallError, _: GiveUp| Err::<u32, _>(error))
        .run(|| Err(CallError));
}

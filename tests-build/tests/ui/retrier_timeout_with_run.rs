use retry_runtime::{Elapsed, Policy, Retrier, Transient};
use std::time::Duration;

#[derive(Debug)]
struct CallError;

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        true
    }
}

impl From<Elapsed> for CallError {
    fn from(_: Elapsed) -> Self {
        CallError
    }
}

fn main() {
    let policy = Policy::new();
    // A sync closure cannot be cut off from outside: `timeout` needs `run_async`.
    let _ = Retrier::new(&policy)
        .timeout(Duration::from_secs(2))
        .run(|| Err::<(), _>(CallError));
}

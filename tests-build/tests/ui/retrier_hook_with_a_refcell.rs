use retry_runtime::{Policy, Retrier, RetryEvent, Transient};
use std::cell::RefCell;

#[derive(Debug)]
struct CallError;

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        true
    }
}

fn main() {
    let policy = Policy::new();
    // A `Retrier`'s hooks are `Send + Sync`: a `RefCell` they write to is refused.
    let heard = RefCell::new(Vec::new());
    let _ = Retrier::new(&policy)
        .notify(|_: &CallError, event: &RetryEvent| heard.borrow_mut().push(event.pause))
        .run(|| Err::<u32, _>(CallError));
}

use retry_runtime::{Policy, Retrier, RetryEvent, Transient};

#[derive(Debug)]
struct CallError;

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        true
    }
}

fn main() {
    let policy = Policy::new();
    // Records each retry asynchronously, but `run` blocks the thread: it needs `run_async`.
    let _ = Retrier::new(&policy)
        .notify(|_: &CallError, event: &RetryEvent| {
            let attempt = event.attempt;
            async move { eprintln!("retrying after attempt {attempt}") }
        })
        .run(|| Err::<u32, _>(CallError));
}

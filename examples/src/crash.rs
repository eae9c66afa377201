//! Crash points for the fault tests: a process started with `--pause-at STEP` stops when it
//! reaches that step, says so on stdout, and waits there to be killed (`SIGKILL`), so that a
//! test can kill it at an exact step instead of at a moment it guesses. Without `--pause-at`
//! every point does nothing.

use std::io::Write;
use std::sync::OnceLock;

static PAUSE_AT: OnceLock<String> = OnceLock::new();

/// Makes [`point`]`(step, ..)` pause this process. Once per process; a second call is ignored.
pub fn pause_at(step: &str) {
    let _ = PAUSE_AT.set(step.to_owned());
}

/// At `step`: if this process was told to pause here, prints `paused at STEP: WHAT` and waits
/// for ever (the test kills it); otherwise returns at once.
pub async fn point(step: &str, what: &str) {
    if PAUSE_AT.get().is_some_and(|at| at == step) {
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "paused at {step}: {what}");
            let _ = out.flush();
        }
        std::future::pending::<()>().await;
    }
}

/// [`point`] for a synchronous hook (the queue worker's
/// [`on_recorded`](retry_durable::queue::Worker::on_recorded)): pauses this thread, not a task.
pub fn point_blocking(step: &str, what: &str) {
    if PAUSE_AT.get().is_some_and(|at| at == step) {
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "paused at {step}: {what}");
            let _ = out.flush();
        }
        loop {
            std::thread::park();
        }
    }
}

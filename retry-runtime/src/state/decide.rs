//! The decision after an attempt that did not end in an accepted `Ok`: pause and retry, return
//! the outcome, or give up (and why); the hooks that hear it, and the logging.

use super::options::Classify;
use super::{Attempted, Extras, Hooks, MaybeExtras, Progress, Retry, Site, Slot};
use crate::policy::nanos;
use crate::{RetryBudget, Verdict};
use std::fmt;
use std::ops::ControlFlow;
use std::time::Duration;

/// What `notify` hears before each pause.
///
/// ```
/// use retry_runtime::{retry, RetryEvent};
/// use std::io;
/// use std::sync::Mutex;
///
/// static HEARD: Mutex<Vec<(u32, u128)>> = Mutex::new(Vec::new());
///
/// fn remember(_: &io::Error, event: &RetryEvent) {
///     HEARD.lock().unwrap().push((event.attempt, event.pause.as_millis()));
/// }
///
/// #[retry(max = 2, base = "1ms", jitter = none, notify = remember)]
/// fn flaky() -> io::Result<()> {
///     Err(io::ErrorKind::TimedOut.into())
/// }
///
/// assert!(flaky().is_err());
/// assert_eq!(*HEARD.lock().unwrap(), [(1, 1), (2, 2)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryEvent {
    /// The name of the annotated function.
    pub function: &'static str,
    /// The attempt that failed: 1 for the first call.
    pub attempt: u32,
    /// The pause about to be taken, jitter and any server-suggested pause included.
    pub pause: Duration,
    /// Time since the first call began, on the loop's clock.
    pub elapsed: Duration,
}

/// `E: Debug` when the `tracing` feature logs errors; every type otherwise.
#[cfg(feature = "tracing")]
#[diagnostic::on_unimplemented(
    message = "`{Self}` must implement `Debug` so that `#[retry]` can log failed attempts",
    label = "`{Self}` does not implement `Debug`",
    note = "add `#[derive(Debug)]` to `{Self}`, or turn off the `tracing` feature of `retry-runtime`"
)]
pub trait LoggableError: fmt::Debug {}
#[cfg(feature = "tracing")]
impl<E: fmt::Debug + ?Sized> LoggableError for E {}

/// `E: Debug` when the `tracing` feature logs errors; every type otherwise.
#[cfg(not(feature = "tracing"))]
pub trait LoggableError {}
#[cfg(not(feature = "tracing"))]
impl<E: ?Sized> LoggableError for E {}

impl<'p, T, E, C, S, R, N, G, X> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G>, X> {
    /// `next` for anything but an accepted `Ok`: the state taken apart into separate locals on
    /// this branch alone, [`decide`], and the state put back together with the retry counted.
    ///
    /// Nothing of the state has its address taken: an async function keeps its state in its
    /// future, written field by field, and a reference would make the compiler copy the state
    /// out of the future in wider words (padding included), each load of which waits for the
    /// narrower stores to finish. Taken apart, each field is read as it was written.
    #[inline(always)]
    pub(super) fn after_failure(self, attempted: Attempted<T, E>) -> ControlFlow<Result<T, E>, Self>
    where
        E: LoggableError,
        N: Slot<E, RetryEvent>,
        G: Slot<E>,
        X: MaybeExtras<'p, E>,
    {
        let Retry {
            site,
            progress,
            classify,
            sleeper,
            hooks,
            mut extras,
        } = self;
        let flow = decide(
            site,
            progress,
            &classify,
            &hooks,
            extras.get_mut(),
            attempted,
        );
        match flow {
            ControlFlow::Break(result) => ControlFlow::Break(result),
            ControlFlow::Continue(pause) => ControlFlow::Continue(Retry {
                site,
                progress: progress.retried_after(pause),
                classify,
                sleeper,
                hooks,
                extras,
            }),
        }
    }
}

/// What follows an attempt that did not end in an accepted `Ok`: the breaker refused it, the
/// timeout cut it off, it failed, or `on_result` rejected its value. `Break` with the function's
/// result, or `Continue` with the pause before the next attempt, in nanoseconds.
///
/// Inline in the annotated function, where the policy is a constant: the compiler folds the
/// policy's arithmetic, the hooks that are not set and the limits that are not written, so a
/// sync failure with a constant policy costs a few dozen instructions. It is per function
/// anyway (generic over the classifier's type), so inlining it adds no code; the happy path
/// stays the comparison at its start (`next`). The progress is only read: the caller counts
/// the retry, so that it keeps its progress in registers rather than reading back what this
/// function wrote (a store of one width read back at another stalls the load).
#[inline(always)]
fn decide<'p, T, E, C, R, N, G>(
    site: Site<'p>,
    progress: Progress,
    classify: &Classify<C, E>,
    hooks: &Hooks<R, N, G>,
    mut extras: Option<&mut Extras<'p, E>>,
    attempted: Attempted<T, E>,
) -> ControlFlow<Result<T, E>, u64>
where
    E: LoggableError,
    N: Slot<E, RetryEvent>,
    G: Slot<E>,
{
    let Site { name, clock, .. } = site;
    // The outcome to return if the loop stops here, and whether it may be retried.
    let (outcome, verdict) = match attempted {
        Attempted::Refused(refusal) => {
            log_refused(name);
            return ControlFlow::Break(Err(refusal));
        }
        Attempted::TimedOut(error) => (Err(error), Verdict::Retry),
        Attempted::Completed(Err(error)) => {
            let verdict = classify.call(&error, &());
            (Err(error), verdict)
        }
        // `on_result` marked the value: a transient failure, but when the loop stops, the
        // value is what the function returns.
        Attempted::Completed(Ok(value)) => (Ok(value), Verdict::Retry),
    };
    if let Some(extras) = extras.as_deref_mut() {
        extras.record(verdict.is_retry(), clock);
    }
    let nested_retry = extras.as_ref().is_some_and(|x| x.nested_retry);
    let budget = extras.and_then(|x| x.budget);
    // The attempt that just ended.
    let attempt = progress.retries + 1;
    match schedule(&site, &progress, verdict, nested_retry, budget) {
        Step::Pause(pause) => {
            log_retry(name, attempt, pause, &outcome);
            // The event and the elapsed time only for a `notify` that hears them.
            if N::SET {
                if let Err(error) = &outcome {
                    let event = RetryEvent {
                        function: name,
                        attempt,
                        pause: Duration::from_nanos(pause),
                        elapsed: progress.elapsed(clock),
                    };
                    hooks.notify.call(error, &event);
                }
            }
            ControlFlow::Continue(pause)
        }
        // Not giving up: a permanent error is an answer, and under a retrying layer that
        // layer decides (`log_nested` said so at debug).
        Step::Return => ControlFlow::Break(outcome),
        Step::GiveUp(why) => {
            log_give_up(name, attempt, why, &outcome);
            if let Err(error) = &outcome {
                hooks.on_give_up.call(error, &());
            }
            ControlFlow::Break(outcome)
        }
    }
}

/// What follows a failure, by the policy and the limits.
enum Step {
    /// Retry after this pause, in nanoseconds.
    Pause(u64),
    /// Return the outcome as it is: the failure is permanent, or a layer above retries.
    Return,
    /// Stop retrying a failure that could have been retried.
    GiveUp(GiveUp),
}

/// The pause before the next attempt, or why there is none. Inline in `decide`: a call of its
/// own would cost as much as the work on the common path.
#[inline(always)]
fn schedule(
    site: &Site<'_>,
    progress: &Progress,
    verdict: Verdict,
    nested_retry: bool,
    budget: Option<&RetryBudget>,
) -> Step {
    let policy = site.policy;
    if !verdict.is_retry() {
        return Step::Return;
    }
    if progress.retried_above && !nested_retry {
        log_nested(site.name);
        return Step::Return;
    }
    if progress.retries >= policy.get_max() {
        return Step::GiveUp(GiveUp::Exhausted);
    }
    let retry = progress.retries + 1;
    // In nanoseconds, as the progress keeps it: a `Duration` only where one is compared.
    let mut pause = policy.delay_nanos(retry, progress.previous_pause);
    if let Some(asked) = verdict.suggested_pause() {
        if asked > policy.get_max_delay() {
            return Step::GiveUp(GiveUp::SuggestedTooLong(asked));
        }
        pause = pause.max(nanos(asked));
    }
    if let Some(deadline) = policy.get_deadline() {
        let end = progress
            .elapsed(site.clock)
            .saturating_add(Duration::from_nanos(pause));
        if end > deadline {
            return Step::GiveUp(GiveUp::Deadline);
        }
    }
    if let Some(budget) = budget {
        if !budget.try_withdraw((site.clock)()) {
            return Step::GiveUp(GiveUp::Budget);
        }
    }
    Step::Pause(pause)
}

/// Why the loop stopped retrying a failure that it could have retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GiveUp {
    /// The retries were used up.
    Exhausted,
    /// The next pause would end past the deadline.
    Deadline,
    /// The server asked for a pause longer than `max_delay`.
    SuggestedTooLong(Duration),
    /// The retry budget is empty.
    Budget,
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GiveUp::Exhausted => f.write_str("retries used up"),
            GiveUp::Deadline => f.write_str("the next pause would end past the deadline"),
            GiveUp::SuggestedTooLong(d) => write!(
                f,
                "the server asked for a {d:?} pause, longer than `max_delay`"
            ),
            GiveUp::Budget => f.write_str("the retry budget is empty"),
        }
    }
}

#[cold]
fn log_refused(_function: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        function = _function,
        "circuit open: not calling the service"
    );
}

/// A failure that will be retried: `INFO`. Tracing's first check (the global maximum level,
/// `OFF` without a subscriber) inline; the event out of line.
#[cfg(feature = "tracing")]
#[inline(always)]
fn log_retry<T, E: fmt::Debug>(
    function: &'static str,
    attempt: u32,
    pause: u64,
    outcome: &Result<T, E>,
) {
    if tracing::level_enabled!(tracing::Level::INFO) {
        log_retry_event(function, attempt, pause, outcome);
    }
}

#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn log_retry_event<T, E: fmt::Debug>(
    function: &'static str,
    attempt: u32,
    pause: u64,
    outcome: &Result<T, E>,
) {
    // The field values are made only when the event is enabled.
    match outcome {
        Err(error) => tracing::info!(
            function,
            attempt,
            pause = ?Duration::from_nanos(pause),
            error = ?error,
            "attempt failed; retrying"
        ),
        Ok(_) => tracing::info!(
            function,
            attempt,
            pause = ?Duration::from_nanos(pause),
            "result rejected by `on_result`; retrying"
        ),
    }
}

#[cfg(not(feature = "tracing"))]
fn log_retry<T, E>(_: &'static str, _: u32, _: u64, _: &Result<T, E>) {}

/// The end of the retries: `WARN`.
#[cfg(feature = "tracing")]
#[cold]
fn log_give_up<T, E: fmt::Debug>(
    function: &'static str,
    attempts: u32,
    why: GiveUp,
    outcome: &Result<T, E>,
) {
    match outcome {
        Err(error) => {
            tracing::warn!(function, attempts, reason = %why, error = ?error, "giving up")
        }
        Ok(_) => tracing::warn!(
            function,
            attempts,
            reason = %why,
            "giving up; returning the last result rejected by `on_result`"
        ),
    }
}

#[cfg(not(feature = "tracing"))]
fn log_give_up<T, E>(_: &'static str, _: u32, _: GiveUp, _: &Result<T, E>) {}

#[cold]
fn log_nested(_function: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        function = _function,
        "not retrying: a layer above retries this work (write `nested = retry` to retry here too)"
    );
}

//! The decision after an attempt that did not end in an accepted `Ok`: pause and retry, return
//! the outcome, or give up (and why); the hooks and the fallback that hear it, and the logging.

#[cfg(feature = "tracing")]
use super::LogLevel;
use super::hooks::Classify;
use super::{
    Attempted, Extras, Fallback, FallbackScope, GiveUp, GiveUpReason, Hooks, Logs, MaybeExtras,
    Progress, Retry, RetryEvent, Site, Slot,
};
use crate::context::{Frame, KeySlot};
use crate::policy::nanos;
use crate::{RetryBudget, Verdict};
#[cfg(feature = "tracing")]
use std::fmt;
use std::ops::ControlFlow;
use std::time::Duration;

/// How a failed call ended, for its final event and its hooks.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))] // the reason is read by the event alone
enum End {
    /// The loop gave up.
    GaveUp(GiveUpReason),
    /// A permanent error after at least one retry: an answer, but the call retried first.
    Permanent,
}

impl<'p, T, E, C, S, R, N, G, F, X, L> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G, F>, X, L> {
    /// `next` for anything but an accepted `Ok`: the state taken apart into separate locals on
    /// this branch alone, [`decide`], the fallback if the loop gave up, and the state put back
    /// together with the retry counted. `ok_verdict` is `on_result`'s verdict on a rejected
    /// `Ok`.
    ///
    /// Taken apart, not borrowed: `PERFORMANCE.md` §2.
    #[inline(always)]
    #[allow(clippy::type_complexity)]
    pub(super) fn after_failure<K: KeySlot>(
        self,
        key: K,
        attempted: Attempted<T, E>,
        ok_verdict: Verdict,
    ) -> ControlFlow<<F as Fallback<T, E>>::Output<K>, Self>
    where
        N: Slot<Result<T, E>, RetryEvent>,
        G: Slot<Result<T, E>, GiveUp>,
        F: Fallback<T, E>,
        X: MaybeExtras<'p, E>,
        L: Logs<E>,
    {
        let Retry {
            site,
            progress,
            classify,
            sleeper,
            hooks,
            mut extras,
            log,
            spans,
        } = self;
        let flow = decide::<T, E, C, R, N, G, F, L>(
            site,
            progress,
            &classify,
            &hooks,
            extras.get_mut(),
            attempted,
            ok_verdict,
        );
        match flow {
            ControlFlow::Continue(pause) => ControlFlow::Continue(Retry {
                site,
                progress: progress.retried_after(pause),
                classify,
                sleeper,
                hooks,
                extras,
                log,
                spans,
            }),
            // The last error, or an `Ok` that `on_result` rejected: the fallback's input says
            // which it hears (`FallbackInput`).
            ControlFlow::Break((outcome, Some(why))) if F::SET => {
                let frame = Frame {
                    attempt: why.attempts.max(1),
                    key: K::KIND,
                    retried_above: progress.retried_above,
                    hedge: 0,
                };
                let scope = FallbackScope { frame, key };
                ControlFlow::Break(hooks.fallback.call(outcome, why, scope))
            }
            ControlFlow::Break((outcome, _)) => ControlFlow::Break(F::ready(outcome)),
        }
    }
}

/// What follows an attempt that did not end in an accepted `Ok`: the breaker refused it, the
/// timeout cut it off, it failed, or `on_result` rejected its value (with `ok_verdict`).
/// `Break` with the function's result and, when the loop gave up and a hook or the fallback
/// hears it, why; or `Continue` with the pause before the next attempt, in nanoseconds.
///
/// The progress is only read: the caller counts the retry. Inline, for a constant policy to
/// fold: `PERFORMANCE.md` §3.
#[inline(always)]
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
fn decide<'p, T, E, C, R, N, G, F, L>(
    site: Site<'p>,
    progress: Progress,
    classify: &Classify<C, E>,
    hooks: &Hooks<R, N, G, F>,
    mut extras: Option<&mut Extras<'p, E>>,
    attempted: Attempted<T, E>,
    ok_verdict: Verdict,
) -> ControlFlow<(Result<T, E>, Option<GiveUp>), u64>
where
    N: Slot<Result<T, E>, RetryEvent>,
    G: Slot<Result<T, E>, GiveUp>,
    F: Fallback<T, E>,
    L: Logs<E>,
{
    let Site { name, clock, .. } = site;
    let nested_retry = extras.as_ref().is_some_and(|x| x.nested_retry);
    // Under a retrying layer that layer decides (`log_nested` says so at debug).
    let single = progress.retried_above && !nested_retry;
    // The outcome to return if the loop stops here, and whether it may be retried.
    let (outcome, verdict) = match attempted {
        Attempted::Refused(refusal) if single => {
            log_nested(name);
            count_end(name, Ended::Nested, progress.retries);
            return ControlFlow::Break((Err(refusal), None));
        }
        // The body did not run: the attempts are the ones before.
        Attempted::Refused(refusal) => {
            let outcome = Err(refusal);
            let why = give_up::<T, E, G, F, L>(
                site,
                progress,
                hooks,
                GiveUpReason::BreakerOpen,
                progress.retries,
                &outcome,
            );
            return ControlFlow::Break((outcome, why));
        }
        Attempted::TimedOut(error) => (Err(error), Verdict::Retry),
        Attempted::Completed(Err(error)) => {
            let verdict = classify.call(&error, &());
            (Err(error), verdict)
        }
        // `on_result` rejected the value: a transient failure, but when the loop stops, the
        // value is what the function returns.
        Attempted::Completed(Ok(value)) => (Ok(value), ok_verdict),
    };
    // Whether the breaker is open after this outcome, by it or by others'.
    let breaker_open = match extras.as_deref_mut() {
        Some(extras) => extras.record(verdict.is_retry(), clock),
        None => false,
    };
    let budget = extras.and_then(|x| x.budget);
    // The attempt that just ended.
    let attempt = progress.retries + 1;
    if single && verdict.is_retry() {
        log_nested(name);
        count_end(name, Ended::Nested, attempt);
        return ControlFlow::Break((outcome, None));
    }
    match schedule(&site, &progress, verdict, breaker_open, budget) {
        Step::Pause(pause) => {
            log_retry::<T, E, L>(name, attempt, pause, &outcome);
            #[cfg(feature = "metrics")]
            crate::metrics::retrying(name, pause);
            // The event and the elapsed time only for a `notify` that hears them.
            if N::SET {
                let event = RetryEvent {
                    function: name,
                    attempt,
                    pause: Duration::from_nanos(pause),
                    elapsed: progress.elapsed(clock),
                    hedges: u32::from(progress.hedges),
                };
                hooks.notify.call(&outcome, &event);
            }
            ControlFlow::Continue(pause)
        }
        // A permanent error is an answer: logged only if the call retried before it.
        Step::Return => {
            if progress.retries > 0 {
                log_final::<T, E, L>(name, attempt, End::Permanent, &outcome);
            }
            count_end(name, Ended::Permanent, attempt);
            ControlFlow::Break((outcome, None))
        }
        Step::GiveUp(reason) => {
            let why = give_up::<T, E, G, F, L>(site, progress, hooks, reason, attempt, &outcome);
            ControlFlow::Break((outcome, why))
        }
    }
}

/// The loop gives up after `attempts` attempts: the final event, then `on_give_up`; the
/// [`GiveUp`] is made only for a hook or a fallback that hears it.
#[inline(always)]
fn give_up<T, E, G, F, L>(
    site: Site<'_>,
    progress: Progress,
    hooks: &Hooks<impl Sized, impl Sized, G, impl Sized>,
    reason: GiveUpReason,
    attempts: u32,
    outcome: &Result<T, E>,
) -> Option<GiveUp>
where
    G: Slot<Result<T, E>, GiveUp>,
    F: Fallback<T, E>,
    L: Logs<E>,
{
    log_final::<T, E, L>(site.name, attempts, End::GaveUp(reason), outcome);
    let ended = if F::SET {
        Ended::Fallback(reason)
    } else {
        Ended::GaveUp(reason)
    };
    count_end(site.name, ended, attempts);
    if !G::SET && !F::SET {
        return None;
    }
    let why = GiveUp {
        function: site.name,
        reason,
        attempts,
        elapsed: progress.elapsed(site.clock),
    };
    hooks.on_give_up.call(outcome, &why);
    Some(why)
}

/// How a call that did not end in an accepted `Ok` ended, for the metrics.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "metrics"), allow(dead_code))] // read by the metrics alone
enum Ended {
    Permanent,
    GaveUp(GiveUpReason),
    Fallback(GiveUpReason),
    Nested,
}

/// Counts the end of a call (feature `metrics`): `attempts` is how many ran.
#[inline(always)]
fn count_end(_function: &'static str, _ended: Ended, _attempts: u32) {
    #[cfg(feature = "metrics")]
    {
        use crate::metrics::Ended as M;
        let ended = match _ended {
            Ended::Permanent => M::Permanent,
            Ended::GaveUp(reason) => M::GaveUp(reason),
            Ended::Fallback(reason) => M::Fallback(reason),
            Ended::Nested => M::Nested,
        };
        crate::metrics::call_ended(_function, ended, _attempts);
    }
}

/// What follows a failure, by the policy and the limits.
enum Step {
    /// Retry after this pause, in nanoseconds.
    Pause(u64),
    /// Return the outcome as it is: the failure is permanent.
    Return,
    /// Stop retrying a failure that could have been retried.
    GiveUp(GiveUpReason),
}

/// The pause before the next attempt, or why there is none. Inline in `decide`:
/// `PERFORMANCE.md` §3.
#[inline(always)]
fn schedule(
    site: &Site<'_>,
    progress: &Progress,
    verdict: Verdict,
    breaker_open: bool,
    budget: Option<&RetryBudget>,
) -> Step {
    let policy = site.policy;
    if !verdict.is_retry() {
        return Step::Return;
    }
    if progress.retries >= policy.get_max() {
        return Step::GiveUp(GiveUpReason::Exhausted);
    }
    // The next attempt would be refused: no pause for it.
    if breaker_open {
        return Step::GiveUp(GiveUpReason::BreakerOpen);
    }
    let retry = progress.retries + 1;
    // In nanoseconds, as the progress keeps it: a `Duration` only where one is compared.
    let pause = match verdict {
        Verdict::RetryNow => 0,
        Verdict::RetryAfter(asked) => {
            if asked > policy.get_max_delay() {
                return Step::GiveUp(GiveUpReason::SuggestedTooLong(asked));
            }
            policy.delay_nanos_at_least(retry, progress.previous_pause, nanos(asked))
        }
        _ => policy.delay_nanos(retry, progress.previous_pause),
    };
    if let Some(deadline) = policy.get_deadline() {
        let end = progress
            .elapsed(site.clock)
            .saturating_add(Duration::from_nanos(pause));
        if end > deadline {
            return Step::GiveUp(GiveUpReason::Deadline);
        }
    }
    if let Some(budget) = budget {
        if !budget.try_withdraw((site.clock)()) {
            return Step::GiveUp(GiveUpReason::Budget);
        }
    }
    Step::Pause(pause)
}

/// An error as a log event shows it: with `Debug`, or by its type name ([`Logs`]).
#[cfg(feature = "tracing")]
struct Shown<'a, L, E>(&'a E, std::marker::PhantomData<fn() -> L>);

#[cfg(feature = "tracing")]
impl<L: Logs<E>, E> fmt::Debug for Shown<'_, L, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        L::show(self.0, f)
    }
}

#[cfg(feature = "tracing")]
fn shown<L: Logs<E>, E>(error: &E) -> Shown<'_, L, E> {
    Shown(error, std::marker::PhantomData)
}

/// A failure that will be retried: `INFO`. The level check inline, the event out of line:
/// `PERFORMANCE.md` §6.
#[cfg(feature = "tracing")]
#[inline(always)]
fn log_retry<T, E, L: Logs<E>>(
    function: &'static str,
    attempt: u32,
    pause: u64,
    outcome: &Result<T, E>,
) {
    if tracing::level_enabled!(tracing::Level::INFO) {
        log_retry_event::<T, E, L>(function, attempt, pause, outcome);
    }
}

#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn log_retry_event<T, E, L: Logs<E>>(
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
            error = ?shown::<L, E>(error),
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
#[inline(always)]
fn log_retry<T, E, L>(_: &'static str, _: u32, _: u64, _: &Result<T, E>) {}

/// One event at each level: `tracing`'s macros take the level as a constant.
#[cfg(feature = "tracing")]
macro_rules! at_level {
    ($level:expr, $($event:tt)*) => {
        match $level {
            LogLevel::Error => tracing::error!($($event)*),
            LogLevel::Warn => tracing::warn!($($event)*),
            LogLevel::Info => tracing::info!($($event)*),
            LogLevel::Debug => tracing::debug!($($event)*),
            LogLevel::Trace => tracing::trace!($($event)*),
        }
    };
}

/// The end of a call that failed after retrying, or that the loop gave up on: one event, at
/// `log_level` (`ERROR` by default).
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn log_final<T, E, L: Logs<E>>(
    function: &'static str,
    attempts: u32,
    end: End,
    outcome: &Result<T, E>,
) {
    let (reason, message): (&dyn fmt::Display, _) = match &end {
        End::GaveUp(reason) => (reason, "giving up"),
        End::Permanent => (&"the error is not worth retrying", "failed after retries"),
    };
    match outcome {
        Err(error) => at_level!(
            L::LEVEL,
            function,
            attempts,
            reason = %reason,
            error = ?shown::<L, E>(error),
            "{message}"
        ),
        Ok(_) => at_level!(
            L::LEVEL,
            function,
            attempts,
            reason = %reason,
            "{message}; returning the last result rejected by `on_result`"
        ),
    }
}

#[cfg(not(feature = "tracing"))]
#[inline(always)]
fn log_final<T, E, L>(_: &'static str, _: u32, _: End, _: &Result<T, E>) {}

#[cold]
fn log_nested(_function: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        function = _function,
        "not retrying: a layer above retries this work (write `nested = retry` to retry here too)"
    );
}

//! A hedged attempt (`hedge = "50ms"`, `max_hedges = 2`): the attempt and the copies started
//! beside it when it is slow, raced; the first acceptable answer wins and the others are dropped.
//!
//! What the rest of the loop sees is one attempt: `run_hedged` returns what it ended with, and
//! `next` decides as for any attempt. Inside:
//!
//! - the attempt starts as any other (`enter`: the budget's deposit on the first one, the
//!   breaker's permission), then copy `k` starts `k` × [`Hedge::delay`] after the attempt did
//!   (gRPC's hedging policy: one delay between copies), up to `max_hedges`, if the breaker admits
//!   it and the budget gives a token for it (no permission or no token: no more copies for this
//!   attempt). Each copy's time is counted from the attempt's start, not from when the previous
//!   copy's timer was seen, so that a late poll does not push the later copies back;
//! - every copy runs with the attempt's frame (its number, its key, `attempt().hedge()` its
//!   index) and, with `timeout`, its own timer;
//! - an acceptable answer (an `Ok` that `on_result` does not reject, or an error the classifier
//!   says not to retry: the service answered, and a copy would say the same) ends the attempt;
//!   a failure worth retrying ends it only if no other copy is still running: one copy's reset
//!   connection does not cancel another that may still answer. Such a failure is recorded with
//!   the breaker at once; the one that ends the attempt is recorded by `next`, as always;
//! - the copies still running when the attempt ends are dropped, which cancels them (a dropped
//!   breaker permission counts as nothing while the circuit is closed).
//!
//! The classifier and `on_result` are asked here and again by `next` for the outcome that ends
//! the attempt: both are expected to be pure functions of the outcome, as everywhere else.

use super::extras::Timeout;
use super::{Attempted, Fallback, GiveUp, Hooks, IntoError, MaybeExtras, Retry, RetryEvent, Slot};
use crate::context::{Frame, KeyParam, KeySlot, Scoped};
use crate::timer::{Elapsed, Sleeper, Timed};
use crate::{Admission, Hedge, Verdict};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

pin_project_lite::pin_project! {
    /// One copy of the attempt: the body in its frame, raced against `timeout` if there is one.
    #[project = CopyProj]
    enum Copy<F, Sl> {
        Plain { #[pin] scoped: F },
        Timed { #[pin] timed: Timed<F, Sl> },
    }
}

impl<F: Future, Sl: Future<Output = ()>> Future for Copy<F, Sl> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        match self.project() {
            CopyProj::Plain { scoped } => scoped.poll(cx).map(Ok),
            CopyProj::Timed { timed } => timed.poll(cx),
        }
    }
}

/// A running copy, with its breaker permission and when it started (for the percentile form).
struct Running<'p, F, Sl> {
    future: Pin<Box<Copy<F, Sl>>>,
    admission: Option<Admission<'p>>,
    started: Option<Instant>,
    hedge: u16,
}

impl<'p, T, E, C, S, R, N, G, Fb, X, L> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G, Fb>, X, L>
where
    R: Slot<T, (), Verdict>,
    N: Slot<Result<T, E>, RetryEvent>,
    G: Slot<Result<T, E>, GiveUp>,
    Fb: Fallback<T, E>,
    X: MaybeExtras<'p, E>,
    S: Sleeper,
{
    /// Runs one attempt of an async function with `hedge`: `make` makes the body's future, once
    /// for the attempt and once for each copy (`|| async { body }`). See the module's
    /// documentation for what wins.
    pub async fn run_hedged<M, F>(&mut self, hedge: &Hedge, make: M) -> Attempted<T, E>
    where
        M: Fn() -> F,
        F: Future<Output = Result<T, E>>,
    {
        self.run_hedged_lending((), hedge, make).await
    }

    /// [`run_hedged`](Retry::run_hedged) for a function with an idempotency key: every copy
    /// borrows the same `key`.
    pub async fn run_hedged_keyed<K, M, F>(
        &mut self,
        key: &K,
        hedge: &Hedge,
        make: M,
    ) -> Attempted<T, E>
    where
        K: KeyParam + ?Sized,
        M: Fn() -> F,
        F: Future<Output = Result<T, E>>,
    {
        self.run_hedged_lending(key, hedge, make).await
    }

    async fn run_hedged_lending<K: KeySlot, M, F>(
        &mut self,
        key: K,
        hedge: &Hedge,
        make: M,
    ) -> Attempted<T, E>
    where
        M: Fn() -> F,
        F: Future<Output = Result<T, E>>,
    {
        let frame = match self.enter(K::KIND) {
            Ok(frame) => frame,
            Err(refusal) => return Attempted::Refused(refusal.into_error()),
        };
        let clock = self.site.clock;
        let timeout = self.extras.get().and_then(|x| x.timeout);
        // Each copy's limit, clipped to the time left before the deadline as the attempt starts.
        let limit = timeout.map(|t| match self.site.policy.get_deadline() {
            Some(deadline) if self.progress.started.is_some() => t
                .limit
                .min(deadline.saturating_sub(self.progress.elapsed(clock))),
            _ => t.limit,
        });
        // Under a layer that retries this work, no copies either (unless `nested = retry`):
        // that layer decides how much work one request may cause.
        let single =
            self.progress.retried_above && !self.extras.get().is_some_and(|x| x.nested_retry);
        // At most `u16::MAX` copies: the frame numbers them in 16 bits.
        let max_hedges = if single {
            0
        } else {
            hedge.get_max_hedges().min(u32::from(u16::MAX))
        };
        let name = self.site.name;
        let Retry {
            progress,
            classify,
            sleeper,
            hooks,
            extras,
            ..
        } = self;
        let observes = hedge.observes();
        let copy = |frame: Frame, admission: Option<Admission<'p>>| {
            let scoped = Scoped::new(frame, key, make());
            let future = match limit {
                Some(limit) => Copy::Timed {
                    timed: Timed::new(scoped, sleeper.sleep(limit), limit),
                },
                None => Copy::Plain { scoped },
            };
            Running {
                future: Box::pin(future),
                admission,
                started: observes.then(clock),
                hedge: frame.hedge,
            }
        };
        let admission = extras.get_mut().and_then(|x| x.admission.take());
        let mut running = vec![copy(frame, admission)];
        // With more than one copy, when the attempt started: copy `k` is due `k` delays after
        // it (gRPC's rule), however late copy `k - 1` was started.
        let attempt_started = (max_hedges > 1).then(clock);
        let mut hedges: u16 = 0;
        let mut timer = match hedge.delay() {
            Some(delay) if max_hedges > 0 => Some(Box::pin(sleeper.sleep(delay))),
            _ => None,
        };
        let (outcome, admission) = std::future::poll_fn(|cx| {
            // Start the copies whose time has come, and poll each new timer once.
            while let Some(sleep) = &mut timer {
                if sleep.as_mut().poll(cx).is_pending() {
                    break;
                }
                timer = None;
                // The breaker's permission, then a token from the budget: without either, no
                // more copies for this attempt.
                if extras.admit(clock).is_err() {
                    break;
                }
                let admission = extras.get_mut().and_then(|x| x.admission.take());
                if let Some(budget) = extras.get().and_then(|x| x.budget) {
                    if !budget.try_withdraw(clock()) {
                        log_hedge(name, frame.attempt, hedges + 1, false);
                        break;
                    }
                }
                hedges += 1;
                log_hedge(name, frame.attempt, hedges, true);
                #[cfg(feature = "metrics")]
                crate::metrics::hedged(name);
                running.push(copy(
                    Frame {
                        hedge: hedges,
                        ..frame
                    },
                    admission,
                ));
                if u32::from(hedges) < max_hedges {
                    timer = hedge.delay().map(|delay| {
                        let due = delay.saturating_mul(u32::from(hedges) + 1);
                        let wait = attempt_started.map_or(delay, |started| {
                            due.saturating_sub(clock().saturating_duration_since(started))
                        });
                        Box::pin(sleeper.sleep(wait))
                    });
                }
            }
            let mut i = 0;
            while i < running.len() {
                let Poll::Ready(outcome) = running[i].future.as_mut().poll(cx) else {
                    i += 1;
                    continue;
                };
                let done = running.swap_remove(i);
                if done.hedge == 0 {
                    if let Some(started) = done.started {
                        let now = clock();
                        hedge.record(now.saturating_duration_since(started), now);
                    }
                }
                let retry = match &outcome {
                    Ok(Ok(value)) => hooks.judge(value).is_retry(),
                    Ok(Err(error)) => classify.call(error, &()).is_retry(),
                    Err(_) => true,
                };
                if !retry || running.is_empty() {
                    return Poll::Ready((outcome, done.admission));
                }
                // A failure worth retrying while another copy may still answer.
                if let Some(admission) = done.admission {
                    admission.record(false, clock());
                }
                log_copy_failed(name, frame.attempt, done.hedge);
            }
            Poll::Pending
        })
        .await;
        // The attempt itself, dropped unanswered: at least this slow.
        if let Some(started) = running
            .iter()
            .find(|r| r.hedge == 0)
            .and_then(|r| r.started)
        {
            let now = clock();
            hedge.record(now.saturating_duration_since(started), now);
        }
        drop(running);
        progress.hedges = hedges;
        if let Some(x) = extras.get_mut() {
            x.admission = admission;
        }
        match outcome {
            Ok(outcome) => Attempted::Completed(outcome),
            Err(elapsed) => match timeout {
                Some(Timeout { error, .. }) => Attempted::TimedOut(error(elapsed)),
                // Without a timeout there is no timer to elapse.
                None => unreachable_elapsed(elapsed),
            },
        }
    }
}

#[cold]
fn unreachable_elapsed<T>(elapsed: Elapsed) -> T {
    unreachable!(
        "a copy without `timeout` timed out after {:?}",
        elapsed.limit()
    )
}

/// A copy is started (`started`), or refused for want of a budget token.
#[inline]
fn log_hedge(_function: &'static str, _attempt: u32, _hedge: u16, _started: bool) {
    #[cfg(feature = "tracing")]
    if _started {
        tracing::debug!(
            function = _function,
            attempt = _attempt,
            hedge = _hedge,
            "no answer yet; starting a hedge"
        );
    } else {
        tracing::debug!(
            function = _function,
            attempt = _attempt,
            hedge = _hedge,
            "no answer yet, but the retry budget is empty; not hedging"
        );
    }
}

/// A copy failed with an error worth retrying while another is still running.
#[inline]
fn log_copy_failed(_function: &'static str, _attempt: u32, _hedge: u16) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        function = _function,
        attempt = _attempt,
        hedge = _hedge,
        "a copy failed; waiting for the others"
    );
}

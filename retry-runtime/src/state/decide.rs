//! The decision after an attempt that did not end in an accepted `Ok`: pause and retry, return
//! the outcome, or give up (and why), with the hooks and the fallback that hear it.
//!
//! The generic part is what only the loop's own types can do (ask the classifier, call the
//! user's hooks, run the fallback); the decision itself is the call's decider's if it has one
//! (the decision seam, [`Decide`](super::Decide), held to the engine's limits by
//! [`within_bounds`]), else the policy's ([`schedule`]); both end in the same limits
//! ([`within_limits`]). These and the events ([`observe`](super::observe)) are not generic, so
//! each function that retries compiles only the first.

use super::extras::Linger;
use super::hooks::HookSet;
use super::log::Show;
use super::observe::{self, End, Event, Shown, Sink};
use super::options::{Classifier, Head};
use super::seam::Next;
use super::{Attempted, GiveUp, GiveUpReason, Loop, Opts, Progress, Retry, RetryEvent, Site};
use crate::context::KeySlot;
use crate::policy::nanos;
use crate::{GateOutcome, RetryBudget, Verdict};
use std::ops::ControlFlow;
use std::time::Duration;

impl<'p, T, E, C, S, D, H: HookSet<T, E>, X: Linger<T, E>> Loop<'p, T, E, C, S, D, H, X>
where
    C: Classifier<E>,
    D: Show<E>,
{
    /// `next` for anything but an accepted `Ok`: the state taken apart into separate locals on
    /// this branch alone, the verdict, the decision, the hooks, and the state put back together
    /// with the retry counted. `ok_verdict` is `on_result`'s verdict on a rejected `Ok`.
    ///
    /// Taken apart, not borrowed: `PERFORMANCE.md` §2.
    // RESULTS §3 "one failure sync: Retrier": 188 -> 252 instructions without it (issue 40).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[allow(clippy::type_complexity)]
    pub(super) fn after_failure<Key: KeySlot>(
        self,
        key: Key,
        attempted: Attempted<T, E>,
        ok_verdict: Verdict,
    ) -> ControlFlow<H::Finish<Key>, Self> {
        let Retry {
            site,
            progress,
            mut opts,
            spans,
            value,
        } = self;
        // Under a retrying layer that layer decides (`observe::ended` says so at debug).
        let single = progress.retried_above && !opts.extras.nested_retry();
        // The outcome to return if the loop stops here, whether it may be retried, and what the
        // gate learns from it.
        let shed = matches!(attempted, Attempted::Shed(_));
        if shed {
            let attempt = progress.retries + 1;
            opts.extras
                .report(site.name, Event::GateRejected { attempt });
        }
        let outcome = match attempted {
            Attempted::Refused(refusal) | Attempted::Shed(refusal) if single => {
                let shown = Shown::<T, E, D>::new(Err(refusal));
                observe::ended(
                    site.name,
                    progress.level,
                    End::Nested,
                    progress.retries,
                    shown.failure(),
                );
                return ControlFlow::Break(H::ready(shown.outcome));
            }
            // The body did not run: the attempts are the ones before. The gate that shed it is
            // the loop's own: why is read from it here, not carried by every attempt's outcome
            // (`PERFORMANCE.md` §8).
            Attempted::Refused(refusal) | Attempted::Shed(refusal) => {
                let why = if shed {
                    opts.extras.shed_reason()
                } else {
                    GiveUpReason::BreakerOpen
                };
                return ControlFlow::Break(give_up::<T, E, H, Key, D>(
                    site,
                    progress,
                    opts.hooks,
                    opts.extras.sink(),
                    why,
                    progress.retries,
                    Shown::new(Err(refusal)),
                    key,
                ));
            }
            // The pause of a lingering call is over.
            Attempted::Ended if X::DECIDES => {
                return ControlFlow::Break(Self::end_held(site, progress, opts, key));
            }
            Attempted::Ended => unreachable!("only a decider's extras end an attempt"),
            Attempted::TimedOut(error) => {
                let verdict = opts.head.classify.timed_out(&error);
                (Err(error), verdict, GateOutcome::TimedOut)
            }
            Attempted::Completed(Err(error)) => {
                let verdict = opts.head.classify.verdict(&error);
                (Err(error), verdict, gate_outcome(verdict))
            }
            // `on_result` rejected the value: a transient failure, but when the loop stops, the
            // value is what the call returns.
            Attempted::Completed(Ok(value)) => (Ok(value), ok_verdict, gate_outcome(ok_verdict)),
        };
        let (outcome, verdict, gate) = outcome;
        let shown = Shown::<T, E, D>::new(outcome);
        // Whether the breaker is open after this outcome, by it or by others'.
        let breaker_open = opts.extras.record(verdict.is_retry(), gate, site.clock);
        // The attempt that just ended.
        let attempt = progress.retries + 1;
        if single && verdict.is_retry() {
            observe::ended(
                site.name,
                progress.level,
                End::Nested,
                attempt,
                shown.failure(),
            );
            return ControlFlow::Break(H::ready(shown.outcome));
        }
        // The call's decider if it has one, else the policy: one call that answers `None`
        // without a decider. By value, and a call that is inline only later: without it (a
        // test of a constant instead) the async happy path went from 74 to 89 instructions and
        // a `Retrier`'s failure from 185 to 207 (`bench/RESULTS.md` §3, `PERFORMANCE.md` §2).
        let decided = opts.extras.next(
            attempt,
            verdict,
            shown.outcome.as_ref().err(),
            breaker_open,
            (progress.previous_pause, progress.started, site.clock),
        );
        let step = match decided {
            Some(next) => within_bounds(&site, &progress, next, opts.extras.budget()),
            None => schedule(
                &site,
                &progress,
                verdict,
                breaker_open,
                opts.extras.budget(),
            ),
        };
        match step {
            Step::Pause(pause) => {
                observe::retrying(site.name, attempt, pause, shown.failure());
                opts.extras.report(site.name, Event::Retry { attempt });
                // The event and the elapsed time only for a `notify` that hears them.
                if H::NOTIFY && opts.hooks.notifies() {
                    let event = RetryEvent {
                        function: site.name,
                        attempt,
                        pause: Duration::from_nanos(pause),
                        elapsed: progress.elapsed(site.clock),
                        hedges: u32::from(progress.hedges),
                    };
                    if opts.hooks.notify(shown.outcome, event) {
                        observe::Panics::new(site.name, opts.extras.sink()).report("notify");
                    }
                }
                ControlFlow::Continue(Retry {
                    site,
                    progress: progress.retried_after(pause),
                    opts,
                    spans,
                    value,
                })
            }
            // A permanent error is an answer: logged only if the call retried before it.
            Step::Return => {
                observe::ended(
                    site.name,
                    progress.level,
                    End::Permanent,
                    attempt,
                    shown.failure(),
                );
                ControlFlow::Break(H::ready(shown.outcome))
            }
            Step::GiveUp(reason) => ControlFlow::Break(give_up::<T, E, H, Key, D>(
                site,
                progress,
                opts.hooks,
                opts.extras.sink(),
                reason,
                attempt,
                shown,
                key,
            )),
            // A decider's `Next::Linger`. Only a decider's extras decide it; for the others the
            // constant leaves no code here (`bench/RESULTS.md` §3, the failure rows).
            Step::Linger(pause) if X::DECIDES => Retry {
                site,
                progress,
                opts,
                spans,
                value,
            }
            .linger(pause, shown.outcome),
            // A decider's `Next::Resend`, the same way.
            Step::Resend(pause) if X::DECIDES => Retry {
                site,
                progress,
                opts,
                spans,
                value,
            }
            .resend(pause),
            Step::Linger(_) | Step::Resend(_) => {
                unreachable!("only a decider's extras linger or resend")
            }
        }
    }

    /// A decider's [`Next::Resend`]: the same attempt again after `pause` nanoseconds, with
    /// its number (the retries do not grow) and no retry's event, hook or budget token; the
    /// transparent retry is reported. Out of line: only a resending call comes here.
    #[cold]
    #[inline(never)]
    fn resend<Key: KeySlot>(mut self, pause: u64) -> ControlFlow<H::Finish<Key>, Self> {
        let event = Event::TransparentRetry {
            attempt: self.progress.retries + 1,
        };
        observe::report(self.site.name, event, &());
        self.opts.extras.report(self.site.name, event);
        if self.progress.retries == 0 {
            self.opts.extras.mark_resent();
        }
        self.progress.previous_pause = pause;
        ControlFlow::Continue(self)
    }

    /// A decider's [`Next::Linger`] (`aws2026`'s long-polling rule, after a failure the empty
    /// quota could not pay for): no retry, and no event for the pause (`pause` nanoseconds);
    /// the outcome is held over it, and the next attempt returns it ([`Attempted::Ended`],
    /// [`end_held`](Retry::end_held)). Out of line: only a lingering call comes here.
    #[cold]
    #[inline(never)]
    fn linger<Key: KeySlot>(
        mut self,
        pause: u64,
        outcome: Result<T, E>,
    ) -> ControlFlow<H::Finish<Key>, Self> {
        self.opts.extras.hold(outcome);
        self.progress.previous_pause = pause;
        ControlFlow::Continue(self)
    }

    /// The pause of a lingering call is over: the outcome held over it ends the call, as the
    /// quota's refusal.
    #[cold]
    #[inline(never)]
    fn end_held<Key: KeySlot>(
        site: Site<'p>,
        progress: Progress,
        mut opts: Opts<Head<C, S, D>, H, X>,
        key: Key,
    ) -> H::Finish<Key> {
        let Some(outcome) = opts.extras.take_held() else {
            unreachable!("an attempt ends the call only when the loop holds its outcome")
        };
        give_up::<T, E, H, Key, D>(
            site,
            progress,
            opts.hooks,
            opts.extras.sink(),
            GiveUpReason::Budget,
            progress.retries + 1,
            Shown::new(outcome),
            key,
        )
    }
}

/// What an admission gate learns from an attempt the classifier judged: a throttling answer
/// sheds load, any other answer was handled.
#[inline]
fn gate_outcome(verdict: Verdict) -> GateOutcome {
    if verdict.is_throttled() {
        GateOutcome::Throttled
    } else {
        GateOutcome::Accepted
    }
}

/// The loop gives up after `attempts` attempts, in one step: the final event, the [`GiveUp`]
/// (made only for a hook or a fallback that hears it), `on_give_up`, then the fallback, whose
/// result (or the outcome, without one) ends the call; an async `on_give_up` is awaited first,
/// where the call's end is awaited.
#[inline]
#[allow(clippy::too_many_arguments)]
fn give_up<T, E, H: HookSet<T, E>, Key: KeySlot, D: Show<E>>(
    site: Site<'_>,
    progress: Progress,
    hooks: H,
    sink: Option<&(dyn Sink + Sync)>,
    reason: GiveUpReason,
    attempts: u32,
    shown: Shown<T, E, D>,
    key: Key,
) -> H::Finish<Key> {
    let end = if H::FALLBACK {
        End::Fallback(reason)
    } else {
        End::GaveUp(reason)
    };
    observe::ended(site.name, progress.level, end, attempts, shown.failure());
    let outcome = shown.outcome;
    if !H::HEARS_GIVE_UP || !hooks.hears_give_up() {
        return H::ready(outcome);
    }
    let why = GiveUp {
        function: site.name,
        reason,
        attempts,
        elapsed: progress.elapsed(site.clock),
    };
    let scope = super::fallback_scope(progress, attempts, key);
    hooks.gave_up(outcome, why, scope, observe::Panics::new(site.name, sink))
}

/// What follows a failure by the call's decider (the decision seam), within the engine's
/// limits: a retry it asks for is still held to the deadline and the budget
/// ([`within_limits`]), and a lingering pause to the deadline. Out of line, and not generic:
/// only a call with a decider comes here.
#[cold]
fn within_bounds(
    site: &Site<'_>,
    progress: &Progress,
    next: Next,
    budget: Option<&RetryBudget>,
) -> Step {
    match next {
        Next::Retry(pause) => within_limits(site, progress, nanos(pause), budget),
        Next::Return => Step::Return,
        Next::GiveUp(reason) => Step::GiveUp(reason),
        Next::Linger(pause) if !past_deadline(site, progress, nanos(pause)) => {
            Step::Linger(nanos(pause))
        }
        Next::Linger(_) => Step::GiveUp(GiveUpReason::Budget),
        Next::Resend(pause) if !past_deadline(site, progress, nanos(pause)) => {
            Step::Resend(nanos(pause))
        }
        Next::Resend(_) => Step::GiveUp(GiveUpReason::Deadline),
    }
}

/// What follows a failure, by the policy and the limits.
pub(crate) enum Step {
    /// Retry after this pause, in nanoseconds.
    Pause(u64),
    /// Return the outcome as it is: the failure is permanent.
    Return,
    /// Stop retrying a failure that could have been retried.
    GiveUp(GiveUpReason),
    /// Pause this long (nanoseconds), then give up as the quota's refusal
    /// ([`GiveUpReason::Budget`]), without another attempt: a decider's [`Next::Linger`].
    Linger(u64),
    /// The same attempt again after this pause (nanoseconds), not counted as a retry: a
    /// decider's [`Next::Resend`].
    Resend(u64),
}

/// The pause before the next attempt, or why there is none. Not generic, and inline where the
/// policy is a constant, for its arithmetic to fold: `PERFORMANCE.md` §3.
// RESULTS §3 "one failure sync: #[retry]": 47 -> 166 instructions without it (issue 40).
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn schedule(
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
        // A throttled attempt: the same arithmetic on the throttling base.
        Verdict::Throttled => policy
            .for_throttling()
            .delay_nanos(retry, progress.previous_pause),
        Verdict::ThrottledAfter(asked) => {
            if asked > policy.get_max_delay() {
                return Step::GiveUp(GiveUpReason::SuggestedTooLong(asked));
            }
            policy.for_throttling().delay_nanos_at_least(
                retry,
                progress.previous_pause,
                nanos(asked),
            )
        }
        _ => policy.delay_nanos(retry, progress.previous_pause),
    };
    within_limits(site, progress, pause, budget)
}

/// A pause of `pause` nanoseconds, unless it would end past the deadline or the budget has no
/// token for the retry after it.
#[inline]
fn within_limits(
    site: &Site<'_>,
    progress: &Progress,
    pause: u64,
    budget: Option<&RetryBudget>,
) -> Step {
    if past_deadline(site, progress, pause) {
        return Step::GiveUp(GiveUpReason::Deadline);
    }
    if let Some(budget) = budget {
        if !budget.try_withdraw((site.clock)()) {
            return Step::GiveUp(GiveUpReason::Budget);
        }
    }
    Step::Pause(pause)
}

/// Whether a pause of `pause` nanoseconds would end past the policy's deadline, if it has one.
#[inline]
fn past_deadline(site: &Site<'_>, progress: &Progress, pause: u64) -> bool {
    site.policy.get_deadline().is_some_and(|deadline| {
        progress
            .elapsed(site.clock)
            .saturating_add(Duration::from_nanos(pause))
            > deadline
    })
}

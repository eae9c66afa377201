//! A hedged attempt (`hedge = "50ms"`, `max_hedges = 2`): the attempt and the copies started
//! beside it when it is slow, raced; the first acceptable answer wins and the others are dropped.
//!
//! What the rest of the loop sees is one attempt: [`run_hedged`](Retry::run_hedged) returns
//! what it ended with, and `next` decides as for any attempt. Inside, three steps:
//!
//! - the schedule ([`Schedule`]): the attempt starts as any other (`enter`: the budget's deposit
//!   on the first one, the breaker's permission); copy `k` is due `k` × [`Hedge::delay`] after
//!   the attempt started (gRPC's hedging policy: one delay between copies), up to `max_hedges`,
//!   and starts if the breaker admits it and the budget gives a token for it (no permission or
//!   no token: no more copies for this attempt). Each copy's time is counted from the attempt's
//!   start, not from when the previous copy's timer was seen, so that a late poll does not push
//!   the later copies back;
//! - the race (in `run_hedged_lending`): every copy runs with the attempt's frame (its number, its
//!   key, `attempt().hedge()` its index) and, with `timeout`, its own timer; an acceptable answer
//!   (an `Ok` that `on_result` does not reject, or an error the classifier says not to retry: the
//!   service answered, and a copy would say the same) ends the attempt; a failure worth retrying
//!   ends it only if no other copy is still running: one copy's reset connection does not cancel
//!   another that may still answer. Such a failure is recorded with the breaker at once, and a
//!   decider, if the call has one, says when the next copy goes
//!   ([`Decide::copy_failed`](super::Decide::copy_failed): on schedule, now, after a pause of
//!   its own, or never), for every copy that fails so, the last included: after the only
//!   running copy failed, "now" or "after a pause" starts the next copy instead of ending the
//!   attempt, which ends with the last failure when nothing runs and nothing will come. The
//!   copies after one a decider started follow one delay apart from it. A decider may refuse a
//!   copy whose timer fired ([`Decide::copy_due`](super::Decide::copy_due)), before the
//!   breaker and the budget. A decider may also start the failed copy itself again after a
//!   pause ([`NextCopy::Resend`]: a copy that never reached its server), with its hedge number,
//!   the breaker's permission and no token: not a new copy. The failure that ends the attempt is recorded by `next`, as always
//!   (or, if recorded as it failed, the breaker is asked whether it is open);
//! - the outcome: the copies still running when the attempt ends are
//!   dropped, which cancels them (a dropped breaker permission counts as nothing while the
//!   circuit is closed), the attempt's latency is recorded for a percentile delay, and the
//!   winner's outcome is the attempt's.
//!
//! The classifier and `on_result` are asked here and again by `next` for the outcome that ends
//! the attempt: both are expected to be pure functions of the outcome, as everywhere else.

use super::attempt::{KeyedOutcome, WithKey};
use super::extras::{Linger, Timeout};
use super::hooks::HookSet;
use super::observe::{self, Event};
use super::options::{Classifier, Head};
use super::seam::{Failure, NextCopy};
use super::{Attempted, Opts, Retry};
use crate::context::{Enter, Frame, KeySlot, Scoped};
use crate::timer::{Elapsed, Sleeper, Timed};
use crate::{Hedge, Verdict};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

/// A running copy: the body in its frame, raced against `timeout` if there is one; its breaker
/// permission, and when the attempt itself started (for the percentile form).
struct Running<A, F> {
    future: Pin<Box<F>>,
    admission: Option<A>,
    started: Option<Instant>,
    hedge: u16,
}

/// A timer, boxed to be polled in place, if one runs.
type Timer<Sl> = Option<Pin<Box<Sl>>>;

/// When the copies of one attempt are due, and how many may start.
struct Schedule<'h, Sl> {
    hedge: &'h Hedge,
    /// The most copies beside the attempt.
    max_hedges: u32,
    /// The copies started so far.
    hedges: u16,
    /// With more than one copy, when the schedule's count starts and the copy started then:
    /// copy `k` is due `k - j` delays after the start of copy `j` (gRPC's rule), however late
    /// copy `k - 1` was started. `j` is 0 (the attempt) until a decider starts a copy off the
    /// schedule ([`NextCopy::Now`], [`NextCopy::After`]): the copies after it count from it.
    origin: Option<(Instant, u16)>,
    /// The timer of the next copy.
    timer: Timer<Sl>,
    /// A decider asked for the next copy at once ([`NextCopy::Now`]).
    now: bool,
    /// The next copy's time is a decider's ([`NextCopy::Now`], [`NextCopy::After`]).
    decided: bool,
}

/// Why the next copy is due.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Due {
    /// A decider said now ([`NextCopy::Now`]).
    Now,
    /// Its timer fired: the schedule's, or a decider's [`NextCopy::After`].
    Timer,
}

impl<'h, Sl: Future<Output = ()>> Schedule<'h, Sl> {
    /// Whether the next copy is due now, and why (its timer polled once if not).
    fn due(&mut self, cx: &mut TaskContext<'_>) -> Option<Due> {
        if std::mem::take(&mut self.now) {
            return Some(Due::Now);
        }
        let sleep = self.timer.as_mut()?;
        if sleep.as_mut().poll(cx).is_pending() {
            return None;
        }
        self.timer = None;
        Some(Due::Timer)
    }

    /// No more copies for this attempt.
    fn stop(&mut self) {
        self.timer = None;
        self.now = false;
        self.max_hedges = u32::from(self.hedges);
    }

    /// A copy has started: the timer of the next one, if any may follow.
    fn started<S: Sleeper<Sleep = Sl>>(&mut self, sleeper: &S, clock: fn() -> Instant) {
        self.hedges += 1;
        if std::mem::take(&mut self.decided) {
            // Off the schedule: the copies after this one count from it.
            self.origin = self.origin.map(|_| (clock(), self.hedges));
        }
        if u32::from(self.hedges) >= self.max_hedges {
            return;
        }
        self.timer = self.hedge.delay().map(|delay| {
            let wait: Duration = self.origin.map_or(delay, |(started, copy)| {
                let due = delay.saturating_mul(u32::from(self.hedges - copy) + 1);
                due.saturating_sub(clock().saturating_duration_since(started))
            });
            Box::pin(sleeper.sleep(wait))
        });
    }

    /// A decider's word on the next copy, after a copy failed: `true` if the schedule changed,
    /// so that the race looks at it again (a copy to start at once, a timer to poll once).
    fn decided<S: Sleeper<Sleep = Sl>>(&mut self, next: NextCopy, sleeper: &S) -> bool {
        // Every copy has started: nothing to bring forward or put back.
        if u32::from(self.hedges) >= self.max_hedges {
            return false;
        }
        match next {
            NextCopy::Now => {
                self.timer = None;
                self.now = true;
                self.decided = true;
                true
            }
            NextCopy::After(wait) => {
                self.timer = Some(Box::pin(sleeper.sleep(wait)));
                self.decided = true;
                true
            }
            NextCopy::Never => {
                self.stop();
                false
            }
            // `OnSchedule`, or a word this version does not know: the schedule stands.
            _ => false,
        }
    }
}

impl<'p, T, E, C, S, D, H, X> Retry<'p, T, E, Opts<Head<C, S, D>, H, X>>
where
    C: Classifier<E>,
    S: Sleeper,
    H: HookSet<T, E>,
    X: Linger<T, E>,
{
    /// Runs one attempt of an async loop with `hedge`: `make` makes the body's future, once for
    /// the attempt and once for each copy (`|| async { body }`), inside the copy's attempt
    /// context; every copy borrows the loop's idempotency key, if it has one. See the module's
    /// documentation for what wins.
    pub async fn run_hedged<M, F>(&mut self, hedge: &Hedge, make: M) -> Attempted<T, E>
    where
        M: Fn() -> F,
        F: Future<Output = Result<T, E>>,
    {
        self.run_hedged_lending((), hedge, make).await
    }

    /// [`run_hedged`](Retry::run_hedged) with `key` lent to every copy (`()` for none): the
    /// race of the attempt and each copy as the schedule makes it due, until one ends the
    /// attempt (see the module's documentation), and the winner's outcome, with its breaker
    /// permission put back for `next` to record and the hedges counted for the attempt's event.
    pub(crate) async fn run_hedged_lending<Key: KeySlot, M, F>(
        &mut self,
        key: Key,
        hedge: &Hedge,
        make: M,
    ) -> Attempted<T, E>
    where
        M: Fn() -> F,
        F: Future<Output = Result<T, E>>,
    {
        let frame = match self.enter_async(key.kind()).await {
            Ok(frame) => frame,
            Err(refused) => return refused,
        };
        // An injected error ends the attempt before any copy; a latency is added to each copy.
        #[cfg(feature = "faults")]
        let latency = match self.planned(frame.attempt) {
            Some(crate::faults::Planned::Fail(error)) => {
                return Attempted::Completed(Err(error.make()));
            }
            Some(crate::faults::Planned::Late(latency)) => Some(latency),
            None => None,
        };
        // Each copy's limit, clipped as the attempt starts.
        let timeout = self.opts.extras.timeout();
        let limit = timeout.map(|t| self.clipped_limit(t.limit));
        // Under a layer that retries this work, no copies either (unless `nested = retry`):
        // that layer decides how much work one request may cause.
        let single = self.progress.retried_above && !self.opts.extras.nested_retry();
        // At most `u16::MAX` copies: the frame numbers them in 16 bits.
        let max_hedges = if single {
            0
        } else {
            hedge.get_max_hedges().min(u32::from(u16::MAX))
        };
        let (site, progress) = (&self.site, self.progress);
        let (clock, name, deadline) = (site.clock, site.name, site.policy.get_deadline());
        let (classify, sleeper) = (&self.opts.head.classify, &self.opts.head.sleeper);
        let (hooks, extras) = (&self.opts.hooks, &mut self.opts.extras);
        // The schedule of an attempt that starts now.
        let mut schedule = Schedule {
            hedge,
            max_hedges,
            hedges: 0,
            origin: (max_hedges > 1).then(|| (clock(), 0)),
            timer: match hedge.delay() {
                Some(delay) if max_hedges > 0 => Some(Box::pin(sleeper.sleep(delay))),
                _ => None,
            },
            now: false,
            decided: false,
        };
        let observes = hedge.observes();
        // The latency of the attempt itself, for the percentile form (a copy's is not recorded).
        let record = |started: Option<Instant>| {
            if let Some(started) = started {
                let now = clock();
                hedge.record(now.saturating_duration_since(started), now);
            }
        };
        let copy = |hedge: u16, admission: Option<X::Admission>| {
            let frame = Frame { hedge, ..frame };
            let body = {
                let _entered = Enter::new(frame);
                key.lend(&make)
            };
            #[cfg(feature = "faults")]
            let body = crate::faults::Faulty::new(latency, body);
            let scoped = Scoped::new(frame, key, body);
            let timer = limit.map(|limit| (sleeper.sleep(limit), limit));
            let future = async move {
                match timer {
                    Some((sleep, limit)) => Timed::new(scoped, sleep, limit).await,
                    None => Ok(scoped.await),
                }
            };
            Running {
                future: Box::pin(future),
                admission,
                started: (observes && hedge == 0).then(clock),
                hedge,
            }
        };
        let mut running = vec![copy(frame.hedge, extras.take_admission())];
        // With a decider, the failure of the last copy that ran while the next one is due: the
        // attempt's if that one does not start (its breaker permission already recorded).
        let mut last: Option<Result<Result<T, E>, Elapsed>> = None;
        // The copies a decider sends again ([`NextCopy::Resend`]): each one's hedge number, and
        // its pause (none for a zero one).
        let mut resends: Vec<(u16, Timer<S::Sleep>)> = Vec::new();
        let (outcome, admission) = std::future::poll_fn(|cx| {
            loop {
                // Start again the copies whose pause is over, each with the breaker's
                // permission (refused: it stays failed); no token, not a new copy.
                resends.retain_mut(|(hedge, pause)| {
                    let over =
                        (pause.as_mut()).is_none_or(|pause| pause.as_mut().poll(cx).is_ready());
                    if over && extras.admit(clock).is_ok() {
                        running.push(copy(*hedge, extras.take_admission()));
                        last = None;
                    }
                    !over
                });
                // Start the copies whose time has come, and poll each new timer once: the
                // decider's word on a copy its timer made due, then the breaker's permission,
                // then a token from the budget; without any, no more copies for this attempt.
                while let Some(due) = schedule.due(cx) {
                    let next = schedule.hedges + 1;
                    let refused = X::DECIDES
                        && due == Due::Timer
                        && extras.decides()
                        && !extras.copy_due(next);
                    if refused || extras.admit(clock).is_err() {
                        schedule.stop();
                        break;
                    }
                    let admission = extras.take_admission();
                    let token = (extras.budget()).is_none_or(|budget| budget.try_withdraw(clock()));
                    observe::hedged(name, frame.attempt, next, token);
                    if !token {
                        schedule.stop();
                        break;
                    }
                    let hedge = u32::from(next);
                    extras.report(name, Event::HedgedCopy { hedge });
                    running.push(copy(next, admission));
                    schedule.started(sleeper, clock);
                    last = None;
                }
                // Nothing runs and nothing will come (no copy due now, no timer running): the
                // last failure is the attempt's.
                let pending = schedule.now || schedule.timer.is_some();
                if running.is_empty() && resends.is_empty() && !pending {
                    if let Some(outcome) = last.take() {
                        return Poll::Ready((outcome, None));
                    }
                }
                // A decider changed the schedule: look at it again before waiting.
                let mut again = false;
                let mut i = 0;
                while i < running.len() {
                    let Poll::Ready(outcome) = running[i].future.as_mut().poll(cx) else {
                        i += 1;
                        continue;
                    };
                    let done = running.swap_remove(i);
                    record(done.started);
                    let verdict = match &outcome {
                        Ok(Ok(value)) => hooks.judge(value),
                        Ok(Err(error)) => classify.verdict(error),
                        Err(_) => Verdict::Retry,
                    };
                    let decides = X::DECIDES && extras.decides();
                    if !verdict.is_retry() || (!decides && running.is_empty()) {
                        return Poll::Ready((outcome, done.admission));
                    }
                    // A failure worth retrying, and a decider to ask about the next copy (once
                    // for every such copy, the last included), or another copy still running.
                    // The decider sees a timed-out copy's error made the door's (`timeout`'s)
                    // and judged by `timed_out`.
                    let changed = decides && {
                        let made;
                        let (error, verdict) = match &outcome {
                            Ok(Ok(_)) => (None, verdict),
                            Ok(Err(error)) => (Some(error), verdict),
                            Err(elapsed) => {
                                made = elapsed_error(timeout, *elapsed);
                                (Some(&made), classify.timed_out(&made))
                            }
                        };
                        let next = extras.copy_failed(&Failure {
                            attempt: frame.attempt,
                            copy: done.hedge,
                            verdict,
                            error,
                            previous_pause: Duration::from_nanos(progress.previous_pause),
                            elapsed: progress.elapsed(clock),
                        });
                        // Nothing runs: a pause that would end past the policy's deadline is
                        // not waited for, as a retry's is not (`within_limits`); the attempt
                        // ends with this failure.
                        let past_deadline = |wait: Duration| {
                            deadline.is_some_and(|deadline| {
                                progress.elapsed(clock).saturating_add(wait) > deadline
                            })
                        };
                        match next {
                            NextCopy::After(wait) if running.is_empty() && past_deadline(wait) => {
                                schedule.decided(NextCopy::Never, sleeper)
                            }
                            // The same copy again, its pause held to the deadline as a
                            // resent attempt's is (past it: the copy stays failed).
                            NextCopy::Resend(pause) if !past_deadline(pause) => {
                                let attempt = frame.attempt;
                                observe::report(name, Event::TransparentRetry { attempt }, &());
                                extras.report(name, Event::TransparentRetry { attempt });
                                let pause =
                                    (!pause.is_zero()).then(|| Box::pin(sleeper.sleep(pause)));
                                resends.push((done.hedge, pause));
                                true
                            }
                            NextCopy::Resend(_) => false,
                            next => schedule.decided(next, sleeper),
                        }
                    };
                    if running.is_empty() && !changed {
                        // The only copy failed and the decider brings none forward.
                        return Poll::Ready((outcome, done.admission));
                    }
                    if let Some(admission) = done.admission {
                        X::record_admission(admission, false, clock());
                    }
                    observe::copy_failed(name, frame.attempt, done.hedge);
                    if running.is_empty() {
                        last = Some(outcome);
                    }
                    again |= changed;
                }
                if !again {
                    return Poll::Pending;
                }
            }
        })
        .await;
        // The attempt itself, dropped unanswered: at least this slow.
        record(running.iter().find_map(|r| r.started));
        drop(running);
        self.progress.hedges = schedule.hedges;
        self.opts.extras.put_admission(admission);
        match outcome {
            Ok(outcome) => Attempted::Completed(outcome),
            Err(elapsed) => Attempted::TimedOut(elapsed_error(timeout, elapsed)),
        }
    }
}

/// A timed-out copy's error, made by `timeout` (without one, there is no timer to elapse).
#[cold]
fn elapsed_error<E>(timeout: Option<Timeout<E>>, elapsed: Elapsed) -> E {
    match timeout {
        Some(Timeout { error, .. }) => error(elapsed),
        None => unreachable!(
            "a copy without `timeout` timed out after {:?}",
            elapsed.limit()
        ),
    }
}

impl<T, E, C, S, D, H, X, Key> WithKey<'_, '_, T, E, Opts<Head<C, S, D>, H, X>, Key>
where
    C: Classifier<E>,
    S: Sleeper,
    H: HookSet<T, E>,
    X: Linger<T, E>,
    Key: KeySlot,
{
    /// [`Retry::run_hedged`] with the key lent to every copy.
    pub async fn run_hedged<M, F>(self, hedge: &Hedge, make: M) -> KeyedOutcome<T, E, Key>
    where
        M: Fn() -> F,
        F: Future<Output = Result<T, E>>,
    {
        let key = self.key;
        KeyedOutcome {
            attempted: self.state.run_hedged_lending(key, hedge, make).await,
            key,
        }
    }
}

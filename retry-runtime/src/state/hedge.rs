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
//! - the race ([`race`](Retry::race)): every copy runs with the attempt's frame (its number, its
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
//! - the outcome ([`Retry::hedged_outcome`]): the copies still running when the attempt ends are
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
use super::{Attempted, Opts, Progress, Retry};
use crate::context::{Enter, Frame, KeySlot, Scoped};
use crate::timer::{Elapsed, Sleeper, Timed};
use crate::{Hedge, Verdict};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

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
struct Running<A, F, Sl> {
    future: Pin<Box<Copy<F, Sl>>>,
    admission: Option<A>,
    started: Option<Instant>,
    hedge: u16,
}

/// A copy a decider sends again ([`NextCopy::Resend`]): its hedge number, and its pause (none
/// for a zero one).
struct Resend<Sl> {
    hedge: u16,
    pause: Option<Pin<Box<Sl>>>,
}

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
    timer: Option<Pin<Box<Sl>>>,
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
    /// The schedule of an attempt that starts now.
    fn new<S: Sleeper<Sleep = Sl>>(
        hedge: &'h Hedge,
        max_hedges: u32,
        sleeper: &S,
        clock: fn() -> Instant,
    ) -> Self {
        Schedule {
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
        }
    }

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

    /// Whether a copy is still to come (due now, or a timer running).
    fn pending(&self) -> bool {
        self.now || self.timer.is_some()
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

    /// [`run_hedged`](Retry::run_hedged) with `key` lent to every copy (`()` for none).
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
        let clock = self.site.clock;
        let timeout = self.opts.extras.timeout();
        // Each copy's limit, clipped as the attempt starts.
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
        let sleeper = &self.opts.head.sleeper;
        let mut schedule = Schedule::new(hedge, max_hedges, sleeper, clock);
        let (outcome, admission) = self.race(frame, key, limit, &mut schedule, &make).await;
        self.hedged_outcome(outcome, admission, schedule.hedges, timeout)
    }

    /// The end of a hedged attempt: the winner's outcome, with its breaker permission put back
    /// for `next` to record, and the hedges counted for the attempt's event.
    fn hedged_outcome(
        &mut self,
        outcome: Result<Result<T, E>, Elapsed>,
        admission: Option<X::Admission>,
        hedges: u16,
        timeout: Option<Timeout<E>>,
    ) -> Attempted<T, E> {
        self.progress.hedges = hedges;
        self.opts.extras.put_admission(admission);
        match outcome {
            Ok(outcome) => Attempted::Completed(outcome),
            Err(elapsed) => match timeout {
                Some(Timeout { error, .. }) => Attempted::TimedOut(error(elapsed)),
                // Without a timeout there is no timer to elapse.
                None => unreachable_elapsed(elapsed),
            },
        }
    }

    /// The race of one hedged attempt: the attempt, and each copy as `schedule` makes it due, until
    /// one ends the attempt (see the module's documentation). The winner's outcome and its breaker
    /// permission.
    async fn race<Key, M, F>(
        &mut self,
        frame: Frame,
        key: Key,
        limit: Option<Duration>,
        schedule: &mut Schedule<'_, <S as Sleeper>::Sleep>,
        make: &M,
    ) -> (Result<Result<T, E>, Elapsed>, Option<X::Admission>)
    where
        Key: KeySlot,
        M: Fn() -> F,
        F: Future<Output = Result<T, E>>,
    {
        let clock = self.site.clock;
        let name = self.site.name;
        let deadline = self.site.policy.get_deadline();
        let progress = self.progress;
        let Retry { opts, .. } = self;
        let Opts {
            head,
            hooks,
            extras,
        } = opts;
        let (classify, sleeper) = (&head.classify, &head.sleeper);
        let observes = schedule.hedge.observes();
        let copy = |frame: Frame, admission: Option<X::Admission>| {
            let body = {
                let _entered = Enter::new(frame);
                key.lend(make)
            };
            let scoped = Scoped::new(frame, key, body);
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
        let timeout = extras.timeout();
        let admission = extras.take_admission();
        let mut running = vec![copy(frame, admission)];
        // With a decider, the failure of the last copy that ran while the next one is due: the
        // attempt's if that one does not start (its breaker permission already recorded).
        let mut last: Option<Result<Result<T, E>, Elapsed>> = None;
        let mut resends: Vec<Resend<S::Sleep>> = Vec::new();
        let (outcome, admission) = std::future::poll_fn(|cx| {
            loop {
                // Start again the copies whose pause is over, each with the breaker's
                // permission (refused: it stays failed); no token, not a new copy.
                let mut j = 0;
                while j < resends.len() {
                    if let Some(pause) = resends[j].pause.as_mut() {
                        if pause.as_mut().poll(cx).is_pending() {
                            j += 1;
                            continue;
                        }
                    }
                    let hedge = resends.swap_remove(j).hedge;
                    if extras.admit(clock).is_ok() {
                        let admission = extras.take_admission();
                        running.push(copy(Frame { hedge, ..frame }, admission));
                        last = None;
                    }
                }
                // Start the copies whose time has come, and poll each new timer once.
                while let Some(due) = schedule.due(cx) {
                    // The decider's word on a copy its timer made due, then the breaker's
                    // permission, then a token from the budget: without any, no more copies for
                    // this attempt.
                    if X::DECIDES
                        && due == Due::Timer
                        && extras.decides()
                        && !extras.copy_due(schedule.hedges + 1)
                    {
                        schedule.stop();
                        break;
                    }
                    if extras.admit(clock).is_err() {
                        schedule.stop();
                        break;
                    }
                    let admission = extras.take_admission();
                    if let Some(budget) = extras.budget() {
                        if !budget.try_withdraw(clock()) {
                            observe::hedged(name, frame.attempt, schedule.hedges + 1, false);
                            schedule.stop();
                            break;
                        }
                    }
                    observe::hedged(name, frame.attempt, schedule.hedges + 1, true);
                    let hedge = u32::from(schedule.hedges + 1);
                    extras.report(name, Event::HedgedCopy { hedge });
                    running.push(copy(
                        Frame {
                            hedge: schedule.hedges + 1,
                            ..frame
                        },
                        admission,
                    ));
                    schedule.started(sleeper, clock);
                    last = None;
                }
                // Nothing runs and nothing will come: the last failure is the attempt's.
                if running.is_empty() && resends.is_empty() && !schedule.pending() {
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
                    if done.hedge == 0 {
                        if let Some(started) = done.started {
                            let now = clock();
                            schedule
                                .hedge
                                .record(now.saturating_duration_since(started), now);
                        }
                    }
                    let verdict = match &outcome {
                        Ok(Ok(value)) => hooks.judge(value),
                        Ok(Err(error)) => classify.verdict(error),
                        Err(_) => Verdict::Retry,
                    };
                    if !verdict.is_retry() {
                        return Poll::Ready((outcome, done.admission));
                    }
                    let decides = X::DECIDES && extras.decides();
                    if !decides && running.is_empty() {
                        return Poll::Ready((outcome, done.admission));
                    }
                    // A failure worth retrying, and a decider to ask about the next copy (once
                    // for every such copy, the last included), or another copy still running.
                    let changed = decides && {
                        let next = copy_decided(
                            extras,
                            Failed {
                                attempt: frame.attempt,
                                copy: done.hedge,
                                verdict,
                                outcome: &outcome,
                            },
                            |error| classify.timed_out(error),
                            timeout,
                            progress,
                            clock,
                        );
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
                                resends.push(Resend {
                                    hedge: done.hedge,
                                    pause,
                                });
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
        if let Some(started) = running
            .iter()
            .find(|r| r.hedge == 0)
            .and_then(|r| r.started)
        {
            let now = clock();
            schedule
                .hedge
                .record(now.saturating_duration_since(started), now);
        }
        drop(running);
        (outcome, admission)
    }
}

/// A copy that failed while others run, as the race saw it.
struct Failed<'o, T, E> {
    attempt: u32,
    copy: u16,
    /// The race's verdict: the classifier's, `on_result`'s, or a retry for a timed-out copy.
    verdict: Verdict,
    outcome: &'o Result<Result<T, E>, Elapsed>,
}

/// The decider's word on the next copy after `failed` ([`Decide::copy_failed`]): the failure as
/// it sees it, a timed-out copy's error made the door's (`timeout`'s) and judged by
/// `timed_out`. Out of line: only a hedged call with a decider comes here.
///
/// [`Decide::copy_failed`]: super::Decide::copy_failed
#[cold]
#[inline(never)]
fn copy_decided<T, E, X: Linger<T, E>>(
    extras: &mut X,
    failed: Failed<'_, T, E>,
    timed_out: impl Fn(&E) -> Verdict,
    timeout: Option<Timeout<E>>,
    progress: Progress,
    clock: fn() -> Instant,
) -> NextCopy {
    let made;
    let (error, verdict) = match failed.outcome {
        Ok(Ok(_)) => (None, failed.verdict),
        Ok(Err(error)) => (Some(error), failed.verdict),
        Err(elapsed) => match timeout {
            Some(Timeout { error, .. }) => {
                made = error(*elapsed);
                (Some(&made), timed_out(&made))
            }
            None => unreachable_elapsed(*elapsed),
        },
    };
    extras.copy_failed(&Failure {
        attempt: failed.attempt,
        copy: failed.copy,
        verdict,
        error,
        previous_pause: Duration::from_nanos(progress.previous_pause),
        elapsed: progress.elapsed(clock),
    })
}

#[cold]
fn unreachable_elapsed<T>(elapsed: Elapsed) -> T {
    unreachable!(
        "a copy without `timeout` timed out after {:?}",
        elapsed.limit()
    )
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

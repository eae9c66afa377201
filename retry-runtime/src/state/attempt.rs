//! Running one attempt: the breaker's permission, the attempt context around the body, the
//! timeout; and what happened to the attempt, as a value for the decision.

use super::extras::{IntoError, MaybeExtras};
use super::hooks::HookSet;
use super::options::HeadSet;
use super::spans::AttemptSpan;
use super::{Opts, Retry};
use crate::context::{Enter, Frame, KeyKind, KeySlot, Scoped};
use crate::timer::{Sleeper, Timed};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

/// What happened to one attempt.
pub enum Attempted<T, E> {
    /// The body ran to its end.
    Completed(Result<T, E>),
    /// The circuit breaker refused the attempt and the body did not run: its refusal, as the
    /// loop's error.
    Refused(E),
    /// `timeout` cut the body off: its expiry, as the loop's error.
    TimedOut(E),
}

impl<'p, T, E, K: HeadSet, H: HookSet<T, E>, X: MaybeExtras<E>> Retry<'p, T, E, Opts<K, H, X>> {
    /// The first attempt starts: a hook that hears the time gets the time the call started
    /// (`start` read it already if the policy has a deadline), and the budget gets this call's
    /// deposit.
    #[inline(always)]
    fn begin(&mut self) {
        if H::TIMED && self.opts.hooks.timed() && self.progress.started.is_none() {
            self.progress.started = Some((self.site.clock)());
        }
        if let Some(budget) = self.opts.extras.budget() {
            budget.deposit();
        }
    }

    /// The frame the next attempt runs in (which says whether it has a key); or the breaker's
    /// refusal.
    #[inline(always)]
    pub(crate) fn enter(&mut self, key: KeyKind) -> Result<Frame, X::Refusal> {
        if self.progress.retries == 0 {
            self.begin();
        }
        self.opts.extras.admit(self.site.clock)?;
        Ok(Frame {
            attempt: self.progress.retries + 1,
            key,
            retried_above: self.progress.retried_above || self.site.policy.get_max() > 0,
            hedge: 0,
        })
    }

    /// The span of the attempt about to start (feature `attempt-spans`).
    #[inline(always)]
    pub(crate) fn attempt_span(&mut self) -> AttemptSpan {
        self.spans.attempt(
            self.site.name,
            self.progress.retries,
            self.progress.previous_pause,
        )
    }

    /// Runs one attempt of a sync loop, with the attempt context in place and the idempotency
    /// key `key` lent to it (`()` for none): [`attempt()`](crate::attempt)`.key()` renders it
    /// only if the body asks.
    #[inline(always)]
    pub fn attempt(&mut self, body: impl FnOnce() -> Result<T, E>) -> Attempted<T, E> {
        let key = self.opts.head.key();
        let frame = match self.enter(key.kind()) {
            Ok(frame) => frame,
            Err(refusal) => return Attempted::Refused(refusal.into_error()),
        };
        let _span = self.attempt_span().entered();
        let _entered = Enter::new(frame);
        Attempted::Completed(key.lend(body))
    }

    /// Runs one attempt of an async loop, with the attempt context in place on every poll and
    /// the key `key` lent to it (`()` for none). The returned future holds only the frame, the
    /// key's reference and the body's future, not the loop state.
    #[inline(always)]
    pub fn run<F>(
        &mut self,
        body: F,
    ) -> impl Future<Output = Attempted<T, E>> + use<T, E, K, H, X, F>
    where
        F: Future<Output = Result<T, E>>,
    {
        let key = self.opts.head.key();
        match self.enter(key.kind()) {
            Ok(frame) => Run::Attempt {
                scoped: Scoped::new(frame, key, self.attempt_span().instrument(body)),
            },
            Err(refusal) => Run::<_, _, X::Refusal>::Refused { refusal },
        }
    }

    /// [`run`](Retry::run) with `timeout`: the attempt races the timer, whose limit is clipped to
    /// the time left before the deadline. `make` makes the body's future inside the attempt's
    /// context, so that a closure that reads [`attempt()`](crate::attempt) as it makes the
    /// future reads this attempt. A method of its own: `PERFORMANCE.md` §4.
    #[inline(always)]
    pub fn run_timed<F>(&mut self, body: F) -> impl Future<Output = Attempted<T, E>>
    where
        K::Sleeper: Sleeper,
        F: Future<Output = Result<T, E>>,
    {
        self.run_made(|| body)
    }

    /// One attempt of [`drive`](super::drive) and of `run_timed`: the body's future made by
    /// `make` inside the attempt's context, raced against `timeout` if there is one.
    pub(crate) async fn run_made<F>(&mut self, make: impl FnOnce() -> F) -> Attempted<T, E>
    where
        K::Sleeper: Sleeper,
        F: Future<Output = Result<T, E>>,
    {
        let key = self.opts.head.key();
        let frame = match self.enter(key.kind()) {
            Ok(frame) => frame,
            Err(refusal) => return Attempted::Refused(refusal.into_error()),
        };
        let body = {
            let _entered = Enter::new(frame);
            key.lend(make)
        };
        let attempt = Scoped::new(frame, key, self.attempt_span().instrument(body));
        let Some(timeout) = self.opts.extras.timeout() else {
            return Attempted::Completed(attempt.await);
        };
        let limit = match (self.site.policy.get_deadline(), self.progress.started) {
            (Some(deadline), Some(_)) => timeout
                .limit
                .min(deadline.saturating_sub(self.progress.elapsed(self.site.clock))),
            _ => timeout.limit,
        };
        let (_, sleeper) = self.opts.head.parts();
        match Timed::new(attempt, sleeper.sleep(limit), limit).await {
            Ok(outcome) => Attempted::Completed(outcome),
            Err(elapsed) => Attempted::TimedOut((timeout.error)(elapsed)),
        }
    }
}

pin_project_lite::pin_project! {
    /// One attempt of an async loop: the body with its frame (and its key, if any) in place, or
    /// the breaker's refusal, returned without running the body.
    #[project = RunProj]
    #[allow(missing_docs)] // the fields are described with their variants
    enum Run<F, K, Ref> {
        /// The body runs.
        Attempt { #[pin] scoped: Scoped<F, K> },
        /// The breaker refused: its refusal, turned into the loop's error when polled. A loop
        /// without a breaker has [`NoRefusal`](super::NoRefusal) here, so this variant takes no
        /// room in its future.
        Refused { refusal: Ref },
    }
}

impl<T, E, F, K, Ref> Future for Run<F, K, Ref>
where
    F: Future<Output = Result<T, E>>,
    K: KeySlot,
    Ref: IntoError<E> + Copy,
{
    type Output = Attempted<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Attempted<T, E>> {
        match self.project() {
            RunProj::Attempt { scoped } => scoped.poll(cx).map(Attempted::Completed),
            RunProj::Refused { refusal } => {
                Poll::Ready(Attempted::Refused((*refusal).into_error()))
            }
        }
    }
}

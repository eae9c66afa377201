//! Running one attempt: the breaker's permission, the attempt context around the body, the
//! timeout; and what happened to the attempt, as a value for the decision.

use super::spans::{AttemptSpan, Body};
use super::{Fallback, IntoError};
use super::{GiveUp, Hooks, MaybeExtras, Retry, RetryEvent, Slot};
use crate::context::{Enter, Frame, KeyKind, KeyParam, KeySlot, Scoped};
use crate::timer::{Sleeper, Timed};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

/// What happened to one attempt.
pub enum Attempted<T, E> {
    /// The body ran to its end.
    Completed(Result<T, E>),
    /// The circuit breaker refused the attempt and the body did not run: its refusal, as the
    /// function's error.
    Refused(E),
    /// `timeout` cut the body off: its expiry, as the function's error.
    TimedOut(E),
}

impl<'p, T, E, C, S, R, N, G, Fb, X, L> Retry<'p, Result<T, E>, C, S, Hooks<R, N, G, Fb>, X, L>
where
    N: Slot<Result<T, E>, RetryEvent>,
    G: Slot<Result<T, E>, GiveUp>,
    Fb: Fallback<T, E>,
    X: MaybeExtras<'p, E>,
{
    /// The first attempt starts: a hook that hears the time gets the time the call started
    /// (`start` read it already if the policy has a deadline), and the budget gets this call's
    /// deposit.
    #[inline(always)]
    fn begin(&mut self) {
        if (N::TIMED || G::TIMED || Fb::SET) && self.progress.started.is_none() {
            self.progress.started = Some((self.site.clock)());
        }
        if let Some(budget) = self.extras.get().and_then(|x| x.budget) {
            budget.deposit();
        }
    }

    /// The frame the next attempt runs in (which says whether it has a key); or the breaker's
    /// refusal.
    #[inline(always)]
    pub(super) fn enter(&mut self, key: KeyKind) -> Result<Frame, X::Refusal> {
        if self.progress.retries == 0 {
            self.begin();
        }
        self.extras.admit(self.site.clock)?;
        Ok(Frame {
            attempt: self.progress.retries + 1,
            key,
            retried_above: self.progress.retried_above || self.site.policy.get_max() > 0,
            hedge: 0,
        })
    }

    /// The span of the attempt about to start (feature `attempt-spans`).
    #[inline(always)]
    fn attempt_span(&mut self) -> AttemptSpan {
        self.spans.attempt(
            self.site.name,
            self.progress.retries,
            self.progress.previous_pause,
        )
    }

    /// Runs one attempt of a sync function, with the attempt context in place.
    #[inline(always)]
    pub fn attempt(&mut self, body: impl FnOnce() -> Result<T, E>) -> Attempted<T, E> {
        self.attempt_lending((), body)
    }

    /// [`attempt`](Retry::attempt) for a function with an idempotency key: the attempt borrows
    /// `key` for [`attempt()`](crate::attempt)`.key()`, which renders it only if the body asks.
    #[inline(always)]
    pub fn attempt_keyed<K: KeyParam + ?Sized>(
        &mut self,
        key: &K,
        body: impl FnOnce() -> Result<T, E>,
    ) -> Attempted<T, E> {
        self.attempt_lending(key, body)
    }

    #[inline(always)]
    fn attempt_lending<K: KeySlot>(
        &mut self,
        key: K,
        body: impl FnOnce() -> Result<T, E>,
    ) -> Attempted<T, E> {
        let frame = match self.enter(K::KIND) {
            Ok(frame) => frame,
            Err(refusal) => return Attempted::Refused(refusal.into_error()),
        };
        let _span = self.attempt_span().entered();
        let _entered = Enter::new(frame);
        Attempted::Completed(key.lend(body))
    }

    /// Runs one attempt of an async function, with the attempt context in place on every poll.
    /// The returned future holds only the frame and the body's future, not the loop state.
    #[inline(always)]
    pub fn run<F>(&mut self, body: F) -> Run<Body<F>, (), X::Refusal>
    where
        F: Future<Output = Result<T, E>>,
    {
        self.run_lending((), body)
    }

    /// [`run`](Retry::run) for a function with an idempotency key: the attempt borrows `key`,
    /// and its future holds that reference (and nothing else for the key).
    #[inline(always)]
    pub fn run_keyed<'k, K, F>(&mut self, key: &'k K, body: F) -> Run<Body<F>, &'k K, X::Refusal>
    where
        K: KeyParam + ?Sized,
        F: Future<Output = Result<T, E>>,
    {
        self.run_lending(key, body)
    }

    #[inline(always)]
    fn run_lending<K: KeySlot, F>(&mut self, key: K, body: F) -> Run<Body<F>, K, X::Refusal>
    where
        F: Future<Output = Result<T, E>>,
    {
        match self.enter(K::KIND) {
            Ok(frame) => Run::Attempt {
                scoped: Scoped::new(frame, key, self.attempt_span().instrument(body)),
            },
            Err(refusal) => Run::Refused { refusal },
        }
    }

    /// [`run`](Retry::run) with `timeout`: the attempt races the timer, whose limit is clipped to
    /// the time left before the deadline. A method of its own: `PERFORMANCE.md` §4.
    #[inline(always)]
    pub fn run_timed(
        &mut self,
        body: impl Future<Output = Result<T, E>>,
    ) -> impl Future<Output = Attempted<T, E>>
    where
        S: Sleeper,
    {
        self.run_timed_lending((), body)
    }

    /// [`run_timed`](Retry::run_timed) for a function with an idempotency key.
    #[inline(always)]
    pub fn run_timed_keyed<K: KeyParam + ?Sized>(
        &mut self,
        key: &K,
        body: impl Future<Output = Result<T, E>>,
    ) -> impl Future<Output = Attempted<T, E>>
    where
        S: Sleeper,
    {
        self.run_timed_lending(key, body)
    }

    async fn run_timed_lending<K: KeySlot>(
        &mut self,
        key: K,
        body: impl Future<Output = Result<T, E>>,
    ) -> Attempted<T, E>
    where
        S: Sleeper,
    {
        let frame = match self.enter(K::KIND) {
            Ok(frame) => frame,
            Err(refusal) => return Attempted::Refused(refusal.into_error()),
        };
        let attempt = Scoped::new(frame, key, self.attempt_span().instrument(body));
        let Some(timeout) = self.extras.get().and_then(|x| x.timeout) else {
            return Attempted::Completed(attempt.await);
        };
        let limit = match (self.site.policy.get_deadline(), self.progress.started) {
            (Some(deadline), Some(_)) => timeout
                .limit
                .min(deadline.saturating_sub(self.progress.elapsed(self.site.clock))),
            _ => timeout.limit,
        };
        match Timed::new(attempt, self.sleeper.sleep(limit), limit).await {
            Ok(outcome) => Attempted::Completed(outcome),
            Err(elapsed) => Attempted::TimedOut((timeout.error)(elapsed)),
        }
    }
}

pin_project_lite::pin_project! {
    /// One attempt of an async function: the body with its frame (and its key, if any) in
    /// place, or the breaker's refusal, returned without running the body.
    #[project = RunProj]
    #[allow(missing_docs)] // the fields are described with their variants
    pub enum Run<F, K, Ref> {
        /// The body runs.
        Attempt { #[pin] scoped: Scoped<F, K> },
        /// The breaker refused: its refusal, turned into the function's error when polled. A
        /// function without a breaker has [`NoRefusal`](super::NoRefusal) here, so
        /// this variant takes no room in its future.
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

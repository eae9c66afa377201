//! The one loop of every door that is not a macro: [`drive`] (async) and [`drive_blocking`]
//! (sync). The attribute and `retry_block!` write the same steps out in the user's code, so
//! that `?`, `return` and borrows in the body work as written; everything else (the
//! [`Retrier`](crate::Retrier), the integrations on [`engine`](crate::engine)) runs them here.

use super::extras::Linger;
use super::fallback::IntoFinish;
use super::hooks::HookSet;
use super::log::Show;
use super::options::Classifier;
use super::{Attempted, Loop, Progress, Retry};
use crate::Hedge;
use crate::engine::Operation;
use crate::timer::Sleeper;
use std::future::Future;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// How a driver makes each attempt: the body ([`Plain`]), or the body hedged ([`Hedged`]).
pub(crate) trait Attempts<T, E> {
    /// Runs one attempt with the state (its context, the breaker, the timeout). Not an
    /// `async fn`: the state's future itself, without a layer that would keep the arguments
    /// (`PERFORMANCE.md` §4).
    fn attempt<C, S, D, H, X>(
        &mut self,
        state: &mut Loop<'_, T, E, C, S, D, H, X>,
    ) -> impl Future<Output = Attempted<T, E>>
    where
        C: Classifier<E>,
        S: Sleeper,
        H: HookSet<T, E>,
        X: Linger<T, E>;
}

/// Each attempt runs the body once ([`Operation::attempt`]).
pub(crate) struct Plain<B>(pub(crate) B);

impl<T, E, B: Operation<T, E>> Attempts<T, E> for Plain<B> {
    #[inline]
    fn attempt<C, S, D, H, X>(
        &mut self,
        state: &mut Loop<'_, T, E, C, S, D, H, X>,
    ) -> impl Future<Output = Attempted<T, E>>
    where
        S: Sleeper,
        H: HookSet<T, E>,
        X: Linger<T, E>,
    {
        let body = &mut self.0;
        state.run_made((), || body.attempt())
    }
}

/// Each attempt is hedged: the body may run several times at once, so it is called through a
/// shared reference (`Fn`), each call making one copy's future.
pub(crate) struct Hedged<'h, B>(pub(crate) &'h Hedge, pub(crate) B);

impl<T, E, B: Fn() -> Fut, Fut: Future<Output = Result<T, E>>> Attempts<T, E> for Hedged<'_, B> {
    #[inline]
    fn attempt<C, S, D, H, X>(
        &mut self,
        state: &mut Loop<'_, T, E, C, S, D, H, X>,
    ) -> impl Future<Output = Attempted<T, E>>
    where
        C: Classifier<E>,
        S: Sleeper,
        H: HookSet<T, E>,
        X: Linger<T, E>,
    {
        state.run_hedged(self.0, &self.1)
    }
}

/// Runs a call to its end: an attempt (see [`Attempts`]), the decision, the pause, until the
/// decision ends the call; then an async fallback, if the loop has one and gave up.
/// `reset_after`: an attempt that ran for at least this long before it failed starts the
/// backoff afresh.
pub(crate) async fn drive<'p, T, E, C, S, D, H, X>(
    mut state: Loop<'p, T, E, C, S, D, H, X>,
    reset_after: Option<Duration>,
    mut attempts: impl Attempts<T, E>,
) -> Result<T, E>
where
    C: Classifier<E>,
    S: Sleeper,
    D: Show<E>,
    H: HookSet<T, E>,
    H::Finish<()>: IntoFinish<T, E>,
    X: Linger<T, E>,
{
    state.restart();
    loop {
        let started = reset_after.map(|_| (state.site.clock)());
        let attempted = attempts.attempt(&mut state).await;
        state.reset_if_healthy(reset_after, started);
        state = match state.next(attempted) {
            ControlFlow::Break(result) => return result.into_finish().await,
            ControlFlow::Continue(next) => next,
        };
        state.pause().await;
    }
}

/// [`drive`] for a sync call, whose pauses block the thread: after a first attempt that did not
/// end in an accepted `Ok` (`first`), or from its first attempt (`None`). Out of line, so that a
/// caller can keep its first attempt and the happy path inline without the loop's code
/// (`PERFORMANCE.md` §8).
#[inline(never)]
pub(crate) fn drive_blocking<'p, T, E, C, S, D, H, X>(
    state: Loop<'p, T, E, C, S, D, H, X>,
    mut first: Option<Attempted<T, E>>,
    reset_after: Option<Duration>,
    mut attempt: impl FnMut(&mut Loop<'p, T, E, C, S, D, H, X>) -> Attempted<T, E>,
) -> Result<T, E>
where
    C: Classifier<E>,
    D: Show<E>,
    H: HookSet<T, E, Finish<()> = Result<T, E>>,
    X: Linger<T, E>,
{
    // A state of this function's own, not the argument's memory, which the compiler cannot
    // keep in registers: the loop wrote the whole state back to it after every decision. The
    // clock is named here, not handed over in memory: a direct call, inline.
    let Retry {
        site,
        progress,
        opts,
        spans,
        value,
    } = state;
    let mut state = Retry {
        site: super::Site {
            clock: super::std_now,
            ..site
        },
        progress,
        opts,
        spans,
        value,
    };
    // After a first attempt, the progress as constants, so that the first decision's arithmetic
    // folds as it does inline; only `started` may have been read. `retried_above` is read
    // again: the attempt has put the caller's frame back, and the reading of `start` served
    // only the attempt's frame (`PERFORMANCE.md` §8).
    match first {
        Some(_) => {
            state.progress = Progress {
                retried_above: crate::context::retried_above(),
                started: state.progress.started,
                ..Progress::idle(state.progress.level)
            }
        }
        None => state.restart(),
    }
    loop {
        let attempted = match first.take() {
            Some(failed) => failed,
            None => {
                let started = reset_after.map(|_| (state.site.clock)());
                let attempted = attempt(&mut state);
                state.reset_if_healthy(reset_after, started);
                attempted
            }
        };
        // An accepted `Ok` ends the call here, not through `next`'s `ControlFlow`, whose two
        // sides share their memory: the value was split along the progress's fields and put
        // back together (RESULTS §3 "one failure sync: Retrier": 204 -> 189 instructions).
        let attempted = match attempted {
            Attempted::Completed(Ok(value)) if !H::ON_RESULT => return state.accept::<()>(value),
            attempted => attempted,
        };
        state = match state.next(attempted) {
            ControlFlow::Break(result) => return result,
            ControlFlow::Continue(next) => next,
        };
        state.pause_blocking();
    }
}

/// Reads `clock`, out of the happy path's way: a run whose policy, read at run time, has a
/// deadline reads the time as it starts; laid out inline, the reading made every other run
/// jump over it.
#[cold]
#[inline(never)]
fn read(clock: fn() -> Instant) -> Instant {
    clock()
}

impl<T, E, O> Retry<'_, T, E, O> {
    /// The loop as a new call finds it: no retries, no pause yet, whether a layer above retries
    /// read again, and the start read again if the deadline needs it.
    #[inline]
    pub(crate) fn restart(&mut self) {
        self.progress = Progress {
            retried_above: crate::context::retried_above(),
            started: self
                .site
                .policy
                .get_deadline()
                .map(|_| read(self.site.clock)),
            ..Progress::idle(self.progress.level)
        };
    }

    /// After an attempt that started at `started`: if it ran for `reset_after` or longer, the
    /// backoff starts afresh.
    #[inline]
    pub(crate) fn reset_if_healthy(
        &mut self,
        reset_after: Option<Duration>,
        started: Option<Instant>,
    ) {
        if let (Some(healthy), Some(started)) = (reset_after, started) {
            if (self.site.clock)().saturating_duration_since(started) >= healthy {
                self.restart();
            }
        }
    }
}

//! The loop's state machine: one decision per attempt outcome.

use crate::Policy;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// The state of one call of an annotated function, across its attempts.
///
/// The generated loop calls [`Retry::next`] once per attempt: `Break` carries the function's
/// result, `Continue` the pause to take before the next attempt. Starting the loop reads no
/// clock unless the policy has a deadline, and an `Ok` outcome is decided without any work.
#[derive(Debug)]
pub struct Retry<'p> {
    policy: &'p Policy,
    /// Retries taken so far; the attempt that just ended is number `retries + 1`.
    retries: u32,
    previous_pause: Duration,
    started: Option<Instant>,
    clock: fn() -> Instant,
}

impl<'p> Retry<'p> {
    /// For a sync function: the deadline is measured on [`Instant::now`].
    #[inline]
    pub fn start(policy: &'p Policy) -> Self {
        Self::with_clock(policy, Instant::now)
    }

    /// For an async function: the deadline is measured on tokio's clock, so a paused test clock
    /// governs it.
    #[cfg(feature = "tokio")]
    #[inline]
    pub fn start_async(policy: &'p Policy) -> Self {
        Self::with_clock(policy, || tokio::time::Instant::now().into_std())
    }

    #[inline]
    fn with_clock(policy: &'p Policy, clock: fn() -> Instant) -> Self {
        Self {
            policy,
            retries: 0,
            previous_pause: Duration::ZERO,
            started: policy.time_budget().map(|_| clock()),
            clock,
        }
    }

    /// Decides what follows an attempt: return its result, or pause and try again.
    ///
    /// `Ok` and non-transient errors end the loop at once; a transient error ends it when the
    /// retries are used up or the next pause would end past the deadline.
    #[inline]
    pub fn next<T, E>(
        &mut self,
        outcome: Result<T, E>,
        is_transient: impl FnOnce(&E) -> bool,
    ) -> ControlFlow<Result<T, E>, Duration> {
        match outcome {
            Ok(value) => ControlFlow::Break(Ok(value)),
            Err(error) => match self.after_failure(is_transient(&error)) {
                Some(pause) => ControlFlow::Continue(pause),
                None => ControlFlow::Break(Err(error)),
            },
        }
    }

    /// The pause before the next attempt, or `None` to give up.
    #[cold]
    fn after_failure(&mut self, transient: bool) -> Option<Duration> {
        if !transient || self.retries >= self.policy.retries() {
            return None;
        }
        let retry = self.retries + 1;
        let pause = self.policy.delay(retry, self.previous_pause);
        if let (Some(budget), Some(started)) = (self.policy.time_budget(), self.started) {
            let elapsed = (self.clock)().saturating_duration_since(started);
            if elapsed.saturating_add(pause) > budget {
                return None;
            }
        }
        self.retries = retry;
        self.previous_pause = pause;
        Some(pause)
    }

    /// Retries taken so far.
    pub fn retries(&self) -> u32 {
        self.retries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Jitter;

    fn transient(_: &&str) -> bool {
        true
    }

    #[test]
    fn ok_breaks_at_once() {
        let policy = Policy::new();
        let mut retry = Retry::start(&policy);
        assert_eq!(
            retry.next(Ok::<_, &str>(1), transient),
            ControlFlow::Break(Ok(1))
        );
        assert_eq!(retry.retries(), 0);
    }

    #[test]
    fn transient_errors_pause_until_the_limit() {
        let policy = Policy::new().max_retries(2).jitter(Jitter::None);
        let mut retry = Retry::start(&policy);
        let s = Duration::from_secs(1);
        assert_eq!(
            retry.next(Err::<(), _>("a"), transient),
            ControlFlow::Continue(s)
        );
        assert_eq!(
            retry.next(Err::<(), _>("b"), transient),
            ControlFlow::Continue(2 * s)
        );
        assert_eq!(
            retry.next(Err::<(), _>("c"), transient),
            ControlFlow::Break(Err("c"))
        );
    }

    #[test]
    fn permanent_errors_break_at_once() {
        let policy = Policy::new();
        let mut retry = Retry::start(&policy);
        assert_eq!(
            retry.next(Err::<(), _>("no"), |_| false),
            ControlFlow::Break(Err("no"))
        );
    }

    #[test]
    fn a_pause_past_the_deadline_is_not_taken() {
        let policy = Policy::new()
            .jitter(Jitter::None)
            .deadline(Duration::from_millis(2500));
        let mut retry = Retry::start(&policy);
        // 1 s fits, 1 s + 2 s does not (the clock barely moves in this test).
        assert!(retry.next(Err::<(), _>("a"), transient).is_continue());
        retry.started = retry.started.map(|t| t - Duration::from_secs(1));
        assert_eq!(
            retry.next(Err::<(), _>("b"), transient),
            ControlFlow::Break(Err("b"))
        );
    }
}

//! The first attempt of a call made before the loop, for a door whose happy path must not pay
//! for the loop's future: a tower service, whose future would otherwise be the boxed loop.
//! Most doors never need it: [`drive`] makes every attempt.
//!
//! The door asks [`FirstAttempt::new`] whether its settings let the first attempt run outside
//! the loop, runs it with [`FirstAttempt::run`] (its future, [`InAttempt`], is one a door can
//! name in its own future's type), and either ends the call with [`FirstAttempt::accepted`] or
//! hands the outcome to [`FirstAttempt::drive_after`].

use super::{Operation, drive};
use crate::CircuitOpen;
use crate::context::{self, Enter, Frame, KeyKind, Packed};
use crate::engine::{DynHooks, Settings};
use crate::state;
use crate::timer::{Elapsed, Sleeper};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

/// The first attempt of a call, made by the door before the loop and without it, so that a call
/// whose first answer is accepted (the happy path) never builds the loop's future: a tower
/// service returns a named future for it instead of a boxed loop. When the answer is not
/// accepted, [`drive_after`](FirstAttempt::drive_after) takes it over as the loop's first
/// attempt.
///
/// Only for a call that nothing has to see before its first attempt:
/// [`new`](FirstAttempt::new) says `None` when the settings have a budget (it takes a deposit),
/// a breaker (it admits the attempt), `aws2026`, a `timeout` (the attempt races a timer), a
/// hedge, a policy with a deadline (the clock is read as the call starts), or the feature
/// `attempt-spans` is on (the attempt has a span). The door's hooks, which `new` does not see,
/// must not have a [`gate`](DynHooks::gate) (it admits every attempt, the first included), nor
/// hear the time (a [`DynHooks::notify`] that is not
/// [`notify_untimed`](DynHooks::notify_untimed), an `on_give_up`, a decider's
/// [`Failure::elapsed`](crate::engine::Failure::elapsed)): their times would start after the
/// first attempt.
///
/// ```
/// use retry_runtime::engine::first::FirstAttempt;
/// use retry_runtime::engine::{self, DynHooks, Settings};
/// use retry_runtime::{attempt, CircuitOpen, Elapsed, Jitter, Policy, TokioTimer, Verdict};
///
/// #[derive(Debug)]
/// enum CallError { Busy, Timeout(Elapsed), Open(CircuitOpen) }
/// impl From<Elapsed> for CallError { fn from(e: Elapsed) -> Self { CallError::Timeout(e) } }
/// impl From<CircuitOpen> for CallError { fn from(o: CircuitOpen) -> Self { CallError::Open(o) } }
///
/// async fn call() -> Result<u32, CallError> {
///     // The attempt's number, as a header would carry it.
///     match attempt().number() {
///         1 => Err(CallError::Busy),
///         n => Ok(n),
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let policy = Policy::new().max(3).jitter(Jitter::None);
/// let settings = Settings::new(&policy).name("quotes");
/// let classify = |error: &CallError| Verdict::from(matches!(error, CallError::Busy));
/// let answer = match FirstAttempt::new(&settings) {
///     Some(first) => match first.run(call).await {
///         Ok(n) => {
///             first.accepted();
///             Ok(n)
///         }
///         failed => {
///             let hooks = DynHooks::new(&classify);
///             FirstAttempt::drive_after(&settings, hooks, TokioTimer, failed, call).await
///         }
///     },
///     // Something has to see the first attempt (here only with the feature `attempt-spans`,
///     // whose span the loop opens): the loop makes every attempt.
///     None => engine::drive(&settings, DynHooks::new(&classify), TokioTimer, call).await,
/// };
/// assert_eq!(answer.unwrap(), 2);
/// # }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct FirstAttempt {
    frame: Packed,
    name: &'static str,
    /// The policy retries (`max` above 0): the attempt's part of `retried_above`.
    retries: bool,
}

impl FirstAttempt {
    /// The first attempt of a call with `settings`, if it may run outside the loop (see
    /// [`FirstAttempt`]). Reads whether a layer above retries, as the loop does when it starts.
    #[inline]
    pub fn new(settings: &Settings<'_>) -> Option<Self> {
        let plain = settings.budget.is_none()
            && settings.breaker.is_none()
            && settings.aws.is_none()
            && settings.timeout.is_none()
            && settings.hedge.is_none()
            && settings.policy.get_deadline().is_none()
            && !cfg!(feature = "attempt-spans")
            && !crate::faults::active();
        let retries = settings.policy.get_max() > 0;
        plain.then(|| FirstAttempt {
            frame: Packed::new(Frame {
                attempt: 1,
                key: KeyKind::None,
                retried_above: context::retried_above() || retries,
                hedge: 0,
            }),
            name: settings.name,
            retries,
        })
    }

    /// The first attempt of another call with the same settings, as [`new`](FirstAttempt::new)
    /// would make it now: whether a layer above retries is read again, the settings are not (a
    /// tower layer asks `new` once, when it is made, and `again` on each request).
    #[inline]
    pub fn again(&self) -> Self {
        let mut first = *self;
        first.frame = self
            .frame
            .retried_above(context::retried_above() || self.retries);
        first
    }

    /// [`again`](FirstAttempt::again), unless a fault injector was installed since `new`
    /// (feature `faults`, [`faults`](crate::faults)): then `None`, and the loop makes the first
    /// attempt too, so that it meets the injection point. Without the feature, always `again`.
    #[inline]
    pub fn again_plain(&self) -> Option<Self> {
        (!crate::faults::active()).then(|| self.again())
    }

    /// Runs the attempt: `make` makes its future inside the attempt's context, and the future is
    /// polled inside it, so that [`attempt()`](crate::attempt) gives attempt 1 in both.
    #[inline]
    pub fn run<F: Future>(&self, make: impl FnOnce() -> F) -> InAttempt<F> {
        let future = {
            let _entered = Enter::packed(self.frame);
            make()
        };
        InAttempt {
            frame: self.frame,
            future,
        }
    }

    /// The attempt's answer was accepted: the call ends here, as the loop would end it (the
    /// metrics count a first try).
    #[inline]
    pub fn accepted(self) {
        state::observe::accepted(self.name, 0);
    }

    /// [`drive`] after a first attempt whose outcome was not accepted: `first` is the loop's
    /// first attempt (judged by `hooks` as any other), and `operation` makes the attempts after it.
    /// `settings` and `hooks` are the ones the first attempt was made with.
    pub async fn drive_after<'a, T, E, S>(
        settings: &Settings<'a>,
        hooks: DynHooks<'a, T, E>,
        timer: S,
        first: Result<T, E>,
        operation: impl Operation<T, E>,
    ) -> Result<T, E>
    where
        E: fmt::Debug + From<Elapsed> + From<CircuitOpen>,
        S: Sleeper,
    {
        let operation = After {
            first: Some(first),
            operation,
        };
        drive(settings, hooks, timer, operation).await
    }
}

pin_project_lite::pin_project! {
    /// The future of a [`FirstAttempt`]: the attempt's own, polled inside the attempt's context.
    #[derive(Debug)]
    pub struct InAttempt<F> {
        frame: Packed,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for InAttempt<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _entered = Enter::packed(*this.frame);
        this.future.poll(cx)
    }
}

/// The operation of [`FirstAttempt::drive_after`]: the first attempt's outcome as it was, then
/// `operation`'s.
struct After<T, E, O> {
    first: Option<Result<T, E>>,
    operation: O,
}

impl<T, E, O: Operation<T, E>> Operation<T, E> for After<T, E, O> {
    fn attempt(&mut self) -> impl Future<Output = Result<T, E>> {
        let first = self.first.take();
        let operation = &mut self.operation;
        async move {
            match first {
                Some(outcome) => outcome,
                None => operation.attempt().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FirstAttempt;
    use crate::Policy;
    use crate::context::{self, scope};
    use crate::engine::Settings;

    /// Whether a layer above retries, as the first attempt made by `first` sees it.
    fn seen(first: FirstAttempt) -> bool {
        let mut seen = None;
        let _attempt = first.run(|| {
            seen = Some(context::current().retried_above);
            std::future::ready(())
        });
        seen.unwrap_or_default()
    }

    #[test]
    fn again_reads_the_caller_anew_and_keeps_the_policy() {
        if cfg!(feature = "attempt-spans") {
            // The attempt has a span, which the loop opens: no first attempt outside it.
            assert!(FirstAttempt::new(&Settings::new(&Policy::new())).is_none());
            return;
        }
        let once = Policy::new().max(0);
        let made_inside = scope::caller_retries(|| FirstAttempt::new(&Settings::new(&once)));
        let Some(first) = made_inside else {
            panic!("plain settings make a first attempt");
        };
        assert!(seen(first));
        assert!(!seen(first.again()));
        assert!(seen(scope::caller_retries(|| first.again())));

        let retrying = Policy::new().max(2);
        let Some(first) = FirstAttempt::new(&Settings::new(&retrying)) else {
            panic!("plain settings make a first attempt");
        };
        assert!(seen(first.again()));
    }
}

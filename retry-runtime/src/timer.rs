//! Pauses and per-attempt timeouts for async functions, on tokio or on a timer you name.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// Something that can pause an async function: tokio's timer by default, or any
/// `Fn(Duration) -> impl Future<Output = ()>` named with `#[retry(sleep = ...)]`.
pub trait Sleeper {
    /// The future of one pause.
    type Sleep: Future<Output = ()>;
    /// Starts a pause of `duration`.
    fn sleep(&self, duration: Duration) -> Self::Sleep;
}

impl<F, S> Sleeper for F
where
    F: Fn(Duration) -> S,
    S: Future<Output = ()>,
{
    type Sleep = S;
    fn sleep(&self, duration: Duration) -> S {
        self(duration)
    }
}

/// What `sleep = f` returns: a future, with an error message that says so.
#[diagnostic::on_unimplemented(
    message = "`sleep = ...` must return a future, but it returns `{Self}`",
    label = "returns `{Self}`, not a future",
    note = "name an async sleep function, `fn(Duration) -> impl Future<Output = ()>`, such as `async_std::task::sleep` or `futures_timer::Delay::new`; a blocking `std::thread::sleep` would stop the executor's thread"
)]
pub trait SleepFuture: Future<Output = ()> {}

impl<F: Future<Output = ()>> SleepFuture for F {}

/// tokio's timer.
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioTimer;

#[cfg(feature = "tokio")]
impl Sleeper for TokioTimer {
    type Sleep = tokio::time::Sleep;
    fn sleep(&self, duration: Duration) -> tokio::time::Sleep {
        tokio::time::sleep(duration)
    }
}

/// No timer: the `tokio` feature is off and no `sleep = ...` was given. `start_async` then
/// requires [`TimerFor`], which nothing implements, so the function does not compile; the
/// `Sleeper` impl only keeps that the one error.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTimer;

impl Sleeper for NoTimer {
    type Sleep = std::future::Ready<()>;
    fn sleep(&self, _: Duration) -> Self::Sleep {
        std::future::ready(())
    }
}

/// A timer for async functions returning `Result<T, _>`; not implemented by [`NoTimer`], so an
/// async `#[retry]` function without the `tokio` feature and without `sleep = ...` is an error
/// that says which to add.
#[diagnostic::on_unimplemented(
    message = "this async `#[retry]` function has no timer to pause with",
    label = "no timer",
    note = "enable the `tokio` feature of `retry-runtime` (on by default), or name a sleep function for your runtime: `#[retry(sleep = my_runtime::sleep)]` with `fn sleep(Duration) -> impl Future<Output = ()>`"
)]
pub trait TimerFor<T> {}

/// The error of an attempt cut off by `#[retry(timeout = ...)]`.
///
/// An annotated function with a `timeout` needs an error type that can carry it:
/// `impl From<Elapsed> for MyError`. A timed-out attempt counts as a transient failure.
///
/// ```
/// use retry_runtime::Elapsed;
///
/// #[derive(Debug)]
/// enum ContractError {
///     Overloaded,
///     TimedOut(Elapsed),
/// }
///
/// impl From<Elapsed> for ContractError {
///     fn from(e: Elapsed) -> Self {
///         ContractError::TimedOut(e)
///     }
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Elapsed {
    limit: Duration,
}

impl Elapsed {
    pub(crate) fn new(limit: Duration) -> Self {
        Elapsed { limit }
    }

    /// How long the attempt was allowed to run (after clipping to the deadline).
    pub fn limit(&self) -> Duration {
        self.limit
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "attempt timed out after {:?}", self.limit)
    }
}

impl std::error::Error for Elapsed {}

impl crate::Transient for Elapsed {
    fn is_transient(&self) -> bool {
        true
    }
}

impl From<Elapsed> for std::io::Error {
    fn from(e: Elapsed) -> Self {
        std::io::Error::new(std::io::ErrorKind::TimedOut, e)
    }
}

/// `E: From<Elapsed>`, with an error message that says so.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot carry a timeout, which `#[retry(timeout = ...)]` needs",
    label = "`{Self}` does not implement `From<retry_runtime::Elapsed>`",
    note = "add `impl From<retry_runtime::Elapsed> for {Self}` (a variant such as `TimedOut(Elapsed)`), or remove `timeout`"
)]
pub trait FromElapsed {
    /// The error for a timed-out attempt.
    fn from_elapsed(elapsed: Elapsed) -> Self;
}

impl<E: From<Elapsed>> FromElapsed for E {
    fn from_elapsed(elapsed: Elapsed) -> Self {
        E::from(elapsed)
    }
}

pin_project_lite::pin_project! {
    /// An attempt raced against a timer.
    pub struct Timed<F, S> {
        #[pin]
        attempt: F,
        #[pin]
        timer: S,
        limit: Duration,
    }
}

impl<F, S> Timed<F, S> {
    pub(crate) fn new(attempt: F, timer: S, limit: Duration) -> Self {
        Timed {
            attempt,
            timer,
            limit,
        }
    }
}

impl<F: Future, S: Future<Output = ()>> Future for Timed<F, S> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.attempt.poll(cx) {
            return Poll::Ready(Ok(output));
        }
        match this.timer.poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed::new(*this.limit))),
            Poll::Pending => Poll::Pending,
        }
    }
}

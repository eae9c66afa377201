//! Pauses and per-attempt timeouts for async functions, on tokio or on a timer you name.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Something that can pause an async function, and the clock its pauses run on: tokio's timer
/// by default, or what `#[retry(sleep = ...)]` names, a function
/// `Fn(Duration) -> impl Future<Output = ()>` or a type of your own that implements this trait.
///
/// A `deadline` is measured on the same clock as the pauses: [`now`](Sleeper::now). For a sleep
/// function that is [`Instant::now`] (a runtime's timer runs in real time); a type whose pauses
/// run on another clock (a simulated one, tokio's paused test clock) says so by implementing
/// `now`.
///
/// ```
/// use retry_runtime::{retry, Sleeper};
/// use std::future::Ready;
/// use std::io;
/// use std::time::{Duration, Instant};
///
/// /// A timer whose clock stands still: every pause "ends" at once, and no time passes.
/// struct Frozen;
///
/// impl Sleeper for Frozen {
///     type Sleep = Ready<()>;
///     fn sleep(&self, _: Duration) -> Ready<()> {
///         std::future::ready(())
///     }
///     fn now() -> Instant {
///         static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
///         *EPOCH.get_or_init(Instant::now)
///     }
/// }
///
/// // On the frozen clock no time passes and each 1 s pause fits in the 10 s deadline: all 50
/// // retries run.
/// #[retry(max = 50, base = "1s", backoff = constant, jitter = none, deadline = "10s", sleep = Frozen)]
/// async fn check(calls: &std::cell::Cell<u32>) -> io::Result<()> {
///     calls.set(calls.get() + 1);
///     Err(io::ErrorKind::TimedOut.into())
/// }
///
/// # let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let calls = std::cell::Cell::new(0);
/// # runtime.block_on(async {
/// assert!(check(&calls).await.is_err());
/// # });
/// assert_eq!(calls.get(), 51);
/// ```
pub trait Sleeper {
    /// The future of one pause.
    type Sleep: Future<Output = ()>;
    /// Starts a pause of `duration`.
    fn sleep(&self, duration: Duration) -> Self::Sleep;
    /// The time on the clock the pauses run on, on which the `deadline` is measured.
    /// [`Instant::now`] unless the sleeper says otherwise.
    fn now() -> Instant {
        Instant::now()
    }
}

/// What `sleep = ...` names: a sleep function ([`FnForm`]) or a [`Sleeper`] type
/// ([`TypeForm`]).
#[diagnostic::on_unimplemented(
    message = "`sleep = ...` must be an async sleep: `fn(Duration) -> impl Future<Output = ()>`, or a type that implements `retry_runtime::Sleeper`",
    label = "not an async sleep",
    note = "name an async sleep function such as `async_std::task::sleep` or `futures_timer::Delay::new` (a blocking `std::thread::sleep` would stop the executor's thread), or a type of your own that implements `retry_runtime::Sleeper`; a closure needs its argument's type written: `|d: Duration| ...`"
)]
pub trait IntoSleeper<M> {
    /// The sleeper.
    type Sleeper: Sleeper;
    /// `self` as a sleeper.
    fn into_sleeper(self) -> Self::Sleeper;
}

/// `sleep = f` with a function.
pub enum FnForm {}
/// `sleep = T` with a [`Sleeper`] type.
pub enum TypeForm {}

impl<F, S> IntoSleeper<FnForm> for F
where
    F: Fn(Duration) -> S,
    S: SleepFuture,
{
    type Sleeper = SleepFn<F>;
    fn into_sleeper(self) -> SleepFn<F> {
        SleepFn(self)
    }
}

impl<T: Sleeper> IntoSleeper<TypeForm> for T {
    type Sleeper = T;
    fn into_sleeper(self) -> T {
        self
    }
}

/// A sleep function as a [`Sleeper`], on the real clock ([`Instant::now`]).
pub struct SleepFn<F>(F);

impl<F, S> Sleeper for SleepFn<F>
where
    F: Fn(Duration) -> S,
    S: Future<Output = ()>,
{
    type Sleep = S;
    fn sleep(&self, duration: Duration) -> S {
        (self.0)(duration)
    }
}

/// The loop's clock for sleeper `S`: a recording's virtual clock inside
/// [`testing::record`](crate::testing::record), `S`'s otherwise.
pub(crate) fn clock_of<S: Sleeper>() -> Instant {
    crate::testing::virtual_now().unwrap_or_else(S::now)
}

/// What `sleep = f` returns: a future, with an error message that says so.
#[diagnostic::on_unimplemented(
    message = "`sleep = ...` must return a future, but it returns `{Self}`",
    label = "returns `{Self}`, not a future",
    note = "name an async sleep function, `fn(Duration) -> impl Future<Output = ()>`, such as `async_std::task::sleep` or `futures_timer::Delay::new`; a blocking `std::thread::sleep` would stop the executor's thread"
)]
pub(crate) trait SleepFuture: Future<Output = ()> {}

impl<F: Future<Output = ()>> SleepFuture for F {}

/// tokio's timer, the [`Sleeper`] a door on tokio gives
/// [`engine::drive`](crate::engine::drive): pauses with `tokio::time::sleep`, on tokio's clock
/// (which a paused test clock governs).
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioTimer;

#[cfg(feature = "tokio")]
impl Sleeper for TokioTimer {
    type Sleep = tokio::time::Sleep;
    fn sleep(&self, duration: Duration) -> tokio::time::Sleep {
        tokio::time::sleep(duration)
    }
    /// tokio's clock, which `tokio::time::pause()` stops and `advance` moves.
    fn now() -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// No timer. The async default when the `tokio` feature is off and no `sleep = ...` was given:
/// an async loop does not start with it (it is no `Timer`), and says which to add; its `Sleeper`
/// impl only keeps that the one error. And the "timer" of
/// [`engine::drive_blocking`](crate::engine::drive_blocking), whose pauses block: never used to
/// sleep.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoTimer;

impl Sleeper for NoTimer {
    type Sleep = std::future::Ready<()>;
    fn sleep(&self, _: Duration) -> Self::Sleep {
        std::future::ready(())
    }
}

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

loop_error! {
    /// The error for a timed-out attempt.
    FromElapsed::from_elapsed(Elapsed),
    message = "`{Self}` cannot carry a timeout, which `#[retry(timeout = ...)]` needs",
    label = "`{Self}` does not implement `From<retry_runtime::Elapsed>`",
    note = "add `impl From<retry_runtime::Elapsed> for {Self}` (a variant such as `TimedOut(Elapsed)`), or remove `timeout`",
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
            Poll::Ready(()) => Poll::Ready(Err(Elapsed { limit: *this.limit })),
            Poll::Pending => Poll::Pending,
        }
    }
}

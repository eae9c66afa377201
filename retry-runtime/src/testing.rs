//! Deterministic tests of annotated functions: pauses recorded instead of slept, jitter from a
//! seeded generator.
//!
//! ```
//! use retry_runtime::{retry, testing};
//! use std::io;
//! use std::time::Duration;
//!
//! #[retry(max = 3, base = "1s", jitter = none)]
//! fn read_tariffs() -> io::Result<String> {
//!     Err(io::ErrorKind::TimedOut.into())
//! }
//!
//! // Returns at once: the three pauses are recorded, not slept.
//! let (result, pauses) = testing::record(|| read_tariffs());
//! assert!(result.is_err());
//! assert_eq!(pauses, [1, 2, 4].map(Duration::from_secs));
//! ```
//!
//! Inside a recording, the clock that `deadline` reads advances by each recorded pause, so
//! deadlines behave as they would in real time. Per-attempt `timeout`s still use the real timer:
//! test those under tokio's paused clock.

use rand::SeedableRng;
use rand::rngs::StdRng;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// The seed of [`record`] and [`record_async`].
pub const DEFAULT_SEED: u64 = 4711;

pub(crate) struct Recorder {
    pauses: Vec<Duration>,
    rng: StdRng,
    origin: Instant,
}

impl Recorder {
    fn new(seed: u64) -> Self {
        // The admission gate's adaptive throttling (retry-overload) draws from the loop's source
        // from now on, the seeded generator inside a recording (`overload::uniform`).
        retry_overload::__runtime::set_random_source(crate::overload::uniform);
        Recorder {
            pauses: Vec::new(),
            rng: StdRng::seed_from_u64(seed),
            origin: Instant::now(),
        }
    }
}

thread_local! {
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
    /// Whether `RECORDER` holds a recorder: a plain flag, so that the loop's every pause and
    /// clock read asks it with one load, without the state check of a thread-local that has a
    /// destructor and the `RefCell`'s borrow.
    static RECORDING: Cell<bool> = const { Cell::new(false) };
}

/// Whether a recording is active on this thread.
#[inline]
pub(crate) fn recording() -> bool {
    RECORDING.with(Cell::get)
}

/// Records `pause` if a recording is active; `true` means "do not sleep".
pub(crate) fn record_pause(pause: Duration) -> bool {
    RECORDER.with(|r| match r.borrow_mut().as_mut() {
        Some(recorder) => {
            recorder.pauses.push(pause);
            true
        }
        None => false,
    })
}

/// The virtual clock of an active recording: its start plus every recorded pause.
pub(crate) fn virtual_now() -> Option<Instant> {
    if !recording() {
        return None;
    }
    RECORDER.with(|r| {
        r.borrow().as_ref().map(|rec| {
            let slept = rec
                .pauses
                .iter()
                .fold(Duration::ZERO, |a, p| a.saturating_add(*p));
            rec.origin.checked_add(slept).unwrap_or(rec.origin)
        })
    })
}

/// Runs `f` with the recording's seeded generator if a recording is active, else with `None`.
pub(crate) fn with_seeded<R>(f: impl FnOnce(Option<&mut StdRng>) -> R) -> R {
    if !recording() {
        return f(None);
    }
    RECORDER.with(|r| f(r.borrow_mut().as_mut().map(|recorder| &mut recorder.rng)))
}

/// Swaps a recorder into the thread-local until dropped.
struct Active<'a> {
    slot: &'a mut Option<Recorder>,
}

impl<'a> Active<'a> {
    fn new(slot: &'a mut Option<Recorder>) -> Self {
        swap_recorder(slot);
        Active { slot }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        swap_recorder(self.slot);
    }
}

/// Swaps `slot` with the thread's recorder, and keeps `RECORDING` in step.
fn swap_recorder(slot: &mut Option<Recorder>) {
    RECORDER.with(|r| {
        let mut current = r.borrow_mut();
        std::mem::swap(&mut *current, slot);
        RECORDING.with(|flag| flag.set(current.is_some()));
    });
}

/// Runs `f` with pauses recorded instead of slept and jitter drawn from a generator seeded with
/// [`DEFAULT_SEED`]; returns what `f` returned and the pauses, in order.
pub fn record<R>(f: impl FnOnce() -> R) -> (R, Vec<Duration>) {
    record_seeded(DEFAULT_SEED, f)
}

/// [`record`] with another seed for the jitter generator.
pub fn record_seeded<R>(seed: u64, f: impl FnOnce() -> R) -> (R, Vec<Duration>) {
    let mut slot = Some(Recorder::new(seed));
    let output = {
        let _active = Active::new(&mut slot);
        f()
    };
    (output, slot.map(|r| r.pauses).unwrap_or_default())
}

/// The async form of [`record`]: awaits `future` with its pauses recorded instead of slept. It
/// needs no timer, so it runs on any executor.
///
/// ```
/// use retry_runtime::{retry, testing};
/// use std::io;
/// use std::time::Duration;
///
/// #[retry(max = 2, base = "1s", jitter = full)]
/// async fn check() -> io::Result<()> {
///     Err(io::ErrorKind::ConnectionReset.into())
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let (result, pauses) = testing::record_async(check()).await;
/// assert!(result.is_err());
/// assert_eq!(pauses.len(), 2);
/// assert!(pauses[0] <= Duration::from_secs(1) && pauses[1] <= Duration::from_secs(2));
/// // The same seed draws the same jitter.
/// assert_eq!(testing::record_async(check()).await.1, pauses);
/// # }
/// ```
pub fn record_async<F: Future>(future: F) -> Recording<F> {
    record_async_seeded(DEFAULT_SEED, future)
}

/// [`record_async`] with another seed for the jitter generator.
pub fn record_async_seeded<F: Future>(seed: u64, future: F) -> Recording<F> {
    Recording {
        recorder: Some(Recorder::new(seed)),
        future,
    }
}

pin_project_lite::pin_project! {
    /// The future of [`record_async`]: the output and the recorded pauses.
    pub struct Recording<F> {
        recorder: Option<Recorder>,
        #[pin]
        future: F,
    }
}

impl<F: Future> Future for Recording<F> {
    type Output = (F::Output, Vec<Duration>);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let poll = {
            let _active = Active::new(this.recorder);
            this.future.poll(cx)
        };
        poll.map(|output| {
            (
                output,
                this.recorder.take().map(|r| r.pauses).unwrap_or_default(),
            )
        })
    }
}

//! Where the loop's events go: one seam between the loop and what observes it.
//!
//! The loop reports each event here, once, by calling one function of this module: an attempt
//! that will be retried, a hedge started, the end of a call. This module hands the event to
//! each sink: the logs (feature `tracing`) and the metrics (feature `metrics`); the spans are
//! the attempts' own (`spans`), and the user's hooks (`notify`, `on_give_up`, `fallback`) and an
//! integration's counters hear the same events through the loop's hooks. A sink whose feature
//! is off is nothing: its calls compile to nothing.
//!
//! Nothing here is generic: an error reaches a sink as `&dyn Debug` ([`Failure`]), so the code
//! of the events is compiled once, in this crate, and not again for each function that retries.
//! Every function here but [`accepted`] runs only when a call failed, so they are out of line
//! and cold (`PERFORMANCE.md` §6): the happy path carries a call at most.

use super::log::Show;
use super::{GiveUpReason, LogLevel};
use std::fmt;
#[cfg(feature = "tracing")]
use std::time::Duration;

/// What an attempt that did not end in an accepted `Ok` ended with, as the events show it.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))] // read by the logs alone
pub(crate) enum Failure<'a> {
    /// An error, shown with its `Debug` or by its type name.
    Error(&'a dyn fmt::Debug),
    /// An `Ok` that `on_result` rejected.
    Rejected,
}

/// An outcome as the events show it: its error by `D` (its `Debug`, or its type name), or an
/// `Ok` that `on_result` rejected. The outcome itself, wrapped, so that the event's `&dyn Debug`
/// points at the outcome where it already is: a wrapper holding a reference to it is one more
/// value in memory, stored on every failure whether the event is enabled or not.
pub(crate) struct Shown<T, E, D> {
    pub(crate) outcome: Result<T, E>,
    show: std::marker::PhantomData<fn() -> D>,
}

impl<T, E, D: Show<E>> Shown<T, E, D> {
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn new(outcome: Result<T, E>) -> Self {
        Shown {
            outcome,
            show: std::marker::PhantomData,
        }
    }

    /// The outcome as an event hears it.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn failure(&self) -> Failure<'_> {
        match self.outcome {
            Err(_) => Failure::Error(self),
            Ok(_) => Failure::Rejected,
        }
    }
}

impl<T, E, D: Show<E>> fmt::Debug for Shown<T, E, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            Err(error) => D::show(error, f),
            Ok(_) => f.write_str("an `Ok` that `on_result` rejected"),
        }
    }
}

/// How a call that did not end in an accepted `Ok` ended.
#[derive(Clone, Copy)]
#[cfg_attr(
    not(any(feature = "tracing", feature = "metrics")),
    allow(dead_code) // read by the sinks alone
)]
pub(crate) enum End {
    /// A permanent error: an answer, returned as it is.
    Permanent,
    /// The loop gave up on a failure it could have retried.
    GaveUp(GiveUpReason),
    /// The loop gave up, and the fallback made the result.
    Fallback(GiveUpReason),
    /// A layer above retries: this one made a single attempt.
    Nested,
}

/// The call ended with an accepted `Ok` after `retries` retries. The one event of the happy
/// path: with the `metrics` feature, a counter (out of line); without it, nothing.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn accepted(_function: &'static str, _retries: u32) {
    #[cfg(feature = "metrics")]
    if _retries == 0 {
        crate::metrics::first_try(_function);
    } else {
        crate::metrics::call_ended(_function, crate::metrics::Ended::Accepted, _retries + 1);
    }
}

/// Attempt `attempt` failed with `failure` and will be retried after `pause` nanoseconds:
/// `INFO`, and the retry and its pause counted. The level is checked inline, the event made out
/// of line (`PERFORMANCE.md` §6).
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub(crate) fn retrying(function: &'static str, attempt: u32, pause: u64, failure: Failure<'_>) {
    #[cfg(feature = "tracing")]
    if tracing::level_enabled!(tracing::Level::INFO) {
        log_retrying(function, attempt, pause, failure);
    }
    #[cfg(feature = "metrics")]
    crate::metrics::retrying(function, pause);
    let _ = (function, attempt, pause, failure);
}

#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn log_retrying(function: &'static str, attempt: u32, pause: u64, failure: Failure<'_>) {
    let pause = Duration::from_nanos(pause);
    match failure {
        Failure::Error(error) => tracing::info!(
            function,
            attempt,
            pause = ?pause,
            error = ?error,
            "attempt failed; retrying"
        ),
        Failure::Rejected => tracing::info!(
            function,
            attempt,
            pause = ?pause,
            "result rejected by `on_result`; retrying"
        ),
    }
}

/// A call that failed ended after `attempts` attempts: one event at `level` when it retried or
/// gave up (a permanent error on the first attempt is an answer, and logs nothing), and the end
/// counted.
#[cold]
#[inline(never)]
pub(crate) fn ended(
    function: &'static str,
    level: LogLevel,
    end: End,
    attempts: u32,
    failure: Failure<'_>,
) {
    #[cfg(feature = "tracing")]
    match end {
        End::Permanent if attempts > 1 => log_final(function, level, None, attempts, failure),
        End::GaveUp(reason) | End::Fallback(reason) => {
            log_final(function, level, Some(reason), attempts, failure)
        }
        End::Nested => tracing::debug!(
            function,
            "not retrying: a layer above retries this work (write `nested = retry` to retry here too)"
        ),
        End::Permanent => {}
    }
    #[cfg(feature = "metrics")]
    {
        use crate::metrics::Ended as M;
        let ended = match end {
            End::Permanent => M::Permanent,
            End::GaveUp(reason) => M::GaveUp(reason),
            End::Fallback(reason) => M::Fallback(reason),
            End::Nested => M::Nested,
        };
        crate::metrics::call_ended(function, ended, attempts);
    }
    let _ = (function, level, end, attempts, failure);
}

/// One event at each level: `tracing`'s macros take the level as a constant.
#[cfg(feature = "tracing")]
macro_rules! at_level {
    ($level:expr, $($event:tt)*) => {
        match $level {
            LogLevel::Error => tracing::error!($($event)*),
            LogLevel::Warn => tracing::warn!($($event)*),
            LogLevel::Info => tracing::info!($($event)*),
            LogLevel::Debug => tracing::debug!($($event)*),
            LogLevel::Trace => tracing::trace!($($event)*),
        }
    };
}

/// The end of a call that failed after retrying, or that the loop gave up on.
#[cfg(feature = "tracing")]
fn log_final(
    function: &'static str,
    level: LogLevel,
    gave_up: Option<GiveUpReason>,
    attempts: u32,
    failure: Failure<'_>,
) {
    let (reason, message): (&dyn fmt::Display, _) = match &gave_up {
        Some(reason) => (reason, "giving up"),
        None => (&"the error is not worth retrying", "failed after retries"),
    };
    match failure {
        Failure::Error(error) => at_level!(
            level,
            function,
            attempts,
            reason = %reason,
            error = ?error,
            "{message}"
        ),
        Failure::Rejected => at_level!(
            level,
            function,
            attempts,
            reason = %reason,
            "{message}; returning the last result rejected by `on_result`"
        ),
    }
}

/// A hedge of attempt `attempt` started (`started`), or was not for want of a budget token.
#[cold]
#[inline(never)]
pub(crate) fn hedged(function: &'static str, attempt: u32, hedge: u16, started: bool) {
    #[cfg(feature = "tracing")]
    if started {
        tracing::debug!(function, attempt, hedge, "no answer yet; starting a hedge");
    } else {
        tracing::debug!(
            function,
            attempt,
            hedge,
            "no answer yet, but the retry budget is empty; not hedging"
        );
    }
    #[cfg(feature = "metrics")]
    if started {
        crate::metrics::hedged(function);
    }
    let _ = (function, attempt, hedge, started);
}

/// A copy of a hedged attempt failed with an error worth retrying while another still runs.
#[cold]
#[inline(never)]
pub(crate) fn copy_failed(function: &'static str, attempt: u32, hedge: u16) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        function,
        attempt,
        hedge,
        "a copy failed; waiting for the others"
    );
    let _ = (function, attempt, hedge);
}

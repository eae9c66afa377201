//! What the loop tells the user's hooks: [`RetryEvent`] before each pause (`notify`), and
//! [`GiveUp`] with its [`GiveUpReason`] when it gives up (`on_give_up`, `fallback`). Public, as
//! `retry_runtime::{RetryEvent, GiveUp, GiveUpReason}`.

use std::fmt;
use std::time::Duration;

/// What `notify` hears before each pause.
///
/// ```
/// use retry_runtime::{retry, RetryEvent};
/// use std::io;
/// use std::sync::Mutex;
///
/// static HEARD: Mutex<Vec<(u32, u128)>> = Mutex::new(Vec::new());
///
/// fn remember(_: &io::Error, event: &RetryEvent) {
///     HEARD.lock().unwrap().push((event.attempt, event.pause.as_millis()));
/// }
///
/// #[retry(max = 2, base = "1ms", jitter = none, notify = remember)]
/// fn flaky() -> io::Result<()> {
///     Err(io::ErrorKind::TimedOut.into())
/// }
///
/// assert!(flaky().is_err());
/// assert_eq!(*HEARD.lock().unwrap(), [(1, 1), (2, 2)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryEvent {
    /// The name of the annotated function.
    pub function: &'static str,
    /// The attempt that failed: 1 for the first call.
    pub attempt: u32,
    /// The pause about to be taken, jitter and any server-suggested pause included.
    pub pause: Duration,
    /// Time since the first attempt started, on the loop's clock (the clock of the pauses).
    pub elapsed: Duration,
    /// The hedges (`hedge = ...`) that the failed attempt started beside itself, all of which
    /// failed too: 0 without hedging, or when the attempt failed before its first hedge.
    pub hedges: u32,
}

/// Why the loop gave up, with the attempts made and the time spent: what `on_give_up` (in its
/// forms with a second argument) and `fallback` hear.
///
/// The loop gives up on a failure that it could have retried; a permanent error (one the
/// classifier says is not worth retrying) is an answer, returned as it is, and nobody hears a
/// `GiveUp` for it.
///
/// ```
/// use retry_runtime::{retry, GiveUp, GiveUpReason};
/// use std::io;
///
/// /// What the portal does when the check is not possible right now: save the claim for
/// /// later, and answer with what was saved.
/// fn save_for_later(error: io::Error, why: GiveUp) -> io::Result<&'static str> {
///     assert_eq!(why.reason, GiveUpReason::Exhausted);
///     assert_eq!(why.attempts, 3);
///     eprintln!("saved for later after {error}: {why}");
///     Ok("your details are saved")
/// }
///
/// #[retry(max = 2, base = "1ms", fallback = save_for_later)]
/// fn check_coverage() -> io::Result<&'static str> {
///     Err(io::ErrorKind::ConnectionReset.into())
/// }
///
/// assert_eq!(check_coverage().unwrap(), "your details are saved");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GiveUp {
    /// The name of the annotated function.
    pub function: &'static str,
    /// Why the loop stopped.
    pub reason: GiveUpReason,
    /// The attempts that ran (the body was called): 0 when the circuit breaker refused the
    /// first one.
    pub attempts: u32,
    /// Time since the first attempt started, on the loop's clock (the clock of the pauses).
    pub elapsed: Duration,
}

impl GiveUp {
    /// A `GiveUp` as the loop would pass it, for calling a fallback outside the loop: in its
    /// unit tests, or where work saved by hand should read the same as work the fallback saved.
    ///
    /// ```
    /// use retry_runtime::{GiveUp, GiveUpReason};
    /// use std::time::Duration;
    ///
    /// let why = GiveUp::new("check_coverage", GiveUpReason::Exhausted, 4, Duration::from_secs(7));
    /// assert_eq!(
    ///     why.to_string(),
    ///     "`check_coverage` gave up after 4 attempts in 7s: retries used up"
    /// );
    /// ```
    pub const fn new(
        function: &'static str,
        reason: GiveUpReason,
        attempts: u32,
        elapsed: Duration,
    ) -> Self {
        GiveUp {
            function,
            reason,
            attempts,
            elapsed,
        }
    }
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` gave up after {} attempt{} in {:?}: {}",
            self.function,
            self.attempts,
            if self.attempts == 1 { "" } else { "s" },
            self.elapsed,
            self.reason
        )
    }
}

/// Why the loop gave up on a failure that it could have retried.
///
/// Later versions may add reasons (`#[non_exhaustive]`), so a `match` outside this crate needs a
/// `_` arm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GiveUpReason {
    /// The retries were used up (`max`).
    Exhausted,
    /// The next pause would end past the `deadline`.
    Deadline,
    /// The server asked for a pause longer than `max_delay` (HTTP `Retry-After`, gRPC pushback).
    SuggestedTooLong(Duration),
    /// The retry `budget` is empty.
    Budget,
    /// The circuit `breaker` is open: it opened with this failure (or others' while this one
    /// ran), or it refused the attempt, whose error is then `E::from(CircuitOpen)`.
    BreakerOpen,
    /// The admission `gate` shed the attempt before it was made: the call's error is then
    /// `E::from(Rejected)`, which carries the [`RejectReason`](crate::RejectReason).
    GateRejected {
        /// The gate's name ([`AdmissionGate::name`](crate::AdmissionGate::name)).
        gate: &'static str,
        /// The gate's mode.
        mode: crate::GateMode,
    },
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GiveUpReason::Exhausted => f.write_str("retries used up"),
            GiveUpReason::Deadline => f.write_str("the next pause would end past the deadline"),
            GiveUpReason::SuggestedTooLong(d) => write!(
                f,
                "the server asked for a {d:?} pause, longer than `max_delay`"
            ),
            GiveUpReason::Budget => f.write_str("the retry budget is empty"),
            GiveUpReason::BreakerOpen => f.write_str("the circuit breaker is open"),
            GiveUpReason::GateRejected { gate, mode } => write!(
                f,
                "the admission gate `{gate}` ({}) shed the attempt",
                mode.as_str()
            ),
        }
    }
}

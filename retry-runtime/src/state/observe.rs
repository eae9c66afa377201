//! Where the loop's events go: one seam between the loop and what observes it.
//!
//! The loop reports each event here, once, by calling one function of this module: an attempt
//! that will be retried, a hedge started, the end of a call. This module hands the event to
//! each sink: the logs (feature `tracing`) and the metrics (feature `metrics`); the spans are
//! the attempts' own (`spans`), and the user's hooks (`notify`, `on_give_up`, `fallback`) and an
//! integration's counters hear the same events through the loop's hooks. A sink whose feature
//! is off is nothing: its calls compile to nothing.
//!
//! A door's own events (a call, an attempt, a transparent retry, a hedged copy, a throttled
//! call, ...) are one public type, [`Event`], which a door hands to [`report`]: to the same logs
//! and metrics, and to a [`Sink`] of its own, the [`Counters`] every door hands
//! out. The loop hands its own events (a retry, a hedged copy, an attempt the gate shed) to that
//! sink as `Event`s too, when the door gives it one (`Settings::sink`; the extras'
//! `MaybeExtras::report`), beside the logs and the metrics it tells here. `engine` makes
//! `Event`, `Sink`, `report` and `Counters` public.
//!
//! Nothing here is generic: an error reaches a sink as `&dyn Debug` ([`Failure`]), so the code
//! of the events is compiled once, in this crate, and not again for each function that retries.
//! Every function here but [`accepted`] runs only when a call failed, so they are out of line
//! and cold (`PERFORMANCE.md` §6): the happy path carries a call at most.

use super::log::Show;
use super::{GiveUpReason, LogLevel};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
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
    pub(crate) fn new(outcome: Result<T, E>) -> Self {
        Shown {
            outcome,
            show: std::marker::PhantomData,
        }
    }

    /// The outcome as an event hears it.
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
#[inline]
pub(crate) fn accepted(_function: &'static str, _retries: u32) {
    #[cfg(feature = "metrics")]
    if _retries == 0 {
        crate::metrics::first_try(_function);
    } else {
        crate::metrics::call_ended(_function, None, _retries + 1);
    }
}

/// Attempt `attempt` failed with `failure` and will be retried after `pause` nanoseconds:
/// `INFO`, and the retry and its pause counted. The level is checked inline, the event made out
/// of line (`PERFORMANCE.md` §6).
#[inline]
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

/// A call that failed ended after `attempts` attempts: the end counted, and one event at
/// `level` when it retried or gave up (a permanent error on the first attempt is an answer, and
/// logs nothing).
#[cold]
#[inline(never)]
pub(crate) fn ended(
    function: &'static str,
    level: LogLevel,
    end: End,
    attempts: u32,
    failure: Failure<'_>,
) {
    let _ = (function, level, end, attempts, failure);
    #[cfg(feature = "metrics")]
    crate::metrics::call_ended(function, Some(end), attempts);
    #[cfg(feature = "tracing")]
    {
        let (reason, message): (&dyn fmt::Display, _) = match &end {
            End::GaveUp(reason) | End::Fallback(reason) => (reason, "giving up"),
            End::Permanent if attempts > 1 => {
                (&"the error is not worth retrying", "failed after retries")
            }
            End::Permanent => return,
            End::Nested => {
                return tracing::debug!(
                    function,
                    "not retrying: a layer above retries this work (write `nested = retry` to retry here too)"
                );
            }
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

// ---- the doors' events: one event type, one sink trait; the logs, the metrics, the counts ----

/// One thing a door or the loop did, as a door's sink hears it.
///
/// A door reports its own with [`report`]: to the logs (feature `tracing`), to the metrics
/// (feature `metrics`) and to its [`Counters`]. The loop reports its own ([`Event::Retry`],
/// [`Event::HedgedCopy`] for the copies it starts, [`Event::GateRejected`]) to the logs and the
/// metrics itself, and to the door's sink when the door hands it one
/// ([`Settings::sink`](crate::engine::Settings::sink)); such a door does not report them again. The guide's metrics table lists each event once, with
/// the doors that report it, its count, its log level and its metric.
///
/// Later versions may add events (`#[non_exhaustive]`): a `match` outside this crate needs a
/// `_` arm.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A call (a request) reached the door: counted, never logged.
    Call,
    /// An attempt was sent: a first attempt, a retry, a hedged copy or a transparent retry.
    /// Counted, never logged.
    Attempt,
    /// The loop (or a door's own policy) decided to retry attempt `attempt` (1 for the first),
    /// once per pause decided. Counted; the loop logs and measures the retry itself
    /// (`retry_retries_total`), so the sinks of the logs and the metrics take no note of it
    /// here.
    Retry {
        /// The attempt that failed.
        attempt: u32,
    },
    /// Attempt `attempt` provably never reached the server (a refused connection, a DNS
    /// failure, a refused HTTP/2 stream) and is resent through the loop, even when the request
    /// could not be resent otherwise (a POST without a key). Counted beside [`Event::Retry`],
    /// which the same attempt also is; `INFO`.
    NeverSent {
        /// The attempt that never reached the server.
        attempt: u32,
    },
    /// Attempt `attempt` never reached the server's application and is sent again at once,
    /// outside the policy (gRPC's transparent retry: the same `grpc-previous-rpc-attempts`, not
    /// counted by the throttle). `INFO`.
    TransparentRetry {
        /// The attempt sent again.
        attempt: u32,
    },
    /// A request is sent once, without retries, because its body could not be kept for a
    /// replay; `reason` says why. `INFO`.
    SentOnce {
        /// Why (`retry_http::SendOnce`).
        reason: &'a dyn fmt::Display,
    },
    /// A request with a method that is not idempotent (a POST) and no valid `Idempotency-Key`:
    /// resent only if it never reached the server. `DEBUG`.
    WithoutKey {
        /// The request's method.
        method: &'a str,
    },
    /// A hedge was sent: a copy of a call beside its first attempt, which has not answered.
    /// `DEBUG`, and `retry_hedges_total`, as the loop's hedges (`hedge = ...`). The loop hands
    /// the copies it starts to the door's sink as this, after it logged and measured them.
    HedgedCopy {
        /// The hedge's number: 1 for the first copy beside the first attempt (which A6 numbers
        /// copy 2).
        hedge: u32,
    },
    /// A retry throttle (gRPC's `retryThrottling`) stopped a call from retrying. `INFO`.
    Throttled,
    /// A call ended at its deadline with `DEADLINE_EXCEEDED`, after `timeout`. `INFO`.
    DeadlineExceeded {
        /// The call's time allowed.
        timeout: Duration,
    },
    /// The admission gate shed attempt `attempt` before it ran (`DynHooks::gate`): the loop's
    /// own event, which it hands to the door's sink ([`Settings::sink`]); the loop logs and
    /// measures the end it makes of the call itself (`retry_calls_total{reason="gate_rejected"}`),
    /// so the sinks of the logs and the metrics take no note of it here.
    ///
    /// [`Settings::sink`]: crate::engine::Settings::sink
    GateRejected {
        /// The attempt shed (1 for the first).
        attempt: u32,
    },
    /// A registry's reload (`retry-config`) added the named policy `function`. `INFO`.
    PolicyAdded,
    /// A registry's reload changed the named policy `function`: calls that start from now on
    /// run under the new one, calls under way keep the one they started with. `INFO`.
    PolicyChanged,
    /// A registry's reload removed the named policy `function`: a lookup of the name finds
    /// nothing from now on (the attribute then runs its written default). `INFO`.
    PolicyRemoved,
    /// A registry refused a configuration (`function` is the registry's name): it failed
    /// validation, and the policies that ran before run on, unchanged. `WARN`, with `error`.
    ReloadRejected {
        /// Why: the key, the rule and the value.
        error: &'a dyn fmt::Display,
    },
    /// A fault was injected into attempt `attempt` (1 for the first) on purpose, to rehearse a
    /// failure (the crate `retry-chaos`): by the loop before the attempt (feature `faults`), or
    /// by a chaos layer under a door (an answer). `INFO`, and on `retry_door_events_total` with
    /// the label `injected_error`, `injected_latency` or `injected_outcome`, so that a dashboard
    /// tells injected failures from real ones.
    Injected {
        /// The attempt the fault went into.
        attempt: u32,
        /// What was injected.
        fault: Injection,
    },
}

/// What [`Event::Injected`] injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Injection {
    /// An error of the call's own type, before the attempt's body ran.
    Error,
    /// A latency added to the attempt, inside its timeout.
    Latency(Duration),
    /// An answer the door read as the server's: an HTTP status or a gRPC code.
    Outcome {
        /// The HTTP status, or the gRPC code's number.
        code: u16,
    },
}

impl fmt::Debug for Event<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, field, value): (_, _, &dyn fmt::Debug) = match self {
            Event::Call => return f.write_str("Call"),
            Event::Attempt => return f.write_str("Attempt"),
            Event::Throttled => return f.write_str("Throttled"),
            Event::PolicyAdded => return f.write_str("PolicyAdded"),
            Event::PolicyChanged => return f.write_str("PolicyChanged"),
            Event::PolicyRemoved => return f.write_str("PolicyRemoved"),
            Event::ReloadRejected { error } => {
                let error = format_args!("{error}");
                return f
                    .debug_struct("ReloadRejected")
                    .field("error", &error)
                    .finish();
            }
            Event::SentOnce { reason } => {
                let reason = format_args!("{reason}");
                return f.debug_struct("SentOnce").field("reason", &reason).finish();
            }
            Event::Retry { attempt } => ("Retry", "attempt", attempt),
            Event::NeverSent { attempt } => ("NeverSent", "attempt", attempt),
            Event::TransparentRetry { attempt } => ("TransparentRetry", "attempt", attempt),
            Event::WithoutKey { method } => ("WithoutKey", "method", method),
            Event::HedgedCopy { hedge } => ("HedgedCopy", "hedge", hedge),
            Event::DeadlineExceeded { timeout } => ("DeadlineExceeded", "timeout", timeout),
            Event::GateRejected { attempt } => ("GateRejected", "attempt", attempt),
            Event::Injected { attempt, fault } => {
                return f
                    .debug_struct("Injected")
                    .field("attempt", attempt)
                    .field("fault", fault)
                    .finish();
            }
        };
        f.debug_struct(name).field(field, value).finish()
    }
}

impl Event<'_> {
    /// The event's `event` label on `retry_door_events_total`; `None` for the events that are
    /// not measured there ([`Event::Call`], [`Event::Attempt`], [`Event::Retry`] and
    /// [`Event::GateRejected`] are the loop's to measure, [`Event::HedgedCopy`] is
    /// `retry_hedges_total`).
    ///
    /// ```
    /// use retry_runtime::engine::Event;
    ///
    /// assert_eq!(Event::Throttled.label(), Some("throttled"));
    /// assert_eq!(Event::Call.label(), None);
    /// ```
    pub const fn label(&self) -> Option<&'static str> {
        match self {
            Event::NeverSent { .. } => Some("never_sent"),
            Event::TransparentRetry { .. } => Some("transparent_retry"),
            Event::SentOnce { .. } => Some("sent_once"),
            Event::WithoutKey { .. } => Some("without_key"),
            Event::Throttled => Some("throttled"),
            Event::DeadlineExceeded { .. } => Some("deadline_exceeded"),
            Event::PolicyAdded => Some("policy_added"),
            Event::PolicyChanged => Some("policy_changed"),
            Event::PolicyRemoved => Some("policy_removed"),
            Event::ReloadRejected { .. } => Some("reload_rejected"),
            Event::Injected { fault, .. } => Some(match fault {
                Injection::Error => "injected_error",
                Injection::Latency(_) => "injected_latency",
                Injection::Outcome { .. } => "injected_outcome",
            }),
            // Every variant named, so that a new one is given a label (and so its log line and
            // its metric in `report`) or none on purpose.
            Event::Call
            | Event::Attempt
            | Event::Retry { .. }
            | Event::HedgedCopy { .. }
            | Event::GateRejected { .. } => None,
        }
    }
}

/// Who hears a door's [`Event`]s besides the logs and the metrics (which [`report`] tells
/// always): a door's [`Counters`], or a door author's own (a test's list, a pair of sinks as a
/// tuple).
///
/// `()` is the sink that hears nothing: a door without a sink of its own reports to it, and
/// its reports compile to the logs' and the metrics', which are nothing when their features are
/// off.
///
/// ```
/// use retry_runtime::engine::{self, Counters, Event, Sink};
/// use std::sync::Mutex;
///
/// /// A door author's sink: the events' names, in order.
/// #[derive(Default)]
/// struct Heard(Mutex<Vec<String>>);
///
/// impl Sink for Heard {
///     fn event(&self, function: &'static str, event: &Event<'_>) {
///         self.0.lock().unwrap().push(format!("{function}: {event:?}"));
///     }
/// }
///
/// let (heard, counters) = (Heard::default(), Counters::default());
/// engine::report("quotes", Event::Call, &(&heard, &counters));
/// engine::report("quotes", Event::Throttled, &(&heard, &counters));
/// assert_eq!(*heard.0.lock().unwrap(), ["quotes: Call", "quotes: Throttled"]);
/// assert_eq!((counters.calls(), counters.throttled()), (1, 1));
/// ```
pub trait Sink {
    /// `function` (the door's name, as [`Settings::name`](crate::engine::Settings::name)) did
    /// `event`.
    fn event(&self, function: &'static str, event: &Event<'_>);
}

impl Sink for () {
    #[inline]
    fn event(&self, _: &'static str, _: &Event<'_>) {}
}

impl<S: Sink + ?Sized> Sink for &S {
    fn event(&self, function: &'static str, event: &Event<'_>) {
        (**self).event(function, event);
    }
}

impl<S: Sink + ?Sized> Sink for std::sync::Arc<S> {
    fn event(&self, function: &'static str, event: &Event<'_>) {
        (**self).event(function, event);
    }
}

impl<A: Sink, B: Sink> Sink for (A, B) {
    fn event(&self, function: &'static str, event: &Event<'_>) {
        self.0.event(function, event);
        self.1.event(function, event);
    }
}

/// Reports a door's `event` to the logs (feature `tracing`: each event at the level [`Event`]
/// gives it, with `function` and the event's fields), the metrics (feature `metrics`:
/// [`Event::HedgedCopy`] on `retry_hedges_total`, each event with a [`label`](Event::label) on
/// `retry_door_events_total{function, event}`) and `sink` (the door's [`Counters`], or `&()`).
/// Inline and monomorphic: an event that a sink takes no note of, or whose feature is off, costs
/// nothing, and [`Event::Call`] to a door's `Counters` is one relaxed atomic add (the tower
/// layer's request: 2,793 instructions before and after, `bench/RESULTS.md` §7).
#[inline]
pub fn report(function: &'static str, event: Event<'_>, sink: &impl Sink) {
    // The loop logs and measures its own events (a call's end, each retry, an attempt the gate
    // shed), and a call or an attempt is only counted: the logs and the metrics hear the rest.
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    if event.label().is_some() || matches!(event, Event::HedgedCopy { .. }) {
        #[cfg(feature = "tracing")]
        log_event(function, &event);
        #[cfg(feature = "metrics")]
        match event.label() {
            Some(label) => crate::metrics::door_event(function, label),
            None => crate::metrics::hedged(function),
        }
    }
    sink.event(function, &event);
}

/// The logs of [`report`]: each event at the level [`Event`] gives it, with `function` and the
/// event's own fields.
#[cfg(feature = "tracing")]
#[cold]
#[inline(never)]
fn log_event(function: &'static str, event: &Event<'_>) {
    match *event {
        Event::NeverSent { attempt } => tracing::info!(
            function,
            attempt,
            "the attempt never reached the server: resending it"
        ),
        Event::TransparentRetry { attempt } => tracing::info!(
            function,
            attempt,
            "the attempt never reached the server's application: sending it again at once (a transparent retry)"
        ),
        Event::SentOnce { reason } => {
            tracing::info!(function, reason = %reason, "sending once, without retries")
        }
        Event::WithoutKey { method } => tracing::debug!(
            function,
            method,
            "a non-idempotent request without a valid `Idempotency-Key` header: retried only if it never reached the server"
        ),
        Event::HedgedCopy { hedge } => {
            tracing::debug!(function, hedge, "no answer yet; starting a hedge")
        }
        Event::Throttled => tracing::info!(
            function,
            "the retry throttle is below its threshold: not retrying"
        ),
        Event::DeadlineExceeded { timeout } => tracing::info!(
            function,
            timeout = ?timeout,
            "the call's deadline passed: DEADLINE_EXCEEDED"
        ),
        Event::PolicyAdded => tracing::info!(function, "named policy added"),
        Event::PolicyChanged => tracing::info!(
            function,
            "named policy changed: calls from now on run under the new one"
        ),
        Event::PolicyRemoved => tracing::info!(function, "named policy removed"),
        Event::ReloadRejected { error } => tracing::warn!(
            function,
            error = %error,
            "configuration refused: the running policies are kept"
        ),
        Event::Injected { attempt, fault } => tracing::info!(
            function,
            attempt,
            fault = ?fault,
            injected = true,
            "a fault was injected into the attempt (a rehearsal, not a real failure)"
        ),
        _ => {}
    }
}

/// [`Counters`] from one table: each count's getter (its name, its doc) and the event it
/// counts; the struct holds one atomic per row, and its [`Sink`] adds one to the row's.
macro_rules! counters {
    ($(#[$doc:meta])* pub struct Counters { $($(#[$count_doc:meta])* $count:ident: $event:pat,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Default)]
        pub struct Counters {
            $($count: AtomicU64,)*
        }

        impl Sink for Counters {
            #[inline]
            fn event(&self, _: &'static str, event: &Event<'_>) {
                let count = match event {
                    $($event => &self.$count,)*
                };
                count.fetch_add(1, Ordering::Relaxed);
            }
        }

        impl Counters {
            $(
                $(#[$count_doc])*
                pub fn $count(&self) -> u64 {
                    self.$count.load(Ordering::Relaxed)
                }
            )*
        }
    };
}

counters! {
    /// The counts of a door's events, shared by its clones, as every door hands them out
    /// (`retry_http::HttpRetry::counters`, `retry_grpc::channel::GrpcRetryLayer::counters`): one
    /// relaxed atomic per count, so each count is exact and a read of several is not a snapshot.
    ///
    /// Each count is of one [`Event`], heard once: a door's own events it reports through
    /// [`report`], and the loop's (retries, hedged copies, attempts the gate shed) the loop reports
    /// to a door that hands it these counts
    /// ([`Settings::sink`](crate::engine::Settings::sink)). The HTTP doors count calls, retries,
    /// never-sent retries, requests sent once, requests without a key and attempts their gate shed;
    /// the gRPC door calls, attempts, retries, transparent retries, hedged copies, throttled calls
    /// and calls past their deadline.
    ///
    /// ```
    /// use retry_runtime::engine::{self, Counters, Event};
    ///
    /// let counters = Counters::default();
    /// engine::report("quotes", Event::Call, &counters);
    /// engine::report("quotes", Event::Attempt, &counters);
    /// engine::report("quotes", Event::Retry { attempt: 1 }, &counters);
    /// engine::report("quotes", Event::Attempt, &counters);
    /// assert_eq!((counters.calls(), counters.attempts(), counters.retries()), (1, 2, 1));
    /// ```
    pub struct Counters {
        /// Calls made ([`Event::Call`]): each counted once, however many attempts it took.
        calls: Event::Call,
        /// Attempts sent ([`Event::Attempt`]): first attempts, retries, hedged copies and
        /// transparent retries. The gRPC door counts them; the HTTP doors do not (an attempt there
        /// is a request or one of its retries).
        attempts: Event::Attempt,
        /// Retries decided ([`Event::Retry`]), one per pause: by the loop, for a door that hands it
        /// these counts (for the HTTP doors the never-sent ones included); for the gRPC door those
        /// A6's `grpc-previous-rpc-attempts` counts.
        retries: Event::Retry { .. },
        /// Retries of an attempt that provably never reached the server ([`Event::NeverSent`]).
        never_sent_retries: Event::NeverSent { .. },
        /// Transparent retries ([`Event::TransparentRetry`]): attempts sent again at once because
        /// the one before never reached the server's application; not counted by the policy, the
        /// header or the throttle.
        transparent_retries: Event::TransparentRetry { .. },
        /// Requests sent once because their body could not be kept for a replay
        /// ([`Event::SentOnce`]).
        sent_once: Event::SentOnce { .. },
        /// Non-idempotent requests without a (valid) `Idempotency-Key`, resent only if never sent
        /// ([`Event::WithoutKey`]).
        without_key: Event::WithoutKey { .. },
        /// Hedged copies sent after each call's first ([`Event::HedgedCopy`]).
        hedged_copies: Event::HedgedCopy { .. },
        /// Calls a retry throttle stopped from retrying ([`Event::Throttled`]).
        throttled: Event::Throttled,
        /// Calls that ended at their deadline with `DEADLINE_EXCEEDED` ([`Event::DeadlineExceeded`]).
        deadline_exceeded: Event::DeadlineExceeded { .. },
        /// Attempts the admission gate shed before they ran ([`Event::GateRejected`]): counted by
        /// the loop for a door that hands it these counts ([`Settings::sink`]) and a gate
        /// ([`DynHooks::gate`]).
        ///
        /// [`Settings::sink`]: crate::engine::Settings::sink
        /// [`DynHooks::gate`]: crate::engine::DynHooks::gate
        gate_rejected: Event::GateRejected { .. },
        /// Named policies a registry's reload added ([`Event::PolicyAdded`]).
        policies_added: Event::PolicyAdded,
        /// Named policies a registry's reload changed ([`Event::PolicyChanged`]).
        policies_changed: Event::PolicyChanged,
        /// Named policies a registry's reload removed ([`Event::PolicyRemoved`]).
        policies_removed: Event::PolicyRemoved,
        /// Configurations a registry refused, keeping the running policies
        /// ([`Event::ReloadRejected`]).
        reloads_rejected: Event::ReloadRejected { .. },
        /// Faults injected on purpose ([`Event::Injected`]): errors and latencies the loop
        /// injected before an attempt (feature `faults`), answers a chaos layer under the door
        /// made up.
        injected: Event::Injected { .. },
    }
}

impl Counters {
    /// The HTTP doors' word for [`calls`](Self::calls): requests handled.
    pub fn requests(&self) -> u64 {
        self.calls()
    }
}

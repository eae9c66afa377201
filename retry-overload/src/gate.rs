//! [`AdmissionGate`]: one type for the four modes, its permit and its rejection.

use crate::concurrency::{Aimd, Gradient2, Gradient2Limiter, Slots};
use crate::rate::{ClientRateLimit, RateLimiter};
use crate::throttling::{AdaptiveThrottling, Throttler};
use std::fmt;
use std::time::{Duration, Instant};

/// A gate asked before every attempt of every call that names it, first tries included, which
/// sheds load at the client when the service is struggling, and learns from each attempt's
/// answer. Shared like retry-runtime's `RetryBudget`: `const`-constructible, for a `static`.
///
/// Four modes ([`GateMode`]), one per constructor:
///
/// | mode | sheds when | follows |
/// |---|---|---|
/// | [`adaptive_throttling`](AdmissionGate::adaptive_throttling) | the service rejected more than half the recent requests: each attempt is rejected locally with probability `max(0, (requests − 2·accepts) / (requests + 1))` | Google SRE book, "Handling Overload"; gRPC-Go's adaptive throttler |
/// | [`rate_limit`](AdmissionGate::rate_limit) | after the first throttled answer: attempts are held to a CUBIC-controlled rate (they wait for a token, or fail fast) | the AWS SDKs' adaptive retry mode (botocore) |
/// | [`aimd`](AdmissionGate::aimd) | the attempts in flight reach a limit that grows by one per answer while in use and is cut by a tenth on a drop (throttled, shed or too slow) | Netflix `concurrency-limits` (`AIMDLimit`) |
/// | [`gradient2`](AdmissionGate::gradient2) | the attempts in flight reach a limit that follows latency: it shrinks when an attempt takes longer than 1.5 times the long-term average | Netflix `concurrency-limits` (`Gradient2Limit`) |
///
/// Each attempt asks [`admit`](AdmissionGate::admit) (with the current time: called directly,
/// the gate never reads the clock). `Ok` is a [`GatePermit`]: wait for [`GatePermit::wait`]
/// (only the rate limiter ever asks for a wait), make the attempt, and report its answer with
/// [`GatePermit::record`]. `Err` is a [`Rejected`]: do not make the attempt. A permit dropped
/// without a report (a cancelled call) gives back what it held, a concurrency slot or a rate
/// token, and counts as nothing, so cancellations never leak capacity.
///
/// No allocation, and no lock on the happy path: admitting and recording are a load and one
/// compare-and-swap (adaptive throttling while nothing was throttled in the window, the rate
/// limiter before the first throttle) or two (AIMD). Gradient2 locks to report (a few float
/// operations, as Netflix's `synchronized` update), and so does the rate limiter once a
/// throttle has turned it on.
///
/// # Clock reads
///
/// The loops of every door of retry-runtime (the attribute, `retry_block!`, the `Retrier`, the
/// engine) hand the gate their own clock (a paused tokio clock or a recording's virtual clock
/// in tests, so that the gate sees the same exact times as the loop) and the gate reads it
/// only when its mode needs the time. On the happy path (every attempt accepted) that is one
/// read per attempt for adaptive throttling and the rate limiter (the answer's time, which
/// places it in its bin of the window or its half second of the measured rate; admitting
/// needs no time while nothing is throttled in the window, or before the first throttle,
/// except at the gate's first use, which fixes its time 0), and two for AIMD and Gradient2
/// (the attempt's latency). An [`Ignored`](GateOutcome::Ignored) answer reads none. The
/// times are exact, so each read costs what the clock costs (`Instant::now()`, 24–28 ns on
/// the machine of `bench/RESULTS.md` §3), and with the shared counts' atomic updates that sets
/// a floor under a gated call: about 39 ns for adaptive throttling and the rate limiter and
/// 67 ns for AIMD and Gradient2 there, before any of the gate's own work (§3, "The floor under
/// the gate").
///
/// ```
/// use retry_overload::{AdmissionGate, Aimd, GateOutcome, RejectReason};
/// use std::time::{Duration, Instant};
///
/// static INVENTORY: AdmissionGate =
///     AdmissionGate::aimd(Aimd::new().initial_limit(2).min_limit(1)).name("inventory");
///
/// let t0 = Instant::now();
/// let first = INVENTORY.admit(t0).expect("below the limit");
/// let second = INVENTORY.admit(t0).expect("below the limit");
/// let refused = INVENTORY.admit(t0).unwrap_err();
/// assert_eq!(refused.reason(), RejectReason::ConcurrencyLimit { limit: 2 });
///
/// // The service shed the first attempt: the limit shrinks to ⌊2 × 0.9⌋ = 1.
/// first.record(GateOutcome::Throttled, t0 + Duration::from_millis(20));
/// drop(second); // cancelled: its slot comes back, nothing is learnt
/// assert!(INVENTORY.admit(t0).is_ok());
/// ```
#[derive(Debug)]
pub struct AdmissionGate {
    pub(super) mode: Mode,
    name: &'static str,
}

#[derive(Debug)]
pub(super) enum Mode {
    Throttling(Throttler),
    RateLimit(RateLimiter),
    Aimd { config: Aimd, slots: Slots },
    Gradient2(Gradient2Limiter),
}

loom_const_fn! {
    impl AdmissionGate {
        /// Client-side adaptive throttling (Google SRE book): see [`AdaptiveThrottling`] for
        /// the rule and the defaults.
        ///
        /// ```
        /// use retry_overload::{AdaptiveThrottling, AdmissionGate, GateOutcome};
        /// use std::time::Instant;
        ///
        /// static GATE: AdmissionGate = AdmissionGate::adaptive_throttling(AdaptiveThrottling::new());
        /// let t0 = Instant::now();
        /// // The service throttled 10 requests and accepted 2: (12 − 2·2) / (12 + 1) = 8/13.
        /// for accepted in [false; 10].into_iter().chain([true; 2]) {
        ///     let outcome = if accepted { GateOutcome::Accepted } else { GateOutcome::Throttled };
        ///     // A draw of 1.0 is never shed: these attempts all reach the service.
        ///     GATE.admit_with(t0, || 1.0).expect("admitted").record(outcome, t0);
        /// }
        /// assert!(GATE.admit_with(t0, || 0.9).is_ok()); // a draw above 8/13 goes through
        /// assert!(GATE.admit_with(t0, || 0.5).is_err()); // one below it is shed
        /// ```
        pub fn adaptive_throttling(config: AdaptiveThrottling) -> Self {
            Self {
                mode: Mode::Throttling(Throttler::new(config)),
                name: "unnamed",
            }
        }

        /// The AWS SDKs' adaptive mode's client rate limiter (CUBIC): see [`ClientRateLimit`].
        pub fn rate_limit(config: ClientRateLimit) -> Self {
            Self {
                mode: Mode::RateLimit(RateLimiter::new(config)),
                name: "unnamed",
            }
        }

        /// An adaptive concurrency limit, AIMD: see [`Aimd`].
        pub fn aimd(config: Aimd) -> Self {
            Self {
                mode: Mode::Aimd {
                    config,
                    slots: Slots::new(config.limits.initial),
                },
                name: "unnamed",
            }
        }

        /// An adaptive concurrency limit, Gradient2: see [`Gradient2`].
        pub fn gradient2(config: Gradient2) -> Self {
            Self {
                mode: Mode::Gradient2(Gradient2Limiter::new(config)),
                name: "unnamed",
            }
        }

        /// Its name, for its metrics and its [`Rejected`] errors: a name of the code's, such as
        /// the service it protects, never anything a request brings. `unnamed` if none was
        /// given.
        pub fn name(mut self, name: &'static str) -> Self {
            self.name = name;
            self
        }
    }
}

impl AdmissionGate {
    /// Its name ([`name`](AdmissionGate::name)).
    pub const fn get_name(&self) -> &'static str {
        self.name
    }

    /// Its mode.
    pub const fn mode(&self) -> GateMode {
        match self.mode {
            Mode::Throttling(_) => GateMode::AdaptiveThrottling,
            Mode::RateLimit(_) => GateMode::RateLimit,
            Mode::Aimd { .. } => GateMode::Aimd,
            Mode::Gradient2(_) => GateMode::Gradient2,
        }
    }

    /// Asks to make an attempt at `now`: `Ok` with a permit (wait for its
    /// [`wait`](GatePermit::wait), make the attempt, [`record`](GatePermit::record) its
    /// answer), or `Err` when the gate sheds it.
    ///
    /// Adaptive throttling draws its random number only when the rejection probability is
    /// above 0, from the thread's generator, or inside retry-runtime's `testing::record` from
    /// the recording's seeded one (the same source as the loop's jitter);
    /// [`admit_with`](AdmissionGate::admit_with) takes it from the caller.
    #[inline]
    pub fn admit(&self, now: Instant) -> Result<GatePermit<'_>, Rejected> {
        self.admit_with(now, crate::random::uniform)
    }

    /// [`admit`](AdmissionGate::admit) with the random number of adaptive throttling from
    /// `random`, a uniform draw in [0, 1): the attempt is shed when it is below the rejection
    /// probability. Called at most once, and only in that mode when the probability is above
    /// 0 (a NaN admits).
    #[inline]
    pub fn admit_with(
        &self,
        now: Instant,
        random: impl FnOnce() -> f64,
    ) -> Result<GatePermit<'_>, Rejected> {
        self.admit_by(|| now, random)
    }

    /// [`admit`](AdmissionGate::admit) at the time `clock` says, read only if the mode needs it
    /// (see "Clock reads" above): retry-runtime's loop's way in, with the loop's clock. Public
    /// only for the runtime, whose loop calls it as a method of the gate, as it did when the
    /// gate was the runtime's own; not part of this crate's API.
    #[doc(hidden)]
    #[inline]
    pub fn admit_lazily(&self, clock: fn() -> Instant) -> Result<GatePermit<'_>, Rejected> {
        self.admit_by(clock, crate::random::uniform)
    }

    /// [`admit_with`](AdmissionGate::admit_with), reading the time from `clock` at most once.
    #[inline]
    fn admit_by(
        &self,
        clock: impl FnOnce() -> Instant,
        random: impl FnOnce() -> f64,
    ) -> Result<GatePermit<'_>, Rejected> {
        let held = match &self.mode {
            Mode::Throttling(throttler) => throttler.admit(clock, random).map(|()| Held::Nothing),
            Mode::RateLimit(limiter) => limiter.admit(clock).map(|wait| match wait {
                Some(wait) => Held::Token { wait },
                None => Held::Nothing,
            }),
            Mode::Aimd { slots, .. } => {
                let start = clock();
                slots
                    .acquire()
                    .map(|in_flight| Held::Slot { start, in_flight })
            }
            Mode::Gradient2(limiter) => {
                let start = clock();
                limiter
                    .slots
                    .acquire()
                    .map(|in_flight| Held::Slot { start, in_flight })
            }
        };
        match held {
            Ok(held) => Ok(GatePermit {
                gate: self,
                held,
                done: false,
            }),
            Err(reason) => Err(Rejected {
                mode: self.mode(),
                reason,
                gate: self.name,
            }),
        }
    }

    /// What the gate knows at `now`, for metrics and tests.
    ///
    /// ```
    /// use retry_overload::{AdmissionGate, Gradient2, GateState};
    /// use std::time::Instant;
    ///
    /// let gate = AdmissionGate::gradient2(Gradient2::new());
    /// let t0 = Instant::now();
    /// let _permit = gate.admit(t0).expect("below the limit");
    /// assert_eq!(gate.state(t0), GateState::Concurrency { limit: 20, in_flight: 1 });
    /// ```
    pub fn state(&self, now: Instant) -> GateState {
        match &self.mode {
            Mode::Throttling(throttler) => {
                let counts = throttler.counts(now);
                GateState::AdaptiveThrottling {
                    requests: counts.requests(),
                    accepts: counts.accepts,
                    rejection_probability: throttler.probability(counts),
                }
            }
            Mode::RateLimit(limiter) => {
                let state = limiter.snapshot(now);
                GateState::RateLimit {
                    enabled: state.enabled,
                    fill_rate: state.fill_rate,
                    measured_rate: state.measured_rate,
                    tokens: state.capacity,
                }
            }
            Mode::Aimd { slots, .. } => {
                let (limit, in_flight) = slots.get();
                GateState::Concurrency { limit, in_flight }
            }
            Mode::Gradient2(limiter) => {
                let (limit, in_flight) = limiter.slots.get();
                GateState::Concurrency { limit, in_flight }
            }
        }
    }
}

/// What a permit holds until it ends.
#[derive(Clone, Copy, Debug)]
enum Held {
    Nothing,
    /// A rate-limiter token, due after `wait` (given back if the permit is dropped without a
    /// report).
    Token {
        wait: Duration,
    },
    /// A concurrency slot, taken at `start` with `in_flight` attempts in flight (itself
    /// included).
    Slot {
        start: Instant,
        in_flight: u32,
    },
}

/// Permission to make one attempt, from [`AdmissionGate::admit`]: wait for
/// [`wait`](GatePermit::wait), make the attempt, and report its answer with
/// [`record`](GatePermit::record).
///
/// Dropped without a report (a cancelled call), it gives back what it held (a concurrency
/// slot, a rate token) and the gate learns nothing from it: cancellations never leak capacity.
///
/// ```
/// use retry_overload::{AdmissionGate, Aimd, GateState};
/// use std::time::Instant;
///
/// let gate = AdmissionGate::aimd(Aimd::new().initial_limit(1).min_limit(1));
/// let t0 = Instant::now();
/// let permit = gate.admit(t0).expect("below the limit");
/// assert!(gate.admit(t0).is_err());
/// drop(permit); // the caller's future was dropped
/// assert_eq!(gate.state(t0), GateState::Concurrency { limit: 1, in_flight: 0 });
/// ```
#[derive(Debug)]
#[must_use = "report the attempt's answer with `GatePermit::record`; dropping the permit counts as a cancellation"]
pub struct GatePermit<'a> {
    gate: &'a AdmissionGate,
    held: Held,
    done: bool,
}

impl GatePermit<'_> {
    /// How long to wait before making the attempt: zero, except from a rate limiter whose
    /// token is not due yet (the token is reserved for the attempt).
    pub fn wait(&self) -> Duration {
        match self.held {
            Held::Token { wait } => wait,
            _ => Duration::ZERO,
        }
    }

    /// Reports the answer of the attempt, which ended at `now`.
    #[inline]
    pub fn record(self, outcome: GateOutcome, now: Instant) {
        self.record_by(outcome, || now);
    }

    /// [`record`](GatePermit::record) at the time `clock` says, read at most once, and not for
    /// an [`Ignored`](GateOutcome::Ignored) answer: retry-runtime's loop's way in, with the
    /// loop's clock. Public only for the runtime, as `AdmissionGate::admit_lazily` is.
    #[doc(hidden)]
    #[inline]
    pub fn record_by(mut self, outcome: GateOutcome, clock: impl FnOnce() -> Instant) {
        self.done = true;
        if outcome == GateOutcome::Ignored {
            return self.release(false);
        }
        let now = clock();
        match &self.gate.mode {
            Mode::Throttling(throttler) => {
                throttler.record(outcome == GateOutcome::Accepted, now);
            }
            Mode::RateLimit(limiter) => {
                limiter.record(outcome == GateOutcome::Throttled, now);
            }
            Mode::Aimd { config, slots } => {
                if let Held::Slot { start, in_flight } = self.held {
                    let dropped = outcome != GateOutcome::Accepted
                        || now.saturating_duration_since(start) > config.timeout;
                    slots.release(|limit| config.next(limit, in_flight, dropped));
                }
            }
            Mode::Gradient2(limiter) => {
                if let Held::Slot { start, in_flight } = self.held {
                    limiter.sample(now.saturating_duration_since(start), in_flight);
                }
            }
        }
    }

    /// Ends the permit without learning anything: a concurrency slot is given back, and a
    /// rate token too when the permit was dropped (`cancelled`).
    fn release(&self, cancelled: bool) {
        match (&self.gate.mode, self.held) {
            (Mode::Aimd { slots, .. }, Held::Slot { .. }) => slots.release(|limit| limit),
            (Mode::Gradient2(limiter), Held::Slot { .. }) => limiter.slots.release(|limit| limit),
            (Mode::RateLimit(limiter), Held::Token { .. }) if cancelled => limiter.give_back(),
            _ => {}
        }
    }
}

impl Drop for GatePermit<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.release(true);
        }
    }
}

/// The answer of an attempt, as an [`AdmissionGate`] learns from it
/// ([`GatePermit::record`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GateOutcome {
    /// The service handled the attempt: a success, or an answer that says nothing about its
    /// load (a "not found", a validation error, a 500). Adaptive throttling counts an accept;
    /// the rate limiter a non-throttling answer (its rate may grow); the concurrency limits a
    /// success (AIMD still counts one slower than its `timeout` as a drop).
    Accepted,
    /// The service shed the attempt: throttled (429, an AWS throttling code, gRPC
    /// `RESOURCE_EXHAUSTED`) or overloaded (a 503). Adaptive throttling counts a request
    /// without an accept; the rate limiter cuts its rate (and turns on at the first); AIMD
    /// shrinks its limit.
    Throttled,
    /// No answer in time: the attempt's own timeout, or a deadline. The references differ, and
    /// each mode follows its own: adaptive throttling counts a request without an accept (the
    /// service did not accept it), the rate limiter a non-throttling answer (botocore cuts the
    /// rate only on throttling errors), AIMD a drop (Netflix's `AIMDLimit` counts a timeout as
    /// one), Gradient2 a sample of that latency.
    TimedOut,
    /// Not counted: the attempt says nothing about the service (it failed on the client's side,
    /// before it was sent). Its slot is given back; the rate limiter keeps the token spent.
    Ignored,
}

/// The mode of an [`AdmissionGate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GateMode {
    /// Client-side adaptive throttling ([`AdaptiveThrottling`]).
    AdaptiveThrottling,
    /// The client rate limiter of the AWS adaptive mode ([`ClientRateLimit`]).
    RateLimit,
    /// An AIMD concurrency limit ([`Aimd`]).
    Aimd,
    /// A Gradient2 concurrency limit ([`Gradient2`]).
    Gradient2,
}

impl GateMode {
    /// The mode's name, as a metrics label: `adaptive_throttling`, `rate_limit`, `aimd`,
    /// `gradient2`.
    pub const fn as_str(self) -> &'static str {
        match self {
            GateMode::AdaptiveThrottling => "adaptive_throttling",
            GateMode::RateLimit => "rate_limit",
            GateMode::Aimd => "aimd",
            GateMode::Gradient2 => "gradient2",
        }
    }
}

/// What an [`AdmissionGate`] knows, from [`AdmissionGate::state`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum GateState {
    /// Adaptive throttling: the counts of the window, and the probability that the next
    /// attempt is shed.
    AdaptiveThrottling {
        /// Requests that got an answer in the window, the locally rejected included.
        requests: u64,
        /// Requests the service accepted in the window.
        accepts: u64,
        /// `max(0, (requests − K·accepts) / (requests + padding))`.
        rejection_probability: f64,
    },
    /// The rate limiter.
    RateLimit {
        /// Whether a throttle has turned the bucket on.
        enabled: bool,
        /// Tokens per second.
        fill_rate: f64,
        /// The client's smoothed sending rate, in answers per second.
        measured_rate: f64,
        /// Tokens in the bucket (negative while attempts wait for reserved tokens).
        tokens: f64,
    },
    /// A concurrency limit (AIMD or Gradient2).
    Concurrency {
        /// The current limit.
        limit: u32,
        /// Attempts admitted and not yet ended.
        in_flight: u32,
    },
}

/// An attempt the [`AdmissionGate`] shed: the service was not called.
///
/// Like retry-runtime's `CircuitOpen`, a caller's error type can carry it (`From`, which
/// `#[retry(gate = ...)]` asks of the function's error type), so that a fallback can answer from elsewhere and metrics can count it by
/// [`reason`](Rejected::reason).
///
/// ```
/// use retry_overload::{GateMode, RejectReason, Rejected};
/// use std::time::Duration;
///
/// let wait = Duration::from_millis(300);
/// let rejected = Rejected::new(GateMode::RateLimit, RejectReason::RateLimited { wait }, "s3");
/// assert_eq!(rejected.retry_after(), Some(wait));
/// assert_eq!(
///     rejected.to_string(),
///     "admission gate `s3` (rate_limit): the client's rate limit after throttling allows the \
///      next attempt in 300 ms",
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rejected {
    mode: GateMode,
    reason: RejectReason,
    gate: &'static str,
}

/// Why an [`AdmissionGate`] shed an attempt, per mode.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum RejectReason {
    /// Adaptive throttling shed it, with this probability.
    Throttled {
        /// The rejection probability at the time.
        probability: f64,
    },
    /// A fail-fast rate limiter had no token; the next one is due after `wait`.
    RateLimited {
        /// The time until a token is due.
        wait: Duration,
    },
    /// The concurrency limit was reached.
    ConcurrencyLimit {
        /// The limit at the time.
        limit: u32,
    },
}

impl Rejected {
    /// A rejection by the gate named `gate`, in `mode`: for tests, and for code that makes its
    /// own gate decisions.
    pub const fn new(mode: GateMode, reason: RejectReason, gate: &'static str) -> Self {
        Self { mode, reason, gate }
    }

    /// Why it was shed.
    pub const fn reason(&self) -> RejectReason {
        self.reason
    }

    /// The mode of the gate that shed it.
    pub const fn mode(&self) -> GateMode {
        self.mode
    }

    /// The name of the gate that shed it ([`AdmissionGate::name`]).
    pub const fn gate(&self) -> &'static str {
        self.gate
    }

    /// When asking again can succeed: the rate limiter's wait for its next token. `None` for
    /// the other modes, whose next answer depends on other attempts.
    pub const fn retry_after(&self) -> Option<Duration> {
        match self.reason {
            RejectReason::RateLimited { wait } => Some(wait),
            _ => None,
        }
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "admission gate `{}` ({}): ",
            self.gate,
            self.mode.as_str()
        )?;
        match self.reason {
            RejectReason::Throttled { probability } => write!(
                f,
                "the service has been rejecting requests, so this attempt was shed at the client \
                 (probability {:.0} %)",
                probability * 100.0
            ),
            RejectReason::RateLimited { wait } => {
                // Rounded up, so that a rejection never says "0 ms".
                let ms = wait.as_nanos().div_ceil(1_000_000);
                write!(
                    f,
                    "the client's rate limit after throttling allows the next attempt in {ms} ms"
                )
            }
            RejectReason::ConcurrencyLimit { limit } => write!(
                f,
                "{limit} attempts are already in flight, the current concurrency limit"
            ),
        }
    }
}

impl std::error::Error for Rejected {}

//! A circuit breaker: stop calling a service that keeps failing, and test it with one call
//! before letting the traffic back.

use crate::bounds::{clamp_or, clamp_u32};
use crate::sync::{Mutex, MutexGuard};
use std::fmt;
use std::time::{Duration, Instant};

/// The most recent calls the failure-rate window can hold: one bit each in a `u128`.
const MAX_WINDOW: u32 = 128;

/// A circuit breaker shared by every call that names it.
///
/// - **Closed** (the start): calls go through and their outcomes are counted. After
///   [`consecutive_failures`](CircuitBreaker::consecutive_failures) failures in a row (default
///   5), or, if [`failure_rate`](CircuitBreaker::failure_rate) is set, when that share of the last
///   [`window`](CircuitBreaker::window) calls failed, the circuit opens.
/// - **Open**: for [`open_for`](CircuitBreaker::open_for) (default 30 s),
///   [`admit`](CircuitBreaker::admit) refuses every call with [`CircuitOpen`], so a service that
///   is down is not called at all and callers learn it at once.
/// - **Half-open**: after that time, exactly one call is admitted as a trial; other callers are
///   refused while it is outstanding. Its success closes the circuit (with fresh counts), its
///   failure opens it for another `open_for`.
///
/// Each call asks [`admit`](CircuitBreaker::admit) first and reports its outcome with
/// [`Admission::record`]. Outcomes of calls admitted before the circuit last changed state are
/// ignored: a slow call that fails after the circuit opened does not extend the open time, and
/// only the trial decides whether a half-open circuit closes.
///
/// The breaker never reads the clock: `admit`, `record` and `state` take the time as an
/// argument, so tests can pass any instants they like. Every caller of one breaker should pass
/// times from the same clock. The state sits behind a [`Mutex`] held for a few comparisons, never
/// across a call; `new` and the builders are `const fn`, so a breaker can live in a `static`.
///
/// ```
/// use retry_runtime::{BreakerState, CircuitBreaker};
/// use std::time::{Duration, Instant};
///
/// static CONTRACT_BREAKER: CircuitBreaker = CircuitBreaker::new()
///     .consecutive_failures(2)
///     .open_for(Duration::from_secs(10));
///
/// let t0 = Instant::now();
/// for _ in 0..2 {
///     let call = CONTRACT_BREAKER.admit(t0).expect("closed");
///     call.record(false, t0); // the contract service failed
/// }
/// let refused = CONTRACT_BREAKER.admit(t0).unwrap_err();
/// assert_eq!(refused.remaining(), Some(Duration::from_secs(10)));
///
/// // Ten seconds later one trial goes through; its success closes the circuit.
/// let t10 = t0 + Duration::from_secs(10);
/// let trial = CONTRACT_BREAKER.admit(t10).expect("the trial");
/// assert!(CONTRACT_BREAKER.admit(t10).is_err()); // only one at a time
/// trial.record(true, t10);
/// assert_eq!(CONTRACT_BREAKER.state(t10), BreakerState::Closed);
/// ```
#[derive(Debug)]
pub struct CircuitBreaker {
    pub(crate) config: Config,
    inner: Mutex<Inner>,
    /// The handles of its metrics (feature `metrics`), registered at its first use.
    #[cfg(feature = "metrics")]
    metrics: crate::metrics::BreakerMetrics,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    /// 0: the count does not trip the circuit.
    pub(crate) consecutive_failures: u32,
    /// `None`: the rate does not trip the circuit.
    pub(crate) failure_rate: Option<f64>,
    /// 1..=MAX_WINDOW.
    pub(crate) window: u32,
    /// `None`: the whole window.
    pub(crate) min_calls: Option<u32>,
    pub(crate) open_for: Duration,
    /// The `breaker` label of its metrics.
    pub(crate) name: &'static str,
}

#[derive(Debug)]
struct Inner {
    phase: Phase,
    /// Changes with every change of phase, so that outcomes of calls admitted before it can be
    /// told apart and ignored.
    generation: u64,
    /// Failures in a row while closed.
    consecutive: u32,
    /// The last `len` outcomes while closed, newest in bit 0, a 1 for a failure.
    history: u128,
    len: u32,
    /// The latest time any caller has passed in: where a dropped trial reopens the circuit
    /// from, since `Drop` has no `now` and the breaker never reads the clock.
    latest: Option<Instant>,
}

#[derive(Clone, Copy, Debug)]
enum Phase {
    Closed,
    /// `None`: `open_for` is too long to add to an `Instant`, so open for good.
    Open {
        until: Option<Instant>,
    },
    /// The trial call is outstanding; other calls are refused until it ends.
    HalfOpen,
}

default_is_new!(CircuitBreaker);

loom_const_fn! {
    impl CircuitBreaker {
        /// A closed breaker with the defaults: opens after 5 consecutive failures, no failure-rate
        /// rule (window 20 when one is set), stays open for 30 s.
        ///
        /// ```
        /// use retry_runtime::{BreakerState, CircuitBreaker};
        /// use std::time::Instant;
        ///
        /// static BREAKER: CircuitBreaker = CircuitBreaker::new();
        /// assert_eq!(BREAKER.state(Instant::now()), BreakerState::Closed);
        /// ```
        pub fn new() -> Self {
            Self {
                config: Config {
                    name: "unnamed",
                    consecutive_failures: 5,
                    failure_rate: None,
                    window: 20,
                    min_calls: None,
                    open_for: Duration::from_secs(30),
                },
                inner: Mutex::new(Inner::START),
                #[cfg(feature = "metrics")]
                metrics: crate::metrics::BreakerMetrics::new(),
            }
        }
    }
}

impl CircuitBreaker {
    setters! {
        /// Opens the circuit after this many failures in a row; a success resets the count.
        /// 0 turns this rule off (leaving [`failure_rate`](CircuitBreaker::failure_rate)).
        pub fn consecutive_failures(failures: u32) => self.config.consecutive_failures;

        /// Also opens the circuit when at least this share of the last
        /// [`window`](CircuitBreaker::window) calls failed, once the window holds at least
        /// [`min_calls`](CircuitBreaker::min_calls) calls. Clamped to [0, 1]; NaN is taken as 0.
        /// Only a failure trips the circuit, so 0 means "any failure once there are `min_calls`
        /// calls".
        ///
        /// ```
        /// use retry_runtime::{BreakerState, CircuitBreaker};
        /// use std::time::Instant;
        ///
        /// // Half of the last 10 calls, whether in a row or not.
        /// let breaker = CircuitBreaker::new()
        ///     .consecutive_failures(0)
        ///     .failure_rate(0.5)
        ///     .window(10);
        /// let t0 = Instant::now();
        /// for i in 0..10 {
        ///     breaker.admit(t0).expect("closed").record(i % 2 == 0, t0);
        /// }
        /// assert!(matches!(breaker.state(t0), BreakerState::Open { .. }));
        /// ```
        pub fn failure_rate(rate: f64) => self.config.failure_rate =
            Some(clamp_or(rate, 0.0, 1.0, 0.0));

        /// How many of the most recent calls the failure rate is measured over: default 20,
        /// clamped to [1, 128]. Has no effect without
        /// [`failure_rate`](CircuitBreaker::failure_rate).
        pub fn window(calls: u32) => self.config.window = clamp_u32(calls, 1, MAX_WINDOW);

        /// The fewest calls in the window before the failure rate can open the circuit, so that one
        /// early failure is not a rate of 100 %. Default: the whole window. Values above the
        /// window are taken as the window.
        pub fn min_calls(calls: u32) => self.config.min_calls = Some(calls);

        /// How long the circuit stays open before a trial call is let through: default 30 s.
        pub fn open_for(duration: Duration) => self.config.open_for;

        /// Its name, the `breaker` label of its metrics (feature `metrics`): a name of the code's,
        /// such as the service it protects, never anything a request brings. A breaker without one
        /// is labelled `unnamed`.
        ///
        /// ```
        /// use retry_runtime::CircuitBreaker;
        ///
        /// static BANK: CircuitBreaker = CircuitBreaker::new().name("bank");
        /// assert_eq!(BANK.get_name(), "bank");
        /// assert_eq!(CircuitBreaker::new().get_name(), "unnamed");
        /// ```
        pub fn name(name: &'static str) => self.config.name;
    }

    /// Its name ([`name`](CircuitBreaker::name)), `unnamed` if none was given.
    pub const fn get_name(&self) -> &'static str {
        self.config.name
    }

    /// Asks to make a call at `now`.
    ///
    /// `Ok` while closed, and for the one trial call when the open time is over; report the
    /// call's outcome with [`Admission::record`]. `Err(CircuitOpen)` while open, and in
    /// half-open while the trial is outstanding: do not call the service.
    pub fn admit(&self, now: Instant) -> Result<Admission<'_>, CircuitOpen> {
        let mut inner = self.lock();
        inner.observe(now);
        #[cfg(feature = "metrics")]
        self.metrics
            .admitted(self.config.name, gauge_of(inner.phase));
        let trial = match inner.phase {
            Phase::Closed => false,
            Phase::Open { until: Some(until) } if now >= until => {
                self.change(&mut inner, Phase::HalfOpen);
                true
            }
            Phase::Open { until } => {
                return Err(CircuitOpen {
                    remaining: Some(remaining(until, now)),
                });
            }
            Phase::HalfOpen => return Err(CircuitOpen { remaining: None }),
        };
        Ok(Admission {
            breaker: self,
            generation: inner.generation,
            trial,
            recorded: false,
        })
    }

    /// The state at `now`, for metrics and tests. An open circuit whose time is over is
    /// reported as [`HalfOpen`](BreakerState::HalfOpen): the next call would be the trial.
    pub fn state(&self, now: Instant) -> BreakerState {
        let mut inner = self.lock();
        inner.observe(now);
        match inner.phase {
            Phase::Closed => BreakerState::Closed,
            Phase::Open { until: Some(until) } if now >= until => BreakerState::HalfOpen,
            Phase::Open { until } => BreakerState::Open {
                remaining: remaining(until, now),
            },
            Phase::HalfOpen => BreakerState::HalfOpen,
        }
    }

    /// Counts an outcome; `true` when the circuit is open at `now` afterwards (by this outcome
    /// or by others'), so that a retrying caller can stop at once.
    fn outcome(&self, generation: u64, trial: bool, success: bool, now: Option<Instant>) -> bool {
        let mut inner = self.lock();
        if let Some(now) = now {
            inner.observe(now);
        }
        if inner.generation == generation {
            let reopen_from = now.or(inner.latest);
            match inner.phase {
                Phase::HalfOpen if trial && success => self.change(&mut inner, Phase::Closed),
                Phase::HalfOpen if trial => self.open(&mut inner, reopen_from),
                Phase::Closed if !trial => {
                    let trips = self.closed_outcome(&mut inner, success);
                    if trips {
                        self.open(&mut inner, reopen_from);
                    }
                }
                _ => {}
            }
        }
        match (inner.phase, now) {
            (Phase::Open { until }, Some(now)) => until.is_none_or(|until| now < until),
            _ => false,
        }
    }

    /// Counts an outcome while closed; `true` when the circuit should open.
    fn closed_outcome(&self, inner: &mut Inner, success: bool) -> bool {
        let config = self.config;
        let window = config.window;
        inner.consecutive = if success {
            0
        } else {
            inner.consecutive.saturating_add(1)
        };
        inner.history = (inner.history << 1) | u128::from(!success);
        inner.len = (inner.len + 1).min(window);
        if config.consecutive_failures > 0 && inner.consecutive >= config.consecutive_failures {
            return true;
        }
        let Some(rate) = config.failure_rate else {
            return false;
        };
        let min_calls = config.min_calls.unwrap_or(window).min(window);
        if success || inner.len < min_calls {
            return false;
        }
        let mask = u128::MAX >> (MAX_WINDOW - inner.len);
        let failures = (inner.history & mask).count_ones();
        f64::from(failures) >= rate * f64::from(inner.len)
    }

    fn open(&self, inner: &mut Inner, from: Option<Instant>) {
        let until = from.and_then(|from| from.checked_add(self.config.open_for));
        self.change(inner, Phase::Open { until });
    }

    /// A change of phase, with its metrics (under the lock, so that the state gauge ends at the
    /// last change).
    fn change(&self, inner: &mut Inner, phase: Phase) {
        inner.change(phase);
        #[cfg(feature = "metrics")]
        self.metrics.changed(self.config.name, gauge_of(phase));
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        crate::sync::lock(&self.inner)
    }
}

impl Inner {
    const START: Inner = Inner {
        phase: Phase::Closed,
        generation: 0,
        consecutive: 0,
        history: 0,
        len: 0,
        latest: None,
    };

    fn observe(&mut self, now: Instant) {
        if self.latest.is_none_or(|latest| now > latest) {
            self.latest = Some(now);
        }
    }

    fn change(&mut self, phase: Phase) {
        self.phase = phase;
        self.generation = self.generation.wrapping_add(1);
        self.consecutive = 0;
        self.history = 0;
        self.len = 0;
    }
}

/// A phase as the state gauge shows it.
#[cfg(feature = "metrics")]
fn gauge_of(phase: Phase) -> crate::metrics::BreakerGauge {
    use crate::metrics::BreakerGauge;
    match phase {
        Phase::Closed => BreakerGauge::Closed,
        Phase::Open { .. } => BreakerGauge::Open,
        Phase::HalfOpen => BreakerGauge::HalfOpen,
    }
}

fn remaining(until: Option<Instant>, now: Instant) -> Duration {
    until.map_or(Duration::MAX, |until| until.saturating_duration_since(now))
}

/// Permission to make one call, from [`CircuitBreaker::admit`]: report the call's outcome with
/// [`record`](Admission::record).
///
/// Dropping it without recording (a cancelled call, such as a future dropped by a timeout)
/// counts as nothing while the circuit is closed: a cancellation says nothing certain about the
/// service. But a dropped *trial* counts as a failed trial and opens the circuit again for
/// `open_for`, measured from the latest time any caller passed to the breaker (`Drop` has no
/// `now`, and the breaker never reads the clock). That way the trial slot is never left taken,
/// and a service so slow that its callers give up is not taken as recovered.
///
/// ```
/// use retry_runtime::{BreakerState, CircuitBreaker};
/// use std::time::{Duration, Instant};
///
/// let breaker = CircuitBreaker::new().consecutive_failures(1);
/// let t0 = Instant::now();
/// breaker.admit(t0).expect("closed").record(false, t0);
///
/// let t30 = t0 + Duration::from_secs(30);
/// let trial = breaker.admit(t30).expect("the trial");
/// drop(trial); // cancelled
/// assert_eq!(
///     breaker.state(t30),
///     BreakerState::Open { remaining: Duration::from_secs(30) }
/// );
/// ```
#[derive(Debug)]
#[must_use = "report the call's outcome with `Admission::record`; a dropped trial reopens the circuit"]
pub struct Admission<'a> {
    breaker: &'a CircuitBreaker,
    generation: u64,
    trial: bool,
    recorded: bool,
}

impl Admission<'_> {
    /// Reports the outcome of the admitted call, which ended at `now`: `success` is whether
    /// the service answered properly. Count as failures only what says the service is unwell
    /// (the errors worth retrying), not a valid "no" or a caller's mistake.
    pub fn record(self, success: bool, now: Instant) {
        self.record_and_check(success, now);
    }

    /// [`record`](Admission::record), and whether the circuit is open at `now` afterwards: a
    /// retrying loop then gives up at once instead of pausing for a call that would be refused.
    pub(crate) fn record_and_check(mut self, success: bool, now: Instant) -> bool {
        self.recorded = true;
        self.breaker
            .outcome(self.generation, self.trial, success, Some(now))
    }

    /// Whether this is the half-open circuit's single trial call.
    pub fn is_trial(&self) -> bool {
        self.trial
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if !self.recorded && self.trial {
            self.breaker.outcome(self.generation, true, false, None);
        }
    }
}

/// The state of a [`CircuitBreaker`], from [`CircuitBreaker::state`].
///
/// Later versions may add states (`#[non_exhaustive]`), so a `match` outside this crate needs a
/// `_` arm:
///
/// ```
/// use retry_runtime::{BreakerState, CircuitBreaker};
/// use std::time::Instant;
///
/// let breaker = CircuitBreaker::new();
/// // The values of the `retry_breaker_state` gauge (feature `metrics`).
/// let gauge = match breaker.state(Instant::now()) {
///     BreakerState::Closed => 0,
///     BreakerState::Open { .. } => 1,
///     BreakerState::HalfOpen => 2,
///     _ => 3,
/// };
/// assert_eq!(gauge, 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerState {
    /// Calls go through; their outcomes are counted.
    Closed,
    /// Calls are refused for `remaining` longer ([`Duration::MAX`] if `open_for` was too long to
    /// add to an `Instant`).
    Open {
        /// The time until a trial call is let through.
        remaining: Duration,
    },
    /// One trial call decides: it is either outstanding (other calls are refused) or the next
    /// call will be it.
    HalfOpen,
}

/// The error of a call the [`CircuitBreaker`] refused: the service was not called.
///
/// With `#[retry(breaker = ...)]`, the function's error type needs a `From<CircuitOpen>`.
///
/// ```
/// use retry_runtime::CircuitOpen;
/// use std::time::Duration;
///
/// let open = CircuitOpen::new(Some(Duration::from_millis(1500)));
/// assert_eq!(open.remaining(), Some(Duration::from_millis(1500)));
/// assert_eq!(open.to_string(), "circuit open: calls are refused for another 1500 ms");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CircuitOpen {
    remaining: Option<Duration>,
}

impl CircuitOpen {
    /// A refusal; `remaining` is the time until a trial call is let through, `None` while a
    /// trial is outstanding (it ends when the trial does). For tests and for code that makes
    /// its own breaker decisions.
    pub const fn new(remaining: Option<Duration>) -> Self {
        Self { remaining }
    }

    /// How long calls are still refused, or `None` in half-open while the trial call is
    /// outstanding, when it depends on the trial.
    pub const fn remaining(&self) -> Option<Duration> {
        self.remaining
    }
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.remaining {
            Some(remaining) => {
                // Rounded up, so that a refusal never says "0 ms".
                let ms = remaining.as_nanos().div_ceil(1_000_000);
                write!(f, "circuit open: calls are refused for another {ms} ms")
            }
            None => f.write_str(
                "circuit open: a trial call is testing the service; other calls are refused until it ends",
            ),
        }
    }
}

loop_error! {
    /// The error for a call the open circuit refused.
    FromCircuitOpen::from_circuit_open(CircuitOpen),
    message = "`{Self}` cannot say that the circuit is open, which `#[retry(breaker = ...)]` needs",
    label = "`{Self}` does not implement `From<retry_runtime::CircuitOpen>`",
    note = "add `impl From<retry_runtime::CircuitOpen> for {Self}` (a variant such as `Unavailable(CircuitOpen)`), or remove `breaker`",
}

// Under loom, `new` is not `const`, so these (with their `static` breakers) are not built.
#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::thread;

    const S: Duration = Duration::from_secs(1);

    static BREAKER: CircuitBreaker = CircuitBreaker::new()
        .consecutive_failures(3)
        .failure_rate(0.5)
        .window(10)
        .min_calls(4)
        .open_for(Duration::from_secs(5));

    fn fail(breaker: &CircuitBreaker, now: Instant) {
        breaker.admit(now).expect("admitted").record(false, now);
    }

    fn succeed(breaker: &CircuitBreaker, now: Instant) {
        breaker.admit(now).expect("admitted").record(true, now);
    }

    /// A breaker that opens on its failure rate alone.
    fn rate_only(rate: f64, window: u32) -> CircuitBreaker {
        CircuitBreaker::new()
            .consecutive_failures(0)
            .failure_rate(rate)
            .window(window)
    }

    /// `calls` calls that fail and succeed in turn, the first one failing if `fail_first`.
    fn alternate(breaker: &CircuitBreaker, calls: u32, fail_first: bool, now: Instant) {
        for i in 0..calls {
            let fails = (i % 2 == 0) == fail_first;
            breaker.admit(now).expect("closed").record(!fails, now);
        }
    }

    fn is_open(breaker: &CircuitBreaker, now: Instant) -> bool {
        matches!(breaker.state(now), BreakerState::Open { .. })
    }

    /// A breaker opened at `t0` for 30 s.
    fn opened() -> (CircuitBreaker, Instant) {
        opened_for(Duration::from_secs(30))
    }

    /// A breaker opened at `t0` for `open_for`.
    fn opened_for(open_for: Duration) -> (CircuitBreaker, Instant) {
        let breaker = CircuitBreaker::new()
            .consecutive_failures(1)
            .open_for(open_for);
        let t0 = Instant::now();
        fail(&breaker, t0);
        (breaker, t0)
    }

    #[test]
    fn a_static_breaker_starts_closed() {
        assert_eq!(BREAKER.state(Instant::now()), BreakerState::Closed);
    }

    #[test]
    fn consecutive_failures_open_the_circuit() {
        let breaker = CircuitBreaker::new();
        let t0 = Instant::now();
        for _ in 0..4 {
            fail(&breaker, t0);
        }
        assert_eq!(breaker.state(t0), BreakerState::Closed);
        fail(&breaker, t0);
        assert_eq!(
            breaker.state(t0 + S),
            BreakerState::Open { remaining: 29 * S }
        );
    }

    #[test]
    fn a_success_resets_the_consecutive_count() {
        let breaker = CircuitBreaker::new();
        let t0 = Instant::now();
        for _ in 0..3 {
            for _ in 0..4 {
                fail(&breaker, t0);
            }
            succeed(&breaker, t0);
        }
        assert_eq!(breaker.state(t0), BreakerState::Closed);
    }

    #[test]
    fn a_failure_rate_opens_the_circuit() {
        // Failures never come in a row, but half of the window fails.
        let breaker = rate_only(0.5, 6).consecutive_failures(2);
        let t0 = Instant::now();
        alternate(&breaker, 5, true, t0);
        assert_eq!(breaker.state(t0), BreakerState::Closed); // 3 of 5, but the window is 6
        succeed(&breaker, t0); // 3 of 6, but a success never trips
        assert_eq!(breaker.state(t0), BreakerState::Closed);
        fail(&breaker, t0); // oldest failure leaves the window: 3 of 6 with this one
        assert!(is_open(&breaker, t0));
    }

    #[test]
    fn the_rate_waits_for_min_calls_and_forgets_old_calls() {
        let breaker = rate_only(0.75, 4).min_calls(2);
        let t0 = Instant::now();
        fail(&breaker, t0); // 1 of 1, below min_calls
        assert_eq!(breaker.state(t0), BreakerState::Closed);
        for _ in 0..4 {
            succeed(&breaker, t0); // the failure leaves the window
        }
        fail(&breaker, t0);
        fail(&breaker, t0); // 2 of 4
        assert_eq!(breaker.state(t0), BreakerState::Closed);
        fail(&breaker, t0); // 3 of 4
        assert!(is_open(&breaker, t0));
    }

    #[test]
    fn a_window_of_128_calls_counts_them_all() {
        let breaker = rate_only(0.5, 500);
        let t0 = Instant::now();
        alternate(&breaker, 127, false, t0);
        assert_eq!(breaker.state(t0), BreakerState::Closed); // 63 of 127: the window is not full
        fail(&breaker, t0); // 64 of 128
        assert!(is_open(&breaker, t0));
    }

    #[test]
    fn without_a_rate_only_the_count_opens() {
        let breaker = CircuitBreaker::new().consecutive_failures(3);
        let t0 = Instant::now();
        for _ in 0..50 {
            fail(&breaker, t0);
            fail(&breaker, t0);
            succeed(&breaker, t0);
        }
        assert_eq!(breaker.state(t0), BreakerState::Closed);
    }

    #[test]
    fn an_open_circuit_refuses_calls_until_its_time_is_over() {
        let (breaker, t0) = opened();
        let refused = breaker.admit(t0 + 10 * S).unwrap_err();
        assert_eq!(refused.remaining(), Some(20 * S));
        let refused = breaker.admit(t0 + 30 * S - Duration::from_nanos(1));
        assert_eq!(
            refused.unwrap_err().remaining(),
            Some(Duration::from_nanos(1))
        );
        assert_eq!(breaker.state(t0 + 30 * S), BreakerState::HalfOpen);
    }

    #[test]
    fn after_the_open_time_one_trial_goes_through() {
        let (breaker, t0) = opened();
        let t31 = t0 + 31 * S;
        let trial = breaker.admit(t31).expect("the trial");
        assert!(trial.is_trial());
        let refused = breaker.admit(t31).unwrap_err();
        assert_eq!(refused.remaining(), None);
        assert_eq!(breaker.state(t31), BreakerState::HalfOpen);
        trial.record(true, t31);
    }

    #[test]
    fn exactly_one_of_many_concurrent_callers_is_the_trial() {
        const THREADS: usize = 16;
        let (breaker, t0) = opened();
        let t31 = t0 + 31 * S;
        let start = Barrier::new(THREADS);
        let admitted = thread::scope(|scope| {
            let callers: Vec<_> = (0..THREADS)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        breaker.admit(t31)
                    })
                })
                .collect();
            callers
                .into_iter()
                .map(|caller| caller.join().expect("no panic"))
                .collect::<Vec<_>>()
        });
        let (trials, refused): (Vec<_>, Vec<_>) = admitted.into_iter().partition(Result::is_ok);
        assert_eq!(trials.len(), 1);
        assert!(
            refused
                .iter()
                .all(|r| matches!(r, Err(open) if open.remaining().is_none()))
        );
        for trial in trials.into_iter().flatten() {
            assert!(trial.is_trial());
            trial.record(true, t31);
        }
        assert_eq!(breaker.state(t31), BreakerState::Closed);
    }

    #[test]
    fn a_successful_trial_closes_with_fresh_counts() {
        let breaker = CircuitBreaker::new().consecutive_failures(2);
        let t0 = Instant::now();
        fail(&breaker, t0);
        fail(&breaker, t0);
        let t30 = t0 + 30 * S;
        breaker.admit(t30).expect("the trial").record(true, t30);
        assert_eq!(breaker.state(t30), BreakerState::Closed);
        fail(&breaker, t30); // one failure, not three in a row
        assert_eq!(breaker.state(t30), BreakerState::Closed);
        assert!(!breaker.admit(t30).expect("closed").is_trial());
    }

    #[test]
    fn a_failed_trial_opens_the_circuit_again() {
        let (breaker, t0) = opened();
        let t31 = t0 + 31 * S;
        let trial = breaker.admit(t31).expect("the trial");
        trial.record(false, t31 + S);
        assert_eq!(
            breaker.state(t31 + S),
            BreakerState::Open { remaining: 30 * S }
        );
        assert!(breaker.admit(t31 + 30 * S).is_err());
        assert!(breaker.admit(t31 + 31 * S).is_ok_and(|a| a.is_trial()));
    }

    #[test]
    fn a_dropped_trial_reopens_from_the_latest_time_seen() {
        let (breaker, t0) = opened();
        let t31 = t0 + 31 * S;
        let trial = breaker.admit(t31).expect("the trial");
        assert!(breaker.admit(t31 + 2 * S).is_err()); // another caller, later
        drop(trial);
        assert_eq!(
            breaker.state(t31 + 2 * S),
            BreakerState::Open { remaining: 30 * S }
        );
        // And the slot is free again once that time is over.
        assert!(breaker.admit(t31 + 32 * S).is_ok_and(|a| a.is_trial()));
    }

    #[test]
    fn a_dropped_call_while_closed_counts_as_nothing() {
        let breaker = CircuitBreaker::new().consecutive_failures(2);
        let t0 = Instant::now();
        fail(&breaker, t0);
        for _ in 0..10 {
            drop(breaker.admit(t0).expect("closed"));
        }
        assert_eq!(breaker.state(t0), BreakerState::Closed);
        succeed(&breaker, t0);
        fail(&breaker, t0);
        assert_eq!(breaker.state(t0), BreakerState::Closed);
    }

    #[test]
    fn late_outcomes_of_calls_admitted_before_the_circuit_opened_are_ignored() {
        let breaker = CircuitBreaker::new().consecutive_failures(1);
        let t0 = Instant::now();
        let slow = breaker.admit(t0).expect("closed");
        let slower = breaker.admit(t0).expect("closed");
        fail(&breaker, t0);
        // Failing later does not extend the open time.
        slow.record(false, t0 + 10 * S);
        assert_eq!(
            breaker.state(t0 + 10 * S),
            BreakerState::Open { remaining: 20 * S }
        );
        // Succeeding during half-open does not close the circuit: only the trial decides.
        let trial = breaker.admit(t0 + 30 * S).expect("the trial");
        slower.record(true, t0 + 30 * S);
        assert_eq!(breaker.state(t0 + 30 * S), BreakerState::HalfOpen);
        trial.record(true, t0 + 30 * S);
        assert_eq!(breaker.state(t0 + 30 * S), BreakerState::Closed);
    }

    #[test]
    fn an_endless_open_time_never_half_opens() {
        let (breaker, t0) = opened_for(Duration::MAX);
        let later = t0 + Duration::from_secs(1_000_000);
        assert_eq!(
            breaker.state(later),
            BreakerState::Open {
                remaining: Duration::MAX
            }
        );
        assert!(breaker.admit(later).is_err());
    }

    #[test]
    fn a_zero_open_time_half_opens_at_once() {
        let (breaker, t0) = opened_for(Duration::ZERO);
        assert_eq!(breaker.state(t0), BreakerState::HalfOpen);
        assert!(breaker.admit(t0).is_ok_and(|a| a.is_trial()));
    }

    #[test]
    fn the_refusal_says_how_long() {
        let open = CircuitOpen::new(Some(Duration::from_micros(1)));
        assert_eq!(
            open.to_string(),
            "circuit open: calls are refused for another 1 ms"
        );
        let trial = CircuitOpen::new(None);
        assert!(trial.to_string().starts_with("circuit open: a trial call"));
        let _: &dyn std::error::Error = &trial;
    }
}

/// Model checks with loom: every interleaving of two or three threads (see `crate::sync`).
/// `RUSTFLAGS="--cfg loom" cargo test -p retry-runtime --release --lib loom`.
#[cfg(all(test, loom))]
mod loom {
    use super::*;
    use ::loom::model;
    use ::loom::sync::Arc;
    use ::loom::thread;

    const OPEN_FOR: Duration = Duration::from_secs(30);

    /// How the trial call ends.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum End {
        Success,
        Failure,
        Dropped,
    }

    const ENDS: [End; 3] = [End::Success, End::Failure, End::Dropped];

    /// What one caller got.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Seen {
        /// The trial; it ended as the model says.
        Trial,
        /// An ordinary call, which succeeded.
        Admitted,
        /// Refused while the trial was outstanding.
        RefusedDuringTrial,
        /// Refused by an open circuit, with the time left.
        RefusedOpen(Duration),
    }

    /// One caller at `now`: if it is the trial, it ends as `end` says; an ordinary call succeeds.
    fn call(breaker: &CircuitBreaker, now: Instant, end: End) -> Seen {
        match breaker.admit(now) {
            Ok(trial) if trial.is_trial() => {
                match end {
                    End::Success => trial.record(true, now),
                    End::Failure => trial.record(false, now),
                    End::Dropped => drop(trial),
                }
                Seen::Trial
            }
            Ok(call) => {
                call.record(true, now);
                Seen::Admitted
            }
            Err(open) => match open.remaining() {
                None => Seen::RefusedDuringTrial,
                Some(left) => Seen::RefusedOpen(left),
            },
        }
    }

    /// A breaker that opened at `t0` after one failure; its open time is over at the instant
    /// returned second.
    fn opened() -> (Arc<CircuitBreaker>, Instant) {
        let breaker = Arc::new(
            CircuitBreaker::new()
                .consecutive_failures(1)
                .open_for(OPEN_FOR),
        );
        let t0 = Instant::now();
        breaker.admit(t0).expect("closed").record(false, t0);
        (breaker, t0 + OPEN_FOR)
    }

    #[test]
    fn loom_exactly_one_of_three_callers_is_the_trial_however_it_ends() {
        for end in ENDS {
            model(move || {
                let (breaker, half_open) = opened();
                let others: Vec<_> = (0..2)
                    .map(|_| {
                        let breaker = Arc::clone(&breaker);
                        thread::spawn(move || call(&breaker, half_open, end))
                    })
                    .collect();
                let mut seen = vec![call(&breaker, half_open, end)];
                seen.extend(others.into_iter().map(|t| t.join().expect("no panic")));

                let count = |what: Seen| seen.iter().filter(|&&s| s == what).count();
                assert_eq!(count(Seen::Trial), 1, "{end:?}: {seen:?}");
                if end == End::Success {
                    // After the trial: closed, and the later callers go through.
                    assert!(
                        seen.iter().all(|s| !matches!(s, Seen::RefusedOpen(_))),
                        "{seen:?}"
                    );
                    assert_eq!(breaker.state(half_open), BreakerState::Closed);
                } else {
                    // After the trial: open for another `open_for`, from the trial's time.
                    assert_eq!(count(Seen::Admitted), 0, "{end:?}: {seen:?}");
                    assert!(
                        seen.iter().all(|s| match s {
                            Seen::RefusedOpen(left) => *left == OPEN_FOR,
                            _ => true,
                        }),
                        "{end:?}: {seen:?}"
                    );
                    assert_eq!(
                        breaker.state(half_open),
                        BreakerState::Open {
                            remaining: OPEN_FOR
                        }
                    );
                }
            });
        }
    }

    #[test]
    fn loom_a_late_outcome_from_before_the_opening_never_decides_the_trial() {
        for end in ENDS {
            for late_success in [true, false] {
                model(move || {
                    let breaker = Arc::new(
                        CircuitBreaker::new()
                            .consecutive_failures(1)
                            .open_for(OPEN_FOR),
                    );
                    let t0 = Instant::now();
                    let half_open = t0 + OPEN_FOR;
                    let slow = breaker.admit(t0).expect("closed");
                    breaker.admit(t0).expect("closed").record(false, t0); // opens
                    let trial = {
                        let breaker = Arc::clone(&breaker);
                        thread::spawn(move || call(&breaker, half_open, end))
                    };
                    slow.record(late_success, half_open); // races with the trial
                    assert_eq!(trial.join().expect("no panic"), Seen::Trial);
                    let expected = match end {
                        End::Success => BreakerState::Closed,
                        End::Failure | End::Dropped => BreakerState::Open {
                            remaining: OPEN_FOR,
                        },
                    };
                    assert_eq!(breaker.state(half_open), expected, "{end:?}");
                });
            }
        }
    }

    #[test]
    fn loom_concurrent_failures_while_closed_are_all_counted() {
        model(|| {
            let breaker = Arc::new(
                CircuitBreaker::new()
                    .consecutive_failures(3)
                    .open_for(OPEN_FOR),
            );
            let t0 = Instant::now();
            let failing: Vec<_> = (0..2)
                .map(|_| {
                    let breaker = Arc::clone(&breaker);
                    thread::spawn(move || {
                        breaker.admit(t0).expect("closed").record(false, t0);
                    })
                })
                .collect();
            breaker.admit(t0).expect("closed").record(false, t0);
            for thread in failing {
                thread.join().expect("no panic");
            }
            // Three failures in a row, whatever their order: open, once, from t0.
            assert_eq!(
                breaker.state(t0),
                BreakerState::Open {
                    remaining: OPEN_FOR
                }
            );
        });
    }
}

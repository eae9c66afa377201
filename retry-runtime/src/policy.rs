//! The retry policy: how many retries, how long each pause is, and how it is randomised.

use crate::bounds::clamp_or;
use retry_grammar as grammar;
use std::time::Duration;

/// The longest pause when neither `max_delay` nor a longer `base` says otherwise.
const DEFAULT_MAX_DELAY: Duration = Duration::from_nanos(grammar::DEFAULT_MAX_DELAY);

/// How the nominal pause grows from one retry to the next.
///
/// Pause `n` (the pause before retry `n`, counting from 1):
///
/// | form | pause `n` | `#[retry]` |
/// |---|---|---|
/// | [`Exponential`](Backoff::Exponential) | `base·factor^(n−1)` | `backoff = exponential` |
/// | [`Linear`](Backoff::Linear) | `base·n` | `backoff = linear` |
/// | [`Constant`](Backoff::Constant) | `base` | `backoff = constant` |
///
/// ```
/// use retry_runtime::{Backoff, Jitter, Policy};
/// use std::time::Duration;
///
/// const LINEAR: Policy = Policy::new()
///     .base(Duration::from_millis(100))
///     .backoff(Backoff::Linear)
///     .jitter(Jitter::None);
/// assert_eq!(LINEAR.nominal_delay(3), Duration::from_millis(300));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backoff {
    /// `base·factor^(n−1)`: 1 s, 2 s, 4 s, … with the defaults.
    Exponential,
    /// `base·n`: 1 s, 2 s, 3 s, … with `base = "1s"`.
    Linear,
    /// `base` every time.
    Constant,
}

/// How each pause is randomised, so that callers that failed together do not retry together.
///
/// `d` is the nominal pause of the [`Backoff`] form, already capped at `max_delay`; `U[a, b)` is a
/// uniform random draw. Whatever the form but [`Spread`](Jitter::Spread), the result is capped at
/// `max_delay` again, so no pause is ever longer than `max_delay`; a spread pause is within its
/// fraction of `d` on either side, so it may reach `(1 + f)·max_delay`.
///
/// | form | pause | `#[retry]` |
/// |---|---|---|
/// | [`Proportional(f)`](Jitter::Proportional) | `d + U[0, f·d)`: with the default, 1 s becomes about 1.2 or 1.4 s | bare `jitter` (the default: `f` = 0.5), or a number `f` in (0, 1] like `jitter = 0.2` |
/// | [`Absolute(j)`](Jitter::Absolute) | `d + U[0, j)` (an absolute addition, as in "0–500 ms") | a duration string `j` like `jitter = "500ms"` |
/// | [`Full`](Jitter::Full) | `U[0, d]` | `jitter = full` |
/// | [`Equal`](Jitter::Equal) | `d/2 + U[0, d/2]` | `jitter = equal` |
/// | [`Decorrelated`](Jitter::Decorrelated) | `min(max_delay, U[base, 3·previous])`, starting from `previous = base` (ignores the backoff form) | `jitter = decorrelated` |
/// | [`None`](Jitter::None) | exactly `d`, for deterministic behaviour | `jitter = none` |
///
/// One more form has no `#[retry]` spelling and is for a [`Policy`] built in code:
/// [`Spread(f)`](Jitter::Spread), `U[(1−f)·d, (1+f)·d]`, within the fraction `f` of `d` on
/// either side and not capped again (gRPC C-core's backoff).
///
/// ```
/// use retry_runtime::{Jitter, Policy};
/// use std::time::Duration;
///
/// const FULL: Policy = Policy::new().base(Duration::from_secs(1)).jitter(Jitter::Full);
/// for _ in 0..100 {
///     assert!(FULL.delay(2, Duration::ZERO) <= Duration::from_secs(2));
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Jitter {
    /// Exactly the nominal pause: deterministic, and the cause of retry storms when many
    /// callers fail together.
    None,
    /// `d + U[0, f·d)`: adds up to the fraction `f` of the pause (`f` in (0, 1]).
    Proportional(f64),
    /// `d + U[0, j)`: adds up to a fixed duration.
    Absolute(Duration),
    /// `U[0, d]`: anywhere between no pause and the nominal pause ("full jitter").
    Full,
    /// `d/2 + U[0, d/2]`: at least half the nominal pause ("equal jitter").
    Equal,
    /// `min(max_delay, U[base, 3·previous])`: each pause drawn from the previous one
    /// ("decorrelated jitter").
    Decorrelated,
    /// `U[(1−f)·d, (1+f)·d]`: within the fraction `f` (in [0, 1]) of the nominal pause on
    /// either side, after the cap. The one form whose pause is not cut at `max_delay` again:
    /// `max_delay` caps the nominal pause it spreads, so a pause reaches up to
    /// `(1 + f)·max_delay`. Pauses stay predictable and never near zero, at the price of
    /// callers that failed together coming back within a window of `2f·d`. gRPC C-core's
    /// backoff (`grpcio`, C++: `f` = 0.2 for its retries and its reconnects).
    ///
    /// ```
    /// use retry_runtime::{Jitter, Policy};
    /// use std::time::Duration;
    ///
    /// // C-core's retry backoff with initialBackoff 100 ms, multiplier 2, maxBackoff 1 s.
    /// const C_CORE: Policy = Policy::new()
    ///     .base(Duration::from_millis(100))
    ///     .max_delay(Duration::from_secs(1))
    ///     .jitter(Jitter::Spread(0.2));
    /// let ms = Duration::from_millis;
    /// assert_eq!(C_CORE.delay_drawn(1, Duration::ZERO, 0.0), ms(80));
    /// assert_eq!(C_CORE.delay_drawn(2, Duration::ZERO, 0.5), ms(200));
    /// // Past the cap: ±20 % of the capped 1 s, up to 1.2 s.
    /// assert_eq!(C_CORE.delay_drawn(9, Duration::ZERO, 1.0), ms(1200));
    /// for _ in 0..100 {
    ///     let pause = C_CORE.delay(3, Duration::ZERO);
    ///     assert!(pause >= ms(320) && pause <= ms(480));
    /// }
    /// ```
    Spread(f64),
}

impl Backoff {
    /// The grammar's form, which the attribute and policy strings read.
    const fn from_grammar(form: grammar::Backoff) -> Backoff {
        match form {
            grammar::Backoff::Exponential => Backoff::Exponential,
            grammar::Backoff::Linear => Backoff::Linear,
            grammar::Backoff::Constant => Backoff::Constant,
        }
    }
}

impl Jitter {
    /// The grammar's form, which the attribute and policy strings read.
    const fn from_grammar(form: grammar::Jitter) -> Jitter {
        match form {
            grammar::Jitter::None => Jitter::None,
            grammar::Jitter::Proportional(f) => Jitter::Proportional(f),
            grammar::Jitter::Absolute(nanos) => Jitter::Absolute(Duration::from_nanos(nanos)),
            grammar::Jitter::Full => Jitter::Full,
            grammar::Jitter::Equal => Jitter::Equal,
            grammar::Jitter::Decorrelated => Jitter::Decorrelated,
        }
    }
}

/// When and how often to retry: the limit, the pauses, and the time budget.
///
/// `#[retry(...)]` builds one of these as a `const` from its arguments; the builder methods are
/// `const fn` so your own policies can be constants too. Every value is accepted: the arithmetic
/// saturates instead of overflowing, and out-of-range values are clamped as each method says.
///
/// ```
/// use retry_runtime::{Jitter, Policy};
/// use std::time::Duration;
///
/// const COVERAGE: Policy = Policy::new()
///     .max(3)
///     .base(Duration::from_secs(1))
///     .jitter(Jitter::None);
///
/// let pauses: Vec<_> = (1..=3).map(|n| COVERAGE.nominal_delay(n)).collect();
/// assert_eq!(pauses, [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policy {
    max: u32,
    base: Duration,
    factor: f64,
    backoff: Backoff,
    // Written back as set (or not) by `config`'s `Serialize`.
    pub(crate) max_delay: Option<Duration>,
    pub(crate) deadline: Option<Duration>,
    jitter: Jitter,
    pub(crate) throttle_base: Option<Duration>,
}

default_is_new!(Policy);

impl Policy {
    /// The defaults of `#[retry]`: 3 retries, `base` 1 s, exponential with factor 2, pauses capped
    /// at 30 s, no deadline, and [`Jitter::Proportional(0.5)`](Jitter::Proportional).
    pub const fn new() -> Self {
        Self {
            max: grammar::DEFAULT_MAX,
            base: Duration::from_nanos(grammar::DEFAULT_BASE),
            factor: grammar::DEFAULT_FACTOR,
            backoff: Backoff::from_grammar(grammar::DEFAULT_BACKOFF),
            max_delay: None,
            deadline: None,
            jitter: Jitter::from_grammar(grammar::DEFAULT_JITTER),
            throttle_base: None,
        }
    }

    /// The base after a throttled attempt: [`throttle_base`](Self::throttle_base), or `base`.
    pub const fn get_throttle_base(&self) -> Duration {
        match self.throttle_base {
            Some(base) => base,
            None => self.base,
        }
    }

    /// [`nominal_delay`](Self::nominal_delay) after a throttled attempt.
    pub fn nominal_throttled_delay(&self, retry: u32) -> Duration {
        self.for_throttling().nominal_delay(retry)
    }

    /// The policy whose base is the throttling base: what a throttled attempt pauses by.
    #[inline]
    pub(crate) const fn for_throttling(&self) -> Policy {
        Policy {
            base: self.get_throttle_base(),
            ..*self
        }
    }

    setters! {
        /// Retries after the first call: `max(3)` allows at most 4 calls.
        pub fn max(retries: u32) => self.max;

        /// The pause before the first retry.
        pub fn base(base: Duration) => self.base;

        /// Growth of the pause per retry with [`Backoff::Exponential`]. Values below 1, and NaN,
        /// are taken as 1 (a constant pause): a shrinking pause is never what a caller under load
        /// wants. ([`factor_unclamped`](Self::factor_unclamped) keeps a factor below 1.)
        // `factor >= 1.0` is false for NaN too.
        pub fn factor(factor: f64) => self.factor = if factor >= 1.0 { factor } else { 1.0 };

        /// [`factor`](Self::factor) without its floor at 1: any factor above 0 is kept, so that
        /// a factor below 1 makes each pause shorter than the one before, down to nothing
        /// (`100ms·0.5^(n−1)`: 100, 50, 25 ms, ...). For a configuration written elsewhere
        /// whose rules allow it, such as gRPC's `backoffMultiplier` (A6: any number above 0).
        /// Zero, negative values and NaN are taken as 1.
        ///
        /// ```
        /// use retry_runtime::{Jitter, Policy};
        /// use std::time::Duration;
        ///
        /// const SHRINKING: Policy = Policy::new()
        ///     .base(Duration::from_millis(400))
        ///     .factor_unclamped(0.5)
        ///     .jitter(Jitter::None);
        /// assert_eq!(SHRINKING.nominal_delay(3), Duration::from_millis(100));
        /// assert_eq!(Policy::new().factor_unclamped(-2.0).get_factor(), 1.0);
        /// ```
        // `factor > 0.0` is false for NaN too.
        pub fn factor_unclamped(factor: f64) => self.factor = if factor > 0.0 { factor } else { 1.0 };

        /// How the nominal pause grows; see [`Backoff`].
        pub fn backoff(backoff: Backoff) => self.backoff;

        /// No single pause is ever longer, jitter included. Without it the cap is 30 s, or `base`
        /// if that is longer.
        pub fn max_delay(max_delay: Duration) => self.max_delay = Some(max_delay);

        /// The total time budget from the first call, calls and pauses included. A pause that would
        /// end past it is not taken: the last error is returned at once.
        pub fn deadline(deadline: Duration) => self.deadline = Some(deadline);

        /// The base of the pauses after a throttled attempt
        /// ([`Verdict::Throttled`](crate::Verdict::Throttled),
        /// [`ThrottledAfter`](crate::Verdict::ThrottledAfter)), in place of `base`: a service that
        /// sheds load asks for a longer wait than one that failed once (the AWS SDKs wait 1 s after
        /// a throttle against 50 ms after a transient error). The rest of the arithmetic (factor,
        /// cap, jitter) is the same. `base` unless set.
        ///
        /// ```
        /// use retry_runtime::{Jitter, Policy};
        /// use std::time::Duration;
        ///
        /// const P: Policy = Policy::new()
        ///     .base(Duration::from_millis(50))
        ///     .throttle_base(Duration::from_secs(1))
        ///     .jitter(Jitter::None);
        /// assert_eq!(P.nominal_delay(2), Duration::from_millis(100));
        /// assert_eq!(P.nominal_throttled_delay(2), Duration::from_secs(2));
        /// ```
        pub fn throttle_base(base: Duration) => self.throttle_base = Some(base);
    }

    /// How each pause is randomised; see [`Jitter`]. A [`Jitter::Proportional`] or
    /// [`Jitter::Spread`] fraction is clamped to [0, 1] (NaN becomes 0, no jitter).
    pub const fn jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = match jitter {
            Jitter::Proportional(f) => Jitter::Proportional(clamp_or(f, 0.0, 1.0, 0.0)),
            Jitter::Spread(f) => Jitter::Spread(clamp_or(f, 0.0, 1.0, 0.0)),
            other => other,
        };
        self
    }

    /// Retries after the first call.
    pub const fn get_max(&self) -> u32 {
        self.max
    }

    /// The pause before the first retry, before jitter.
    pub const fn get_base(&self) -> Duration {
        self.base
    }

    /// The growth factor of [`Backoff::Exponential`].
    pub const fn get_factor(&self) -> f64 {
        self.factor
    }

    /// The backoff form.
    pub const fn get_backoff(&self) -> Backoff {
        self.backoff
    }

    /// The jitter form.
    pub const fn get_jitter(&self) -> Jitter {
        self.jitter
    }

    /// The time budget, if any.
    pub const fn get_deadline(&self) -> Option<Duration> {
        self.deadline
    }

    /// The cap on every pause: `max_delay` if set, otherwise 30 s or `base`, whichever is longer.
    pub const fn get_max_delay(&self) -> Duration {
        match self.max_delay {
            Some(cap) => cap,
            // Seconds first, as `Duration`'s order does; not `as_nanos`, a 128-bit product.
            None if self.base.as_secs() > DEFAULT_MAX_DELAY.as_secs()
                || (self.base.as_secs() == DEFAULT_MAX_DELAY.as_secs()
                    && self.base.subsec_nanos() > DEFAULT_MAX_DELAY.subsec_nanos()) =>
            {
                self.base
            }
            None => DEFAULT_MAX_DELAY,
        }
    }

    /// Pause `retry` (counting from 1) of the backoff form, capped at [`get_max_delay`](Self::get_max_delay),
    /// before jitter.
    ///
    /// ```
    /// use retry_runtime::Policy;
    /// use std::time::Duration;
    ///
    /// let p = Policy::new().max(1000).factor(10.0);
    /// assert_eq!(p.nominal_delay(1000), Duration::from_secs(30)); // saturates at the cap
    /// ```
    pub fn nominal_delay(&self, retry: u32) -> Duration {
        let cap = nanos(self.get_max_delay());
        Duration::from_nanos(self.nominal_nanos(retry, cap))
    }

    /// Pause `retry` in nanoseconds, capped at `cap` (the cap in nanoseconds, computed once by
    /// the caller).
    #[inline]
    fn nominal_nanos(&self, retry: u32, cap: u64) -> u64 {
        let base = nanos(self.base);
        let n = retry.max(1);
        let d = match self.backoff {
            Backoff::Constant => base,
            Backoff::Linear => base.saturating_mul(u64::from(n)),
            Backoff::Exponential => exponential(base, self.factor, n - 1, cap),
        };
        d.min(cap)
    }

    /// The pause before retry `retry` (counting from 1), jitter included, capped at
    /// [`get_max_delay`](Self::get_max_delay) (but see [`Jitter::Spread`]). `previous` is the pause taken before the previous retry
    /// (ignored except by [`Jitter::Decorrelated`], which starts from `base` when it is zero).
    ///
    /// `retry` counts from the start of the backoff: a caller whose backoff starts afresh (after
    /// a long healthy attempt, or after a pause the server set, which gRPC's A6 asks to be
    /// followed by `initialBackoff` again) counts from 1 again.
    ///
    /// Randomness comes from a per-thread generator seeded by the operating system.
    pub fn delay(&self, retry: u32, previous: Duration) -> Duration {
        Duration::from_nanos(self.delay_nanos(retry, nanos(previous)))
    }

    /// [`delay`](Self::delay) with the uniform draw `u` in [0, 1] in place of the random one:
    /// `u = 0` gives the form's shortest pause, `u = 1` its longest, and each `u` between a
    /// pause the same fraction of the way. A pure function, for a test, or for a caller with a
    /// random source of its own; NaN is taken as 0, and `u` outside [0, 1] is clamped.
    ///
    /// ```
    /// use retry_runtime::{Jitter, Policy};
    /// use std::time::Duration;
    ///
    /// // Full jitter over 100, 200, 400 ms: U[0, d].
    /// const FULL: Policy = Policy::new().base(Duration::from_millis(100)).jitter(Jitter::Full);
    /// assert_eq!(FULL.delay_drawn(1, Duration::ZERO, 0.5), Duration::from_millis(50));
    /// assert_eq!(FULL.delay_drawn(3, Duration::ZERO, 0.25), Duration::from_millis(100));
    /// assert_eq!(FULL.delay_drawn(3, Duration::ZERO, 1.0), Duration::from_millis(400));
    /// ```
    pub fn delay_drawn(&self, retry: u32, previous: Duration, u: f64) -> Duration {
        let u = clamp_or(u, 0.0, 1.0, 0.0);
        let mut at = |lo: u64, hi: u64| {
            let width = hi.saturating_sub(lo);
            lo.saturating_add((width as f64 * u) as u64).min(hi.max(lo))
        };
        Duration::from_nanos(self.delay_with(retry, nanos(previous), 0, &mut at))
    }

    /// The pause before retry `retry` when the server asked for at least `floor` (HTTP
    /// `Retry-After`, gRPC pushback): never shorter than `floor`, and spread above it by the
    /// jitter, so that callers told the same pause at the same moment do not all come back in
    /// the same instant. Capped at [`get_max_delay`](Self::get_max_delay) like every pause (the
    /// loop gives up instead of taking a pause whose floor is above the cap).
    ///
    /// With `b = max(d, floor)`, `d` the nominal pause:
    ///
    /// | form | pause |
    /// |---|---|
    /// | [`None`](Jitter::None) | `b` |
    /// | [`Proportional(f)`](Jitter::Proportional) | `b + U[0, f·b)` |
    /// | [`Absolute(j)`](Jitter::Absolute) | `b + U[0, j)` |
    /// | [`Full`](Jitter::Full) | `floor + U[0, b]` |
    /// | [`Equal`](Jitter::Equal) | `max(d/2, floor) + U[0, b/2]` |
    /// | [`Decorrelated`](Jitter::Decorrelated) | `U[max(base, floor), 3·max(previous, base, floor)]` |
    /// | [`Spread(f)`](Jitter::Spread) | `U[max((1−f)·b, floor), (1+f)·b]`, not capped again |
    ///
    /// With `floor` zero each form is the one of [`delay`](Self::delay).
    ///
    /// ```
    /// use retry_runtime::Policy;
    /// use std::time::Duration;
    ///
    /// // The default jitter, `d + U[0, d/2)`, above a server's "wait 1 s".
    /// let policy = Policy::new().base(Duration::from_millis(100));
    /// let asked = Duration::from_secs(1);
    /// for _ in 0..100 {
    ///     let pause = policy.delay_at_least(1, Duration::ZERO, asked);
    ///     assert!(pause >= asked && pause < asked * 3 / 2);
    /// }
    /// ```
    pub fn delay_at_least(&self, retry: u32, previous: Duration, floor: Duration) -> Duration {
        Duration::from_nanos(self.delay_nanos_at_least(retry, nanos(previous), nanos(floor)))
    }

    /// [`delay`](Self::delay) in whole nanoseconds, for the loop, which keeps its pauses so:
    /// no `Duration` is made or taken apart on the way. Always inline, so that a constant
    /// policy folds in the decision (`jitter = none` to a few instructions): left to the
    /// inliner, it stayed a call once the decision grew (98 instructions for a sync failure
    /// against 48).
    // RESULTS §3 "one failure sync: #[retry]": 46 -> 98 instructions without it (issue 40).
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn delay_nanos(&self, retry: u32, previous: u64) -> u64 {
        if self.jitter == Jitter::None {
            return self.nominal_nanos(retry, nanos(self.get_max_delay()));
        }
        crate::random::with(|draw| self.delay_with(retry, previous, 0, draw))
    }

    /// [`delay_at_least`](Self::delay_at_least) in whole nanoseconds.
    pub(crate) fn delay_nanos_at_least(&self, retry: u32, previous: u64, floor: u64) -> u64 {
        crate::random::with(|draw| self.delay_with(retry, previous, floor, draw))
    }

    /// The delay arithmetic in nanoseconds, with the random source as a parameter:
    /// `draw(lo, hi)` returns a uniform value in `[lo, hi]`. `floor` is a server's pause (zero
    /// without one); see [`delay_at_least`](Self::delay_at_least).
    pub(crate) fn delay_with(
        &self,
        retry: u32,
        previous: u64,
        floor: u64,
        draw: &mut dyn FnMut(u64, u64) -> u64,
    ) -> u64 {
        let cap = nanos(self.get_max_delay());
        let d = self.nominal_nanos(retry, cap);
        // The nominal pause, raised to the floor: what the jitter spreads.
        let b = d.max(floor);
        let jittered = match self.jitter {
            Jitter::None => b,
            Jitter::Proportional(f) => {
                // U[0, f·b): the largest value drawn is one nanosecond short of f·b.
                let spread = (b as f64 * f) as u64;
                b.saturating_add(below(spread, draw))
            }
            Jitter::Absolute(j) => b.saturating_add(below(nanos(j), draw)),
            Jitter::Full => floor.saturating_add(draw(0, b)),
            Jitter::Equal => {
                // b - b/2 rather than b/2, so that an odd b keeps its last nanosecond.
                let low = (d / 2).max(floor);
                low.saturating_add(draw(0, b - b / 2))
            }
            Jitter::Decorrelated => {
                let low = nanos(self.base).min(cap).max(floor);
                let previous = previous.max(low);
                let high = previous.saturating_mul(3);
                draw(low, high.max(low))
            }
            // After the cap, and not cut by it: C-core's form.
            Jitter::Spread(f) => {
                let spread = (b as f64 * f) as u64;
                let low = (b - spread.min(b)).max(floor);
                return draw(low, b.saturating_add(spread).max(low));
            }
        };
        jittered.min(cap)
    }
}

/// A [`Policy`] string that could not be read; it names the part that is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError {
    part: String,
    message: String,
}

impl PolicyError {
    fn new(part: &str, message: impl Into<String>) -> Self {
        PolicyError {
            part: part.trim().to_owned(),
            message: message.into(),
        }
    }

    /// The part of the string that is wrong, such as `base=1 sec`.
    pub fn part(&self) -> &str {
        &self.part
    }
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid retry policy at `{}`: {}",
            self.part, self.message
        )
    }
}

impl std::error::Error for PolicyError {}

/// Reads a policy in the attribute's syntax, for policies loaded from configuration:
/// `"max=3, base=1s, jitter=full"`.
///
/// The keys are the timing keys of [`#[retry]`](crate::retry) (`max`, `attempts`, `base`,
/// `factor`, `backoff`, `max_delay`, `throttle_base`, `deadline`, `jitter`), read by the same grammar as the
/// attribute's, with its defaults and its rules across keys, and refused with the same
/// messages. Values may be quoted or not (`base=1s` or `base="1s"`), and spaces around `=` and
/// `,` do not matter.
///
/// ```
/// use retry_runtime::{Jitter, Policy};
///
/// let policy: Policy = "max=3, base=1s, jitter=full".parse()?;
/// assert_eq!(policy.get_max(), 3);
/// assert_eq!(policy.get_jitter(), Jitter::Full);
///
/// let error = "max=3, base=1 sec".parse::<Policy>().unwrap_err();
/// assert_eq!(error.part(), "base=1 sec");
/// assert_eq!(
///     error.to_string(),
///     "invalid retry policy at `base=1 sec`: invalid `base`: unknown unit `sec` in `1 sec`; \
///      expected a duration like `\"250ms\"`, `\"1.5s\"` or `\"2m\"`: an unsigned decimal number \
///      followed by `ns`, `us`, `µs`, `ms`, `s`, `m` or `h`; write `base = \"1s\"`",
/// );
/// # Ok::<(), retry_runtime::PolicyError>(())
/// ```
impl std::str::FromStr for Policy {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Self, PolicyError> {
        let mut settings = grammar::Settings::new(grammar::Scope::PolicyString);
        // Each key read, with the part of the text that wrote it.
        let mut parts: Vec<(&grammar::Key, &str)> = Vec::new();
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (name, value) = match part.split_once('=') {
                Some((name, value)) => (name.trim(), Some(value.trim())),
                None => (part.trim(), None),
            };
            let parsed = value.map(grammar::Value::from_text);
            match settings.read(name, parsed.as_ref(), value.unwrap_or("")) {
                Ok(key) => parts.push((key, part)),
                Err(problem) => return Err(PolicyError::new(part, problem.message)),
            }
        }
        if let Some(violation) = settings
            .check(&grammar::Context::default())
            .into_iter()
            .next()
        {
            let part = parts
                .iter()
                .find(|(key, _)| key.is(violation.key))
                .map_or(text, |(_, part)| part);
            return Err(PolicyError::new(part, violation.problem.message));
        }
        Ok(Policy::from_timings(settings.timings()))
    }
}

impl Policy {
    /// The defaults with each timing that was written: what `from_str` and a configuration
    /// (`config`) build.
    pub(crate) fn from_timings(timings: grammar::Timings) -> Policy {
        let nanos = Duration::from_nanos;
        let p = Policy::new();
        let p = timings.max.map_or(p, |max| p.max(max));
        let p = timings.base.map_or(p, |base| p.base(nanos(base)));
        let p = timings.factor.map_or(p, |factor| p.factor(factor));
        let p = timings
            .backoff
            .map_or(p, |form| p.backoff(Backoff::from_grammar(form)));
        let p = timings.max_delay.map_or(p, |cap| p.max_delay(nanos(cap)));
        let p = timings
            .throttle_base
            .map_or(p, |base| p.throttle_base(nanos(base)));
        let p = timings
            .deadline
            .map_or(p, |deadline| p.deadline(nanos(deadline)));
        timings
            .jitter
            .map_or(p, |form| p.jitter(Jitter::from_grammar(form)))
    }
}

/// `U[0, n)` from a `U[lo, hi]` source; zero when the range is empty.
fn below(n: u64, draw: &mut dyn FnMut(u64, u64) -> u64) -> u64 {
    if n == 0 { 0 } else { draw(0, n - 1) }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (about 584 years). In 64 bits
/// with an overflow check, not through `as_nanos`'s 128-bit product.
#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|n| n.checked_add(u64::from(d.subsec_nanos())))
        .unwrap_or(u64::MAX)
}

/// `base·factor^exp`, saturating at `cap`. Whole factors use integer arithmetic, so `1s·2^k` is
/// exact to the nanosecond; other factors go through `f64` and round to the nearest nanosecond.
fn exponential(base: u64, factor: f64, exp: u32, cap: u64) -> u64 {
    if base == 0 || exp == 0 || factor == 1.0 {
        return base;
    }
    // Whole without `f64::fract`, which is a call to libm's `trunc` on baseline x86-64.
    if factor < u64::MAX as f64 && (factor as u64) as f64 == factor {
        let factor = factor as u64;
        let mut d = base;
        for _ in 0..exp {
            d = d.saturating_mul(factor);
            if d >= cap {
                return cap;
            }
        }
        return d;
    }
    let exp = i32::try_from(exp).unwrap_or(i32::MAX);
    let d = base as f64 * factor.powi(exp);
    if d.is_finite() && d < cap as f64 {
        d.round() as u64
    } else {
        cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{RngExt, SeedableRng, rngs::SmallRng};

    /// `delay_with` in `Duration`s, as the properties are written.
    fn with_draw(
        p: &Policy,
        retry: u32,
        previous: Duration,
        draw: &mut dyn FnMut(u64, u64) -> u64,
    ) -> Duration {
        Duration::from_nanos(p.delay_with(retry, nanos(previous), 0, draw))
    }

    const S: Duration = Duration::from_secs(1);

    fn seeded(seed: u64) -> impl FnMut(u64, u64) -> u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        move |lo, hi| rng.random_range(lo..=hi)
    }

    fn no_jitter() -> Policy {
        Policy::new().jitter(Jitter::None)
    }

    #[test]
    fn exponential_doubles_from_base() {
        let p = no_jitter();
        let got: Vec<_> = (1..=5).map(|n| p.nominal_delay(n)).collect();
        assert_eq!(got, [S, 2 * S, 4 * S, 8 * S, 16 * S]);
        assert_eq!(p.nominal_delay(6), 30 * S, "capped at the default 30 s");
    }

    #[test]
    fn fractional_factor_rounds_to_the_nanosecond() {
        let p = no_jitter().base(Duration::from_millis(100)).factor(1.5);
        assert_eq!(p.nominal_delay(3), Duration::from_millis(225));
    }

    #[test]
    fn linear_and_constant() {
        let linear = no_jitter().backoff(Backoff::Linear);
        assert_eq!(linear.nominal_delay(3), 3 * S);
        let constant = no_jitter().backoff(Backoff::Constant);
        assert_eq!(constant.nominal_delay(7), S);
    }

    #[test]
    fn default_cap_is_base_when_base_is_longer() {
        let p = Policy::new().base(Duration::from_secs(60));
        assert_eq!(p.get_max_delay(), Duration::from_secs(60));
        assert_eq!(Policy::new().get_max_delay(), 30 * S);
    }

    #[test]
    fn extreme_inputs_saturate() {
        let p = no_jitter().factor(10.0).max_delay(Duration::MAX);
        assert_eq!(p.nominal_delay(u32::MAX), Duration::from_nanos(u64::MAX));
        let p = no_jitter().factor(1.7).max_delay(Duration::MAX);
        assert_eq!(p.nominal_delay(u32::MAX), Duration::from_nanos(u64::MAX));
        let p = no_jitter().base(Duration::MAX).backoff(Backoff::Linear);
        assert_eq!(p.nominal_delay(u32::MAX), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn builders_clamp_out_of_range_values() {
        assert_eq!(Policy::new().factor(0.5).get_factor(), 1.0);
        assert_eq!(Policy::new().factor(f64::NAN).get_factor(), 1.0);
        let p = Policy::new().jitter(Jitter::Proportional(7.0));
        assert_eq!(p.get_jitter(), Jitter::Proportional(1.0));
        let p = Policy::new().jitter(Jitter::Proportional(f64::NAN));
        assert_eq!(p.get_jitter(), Jitter::Proportional(0.0));
    }

    #[test]
    fn default_jitter_adds_up_to_half_over_many_samples() {
        let p = Policy::new();
        let mut draw = seeded(1);
        let samples: Vec<_> = (0..10_000)
            .map(|_| Duration::from_nanos(p.delay_with(1, 0, 0, &mut draw)))
            .collect();
        assert!(samples.iter().all(|d| *d >= S && *d < S + S / 2));
        // A real spread, not a constant: both ends of the range are reached.
        assert!(samples.iter().any(|d| *d < S + S / 20));
        assert!(samples.iter().any(|d| *d > S + S / 2 - S / 20));
    }

    #[test]
    fn a_floor_is_spread_above_by_the_jitter_over_many_samples() {
        // "Retry-After: 1" against the default policy: not one pause at exactly 1 s, but
        // 1 s + U[0, 0.5 s), both ends reached.
        let p = Policy::new();
        let mut draw = seeded(7);
        let samples: Vec<_> = (0..10_000)
            .map(|_| Duration::from_nanos(p.delay_with(1, 0, nanos(S), &mut draw)))
            .collect();
        assert!(samples.iter().all(|d| *d >= S && *d < S + S / 2));
        assert!(samples.iter().any(|d| *d < S + S / 20));
        assert!(samples.iter().any(|d| *d > S + S / 2 - S / 20));
        // Full jitter: above the floor, over the floor's own width.
        let p = Policy::new().jitter(Jitter::Full);
        let samples: Vec<_> = (0..10_000)
            .map(|_| Duration::from_nanos(p.delay_with(1, 0, nanos(2 * S), &mut draw)))
            .collect();
        assert!(samples.iter().all(|d| *d >= 2 * S && *d <= 4 * S));
        assert!(samples.iter().any(|d| *d < 2 * S + S / 10));
        assert!(samples.iter().any(|d| *d > 4 * S - S / 10));
    }

    #[test]
    fn a_floor_above_the_cap_is_cut_to_the_cap() {
        let p = Policy::new().max_delay(2 * S);
        assert_eq!(p.delay_at_least(1, Duration::ZERO, 5 * S), 2 * S);
    }

    #[test]
    fn spread_is_c_cores_twenty_percent_after_the_cap() {
        // C-core's retry backoff: initialBackoff 100 ms, multiplier 2, maxBackoff 1 s, ±20 %.
        let p = Policy::new()
            .base(Duration::from_millis(100))
            .max_delay(S)
            .jitter(Jitter::Spread(0.2));
        let ms = Duration::from_millis;
        let at = |retry, u| p.delay_drawn(retry, Duration::ZERO, u);
        assert_eq!(
            (at(1, 0.0), at(1, 0.5), at(1, 1.0)),
            (ms(80), ms(100), ms(120))
        );
        assert_eq!((at(3, 0.0), at(3, 1.0)), (ms(320), ms(480)));
        // The cap comes first, the jitter after it: up to 1.2·maxBackoff.
        assert_eq!((at(5, 0.0), at(5, 1.0)), (ms(800), ms(1200)));
        assert_eq!((at(60, 0.0), at(60, 1.0)), (ms(800), ms(1200)));
        // Over many seeded draws: within ±20 % of the capped nominal pause, both ends reached.
        let mut draw = seeded(11);
        for retry in 1..=8 {
            let d = p.nominal_delay(retry);
            let samples: Vec<_> = (0..10_000)
                .map(|_| Duration::from_nanos(p.delay_with(retry, 0, 0, &mut draw)))
                .collect();
            assert!(samples.iter().all(|x| *x >= d * 4 / 5 && *x <= d * 6 / 5));
            assert!(samples.iter().any(|x| *x < d * 4 / 5 + d / 50));
            assert!(samples.iter().any(|x| *x > d * 6 / 5 - d / 50));
        }
        // A fraction outside [0, 1] is clamped; NaN is no jitter.
        assert_eq!(
            Policy::new().jitter(Jitter::Spread(3.0)).get_jitter(),
            Jitter::Spread(1.0)
        );
        let none = Policy::new().jitter(Jitter::Spread(f64::NAN));
        assert_eq!(none.get_jitter(), Jitter::Spread(0.0));
        assert_eq!(none.delay(2, Duration::ZERO), 2 * S);
    }

    #[test]
    fn full_jitter_over_the_capped_nominal_is_a6s_form() {
        // gRPC A6: U[0, min(initialBackoff·multiplier^(n−1), maxBackoff)).
        let p = Policy::new()
            .base(Duration::from_millis(100))
            .max_delay(S)
            .jitter(Jitter::Full);
        let mut draw = seeded(5);
        for retry in 1..=8 {
            let d = p.nominal_delay(retry);
            assert_eq!(d, Duration::from_millis(100 << (retry - 1)).min(S));
            let samples: Vec<_> = (0..10_000)
                .map(|_| Duration::from_nanos(p.delay_with(retry, 0, 0, &mut draw)))
                .collect();
            assert!(samples.iter().all(|x| *x <= d));
            assert!(samples.iter().any(|x| *x < d / 50));
            assert!(samples.iter().any(|x| *x > d - d / 50));
        }
    }

    #[test]
    fn a_factor_below_one_is_kept_only_when_asked() {
        let ms = Duration::from_millis;
        let p = no_jitter().base(ms(400)).factor_unclamped(0.5);
        let got: Vec<_> = (1..=4).map(|n| p.nominal_delay(n)).collect();
        assert_eq!(got, [ms(400), ms(200), ms(100), ms(50)]);
        assert_eq!(p.nominal_delay(u32::MAX), Duration::ZERO);
        assert_eq!(
            no_jitter().base(ms(400)).factor(0.5).nominal_delay(3),
            ms(400)
        );
        for bad in [0.0, -1.0, f64::NAN] {
            assert_eq!(Policy::new().factor_unclamped(bad).get_factor(), 1.0);
        }
        assert_eq!(Policy::new().factor_unclamped(2.5).get_factor(), 2.5);
    }

    #[test]
    fn a_drawn_pause_is_its_fraction_of_the_range() {
        let ms = Duration::from_millis;
        let p = Policy::new().base(ms(100));
        // The default d + U[0, d/2), whose top is excluded: u = 0 is d, u = 1 the last
        // nanosecond below 1.5·d.
        assert_eq!(p.delay_drawn(1, Duration::ZERO, 0.0), ms(100));
        assert_eq!(
            p.delay_drawn(1, Duration::ZERO, 1.0),
            ms(150) - Duration::from_nanos(1)
        );
        assert_eq!(p.delay_drawn(1, Duration::ZERO, f64::NAN), ms(100));
        let full = p.jitter(Jitter::Full);
        assert_eq!(full.delay_drawn(2, Duration::ZERO, 7.0), ms(200));
        assert_eq!(full.delay_drawn(2, Duration::ZERO, -1.0), Duration::ZERO);
    }

    #[test]
    fn thread_rng_jitter_stays_in_bounds() {
        let p = Policy::new().jitter(Jitter::Full);
        for _ in 0..1_000 {
            assert!(p.delay(3, Duration::ZERO) <= 4 * S);
        }
    }

    fn any_jitter() -> impl Strategy<Value = Jitter> {
        prop_oneof![
            Just(Jitter::None),
            (0.0001f64..=1.0).prop_map(Jitter::Proportional),
            (0u64..10_000_000_000).prop_map(|n| Jitter::Absolute(Duration::from_nanos(n))),
            Just(Jitter::Full),
            Just(Jitter::Equal),
            Just(Jitter::Decorrelated),
        ]
    }

    fn any_backoff() -> impl Strategy<Value = Backoff> {
        prop_oneof![
            Just(Backoff::Exponential),
            Just(Backoff::Linear),
            Just(Backoff::Constant)
        ]
    }

    proptest! {
        #[test]
        fn no_pause_exceeds_the_cap(
            base in 0u64..u64::MAX,
            cap in 0u64..u64::MAX,
            factor in 1.0f64..1e6,
            retry in 0u32..=u32::MAX,
            previous in 0u64..u64::MAX,
            jitter in any_jitter(),
            backoff in any_backoff(),
            seed: u64,
        ) {
            let p = Policy::new()
                .base(Duration::from_nanos(base))
                .max_delay(Duration::from_nanos(cap))
                .factor(factor)
                .backoff(backoff)
                .jitter(jitter);
            let d = Duration::from_nanos(p.delay_with(retry, previous, 0, &mut seeded(seed)));
            prop_assert!(d <= Duration::from_nanos(cap));
        }

        #[test]
        fn each_form_stays_within_its_formula(
            base_ms in 1u64..5_000,
            retry in 1u32..12,
            previous_ms in 0u64..60_000,
            seed: u64,
        ) {
            let base = Duration::from_millis(base_ms);
            let previous = Duration::from_millis(previous_ms);
            let p = Policy::new().base(base).max_delay(Duration::from_secs(3600));
            let d = p.jitter(Jitter::None).nominal_delay(retry);
            let mut draw = seeded(seed);

            let got = with_draw(&p.jitter(Jitter::None), retry, previous, &mut draw);
            prop_assert_eq!(got, d);

            let got = with_draw(&p.jitter(Jitter::Proportional(0.3)), retry, previous, &mut draw);
            prop_assert!(got >= d && got.as_nanos() < d.as_nanos() + (d.as_nanos() * 3 / 10).max(1));

            let j = Duration::from_millis(500);
            let got = with_draw(&p.jitter(Jitter::Absolute(j)), retry, previous, &mut draw);
            prop_assert!(got >= d && got < d + j);

            let got = with_draw(&p.jitter(Jitter::Full), retry, previous, &mut draw);
            prop_assert!(got <= d);

            let got = with_draw(&p.jitter(Jitter::Equal), retry, previous, &mut draw);
            prop_assert!(got >= d / 2 && got <= d);

            let got = with_draw(&p.jitter(Jitter::Decorrelated), retry, previous, &mut draw);
            prop_assert!(got >= base && got <= previous.max(base) * 3);
        }

        /// A server's pause is a floor that the jitter spreads above, for every form, and the
        /// cap still holds.
        #[test]
        fn a_floor_is_never_undercut_and_the_cap_still_holds(
            base_ms in 0u64..5_000,
            cap_ms in 1u64..60_000,
            floor_ms in 0u64..60_000,
            retry in 1u32..12,
            previous_ms in 0u64..60_000,
            jitter in any_jitter(),
            seed: u64,
        ) {
            let cap = Duration::from_millis(cap_ms);
            let floor = Duration::from_millis(floor_ms).min(cap);
            let p = Policy::new()
                .base(Duration::from_millis(base_ms).min(cap))
                .max_delay(cap)
                .jitter(jitter);
            let got = Duration::from_nanos(p.delay_with(
                retry,
                previous_ms * 1_000_000,
                nanos(floor),
                &mut seeded(seed),
            ));
            prop_assert!(got >= floor && got <= cap, "{got:?} outside [{floor:?}, {cap:?}]");
        }

        #[test]
        fn above_a_floor_each_form_stays_within_its_formula(
            base_ms in 1u64..2_000,
            floor_ms in 1u64..10_000,
            retry in 1u32..6,
            seed: u64,
        ) {
            let (base, floor) = (Duration::from_millis(base_ms), Duration::from_millis(floor_ms));
            let p = Policy::new().base(base).max_delay(Duration::from_secs(3600));
            let d = p.jitter(Jitter::None).nominal_delay(retry);
            let b = d.max(floor);
            let mut draw = seeded(seed);
            let mut at_least = |jitter| {
                Duration::from_nanos(p.jitter(jitter).delay_with(retry, 0, nanos(floor), &mut draw))
            };
            prop_assert_eq!(at_least(Jitter::None), b);
            let got = at_least(Jitter::Proportional(0.5));
            prop_assert!(got >= b && got.as_nanos() < b.as_nanos() + (b.as_nanos() / 2).max(1));
            let got = at_least(Jitter::Absolute(Duration::from_millis(300)));
            prop_assert!(got >= b && got < b + Duration::from_millis(300));
            let got = at_least(Jitter::Full);
            prop_assert!(got >= floor && got <= floor + b);
            let got = at_least(Jitter::Equal);
            prop_assert!(got >= (d / 2).max(floor) && got <= (d / 2).max(floor) + (b - b / 2));
            let got = at_least(Jitter::Decorrelated);
            prop_assert!(got >= base.max(floor) && got <= base.max(floor) * 3);
        }

        /// Any text is a policy or an error that names a part of it, never a panic.
        #[test]
        fn any_text_parses_or_names_its_part(text in ".*") {
            if let Err(error) = text.parse::<Policy>() {
                prop_assert!(text.contains(error.part()));
            }
        }

        /// Any value for any timing key, numbers of any length included.
        #[test]
        fn any_value_of_a_timing_key_parses_or_names_its_part(
            key in prop::sample::select(
                grammar::KEYS.iter().filter(|k| k.is_timing()).map(|k| k.name).collect::<Vec<_>>(),
            ),
            value in prop_oneof![
                ".*",
                "-?[0-9]{1,60}(\\.[0-9]{0,60})?(ns|us|µs|ms|s|m|h)?",
            ],
        ) {
            let text = format!("{key}={value}");
            if let Err(error) = text.parse::<Policy>() {
                prop_assert!(text.contains(error.part()));
            }
        }

        /// A spread pause is within its fraction of the capped nominal pause, above a floor.
        #[test]
        fn a_spread_pause_stays_around_the_capped_nominal(
            base_ms in 0u64..5_000,
            cap_ms in 1u64..60_000,
            floor_ms in 0u64..60_000,
            f in 0.0f64..=1.0,
            retry in 1u32..40,
            seed: u64,
        ) {
            let cap = Duration::from_millis(cap_ms);
            let p = Policy::new()
                .base(Duration::from_millis(base_ms))
                .max_delay(cap)
                .jitter(Jitter::Spread(f));
            let d = p.nominal_delay(retry);
            let floor = Duration::from_millis(floor_ms);
            let b = d.max(floor);
            let got = Duration::from_nanos(p.delay_with(retry, 0, nanos(floor), &mut seeded(seed)));
            prop_assert!(got >= floor && got >= b.mul_f64(1.0 - f).saturating_sub(Duration::from_nanos(1)));
            prop_assert!(got <= b.mul_f64(1.0 + f) + Duration::from_nanos(1));
            prop_assert!(d <= cap);
        }

        #[test]
        fn exponential_is_monotonic(base_ms in 0u64..10_000, factor in 1.0f64..8.0, retry in 1u32..200) {
            let p = Policy::new().base(Duration::from_millis(base_ms)).factor(factor).jitter(Jitter::None);
            prop_assert!(p.nominal_delay(retry) <= p.nominal_delay(retry + 1));
        }
    }
}

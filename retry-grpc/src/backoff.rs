//! The pause before each retry: A6's `random(0, …)` form (the default) and C-core's ±20 % form,
//! both drawn by the runtime's [`Policy`] (this module only names them, and counts the retries
//! since the last pushback).
//!
//! | form | pause before retry `n` (n = 1, 2, … since the start or the last pushback) | the runtime's form | who |
//! |---|---|---|---|
//! | [`Jitter::A6`] (default) | `U[0, min(initialBackoff·backoffMultiplier^(n−1), maxBackoff))` | [`retry_runtime::Jitter::Full`] | gRFC A6's text, grpc-go (`rand.Int63n(cur)`), grpc-java (`cur·random.nextDouble()`) |
//! | [`Jitter::CCore`] | `b_n·U[0.8, 1.2)` with `b_n = min(initialBackoff·backoffMultiplier^(n−1), maxBackoff)` | [`retry_runtime::Jitter::Spread(0.2)`](retry_runtime::Jitter::Spread) | C-core (`BackOff::NextAttemptDelay`, jitter 0.2), so Python `grpcio`, C++, Ruby, PHP |
//!
//! **Why A6's form is the default.** It is what the specification writes and what two of the
//! three official implementations do; it spreads the retries of clients that failed together
//! over the whole interval ("full jitter", the form that minimised contention in the AWS
//! Architecture Blog's 2015 experiment, `bench/RESULTS.md` §2). C-core's form keeps each pause
//! within ±20 % of the nominal one, so pauses are more predictable and never near zero, at the
//! price of clients that failed together retrying within a 40 % window; choose it to behave as
//! a `grpcio` or C++ client beside it does. Measured against `grpcio` 1.85.1 (C-core) on
//! loopback with `initialBackoff 0.1s`, multiplier 2 (`bench/RESULTS.md` §10): its pauses lie in
//! the C-core band, not in `U[0, …)`.
//!
//! C-core applies its jitter after the cap, so a pause can reach 1.2·`maxBackoff`; the
//! [`Jitter::CCore`] form does the same. (Older C-core releases did not cap the first pause;
//! 1.85's `BackOff::NextAttemptDelay` caps every one.) A `backoffMultiplier` below 1 (A6 allows
//! any number above 0) shrinks the pauses, as the runtime's
//! [`Policy::factor_unclamped`](retry_runtime::Policy::factor_unclamped) keeps it. Pauses are
//! whole nanoseconds: each end of a range can be drawn.

use crate::RetryPolicy;
use retry_runtime::Policy;
use std::time::Duration;

/// The jitter form of the retry backoff (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// A6's text: `U[0, min(initialBackoff·backoffMultiplier^(n−1), maxBackoff))`: the
    /// runtime's [`Full`](retry_runtime::Jitter::Full).
    #[default]
    A6,
    /// C-core's: within ±20 % of `min(initialBackoff·backoffMultiplier^(n−1), maxBackoff)`
    /// (the cap applied before the jitter): the runtime's
    /// [`Spread(0.2)`](retry_runtime::Jitter::Spread).
    CCore,
}

impl Jitter {
    /// The runtime's jitter of this form.
    pub const fn to_runtime(self) -> retry_runtime::Jitter {
        match self {
            Jitter::A6 => retry_runtime::Jitter::Full,
            // C-core's jitter: ±20 %.
            Jitter::CCore => retry_runtime::Jitter::Spread(0.2),
        }
    }
}

/// The backoff of one call: which retry this is since the start or the last pushback, and the
/// pause it gets from the runtime's [`Policy`] of the retry policy ([`policy`](Self::policy)).
///
/// ```
/// use retry_grpc::backoff::{Jitter, RetryBackoff};
/// use retry_grpc::RetryPolicy;
/// use std::time::Duration;
/// use tonic::Code;
///
/// let policy = RetryPolicy::builder()
///     .max_attempts(5)
///     .initial_backoff(Duration::from_millis(100))
///     .max_backoff(Duration::from_millis(300))
///     .backoff_multiplier(2.0)
///     .retryable_status_codes([Code::Unavailable])
///     .build()?;
/// let mut backoff = RetryBackoff::new(&policy, Jitter::A6);
/// // With the draw u = 0.5 every time: half of 100, 200, then 300 (capped) ms.
/// assert_eq!(backoff.next_pause_with(0.5), Duration::from_millis(50));
/// assert_eq!(backoff.next_pause_with(0.5), Duration::from_millis(100));
/// assert_eq!(backoff.next_pause_with(0.5), Duration::from_millis(150));
/// backoff.reset(); // a pushback was obeyed: the next one starts again from initialBackoff
/// assert_eq!(backoff.next_pause_with(0.5), Duration::from_millis(50));
/// // The same pauses, from the runtime's policy.
/// assert_eq!(backoff.policy().delay_drawn(3, Duration::ZERO, 0.5), Duration::from_millis(150));
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct RetryBackoff {
    policy: Policy,
    jitter: Jitter,
    /// Retries since the start or the last pushback (grpc-go's `numRetriesSincePushback`).
    retries: u32,
}

impl RetryBackoff {
    /// The backoff of `policy` with the `jitter` form, before the first retry.
    pub fn new(policy: &RetryPolicy, jitter: Jitter) -> Self {
        RetryBackoff {
            policy: policy.runtime_policy().jitter(jitter.to_runtime()),
            jitter,
            retries: 0,
        }
    }

    /// The jitter form.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The runtime's policy the pauses are drawn from: `initialBackoff` as its base,
    /// `backoffMultiplier` as its factor, `maxBackoff` as its cap, and the jitter form's.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The nominal pause of retry `n` (from 1) since the start or the last pushback, before
    /// jitter: `min(initialBackoff·backoffMultiplier^(n−1), maxBackoff)`, for both forms.
    pub fn nominal(&self, n: u32) -> Duration {
        self.policy.nominal_delay(n)
    }

    /// The pause of retry `n` for the uniform draw `u` in [0, 1]: A6's `nominal·u`, or C-core's
    /// `nominal·(0.8 + 0.4·u)` ([`Policy::delay_drawn`]). A pure function, for tests and for
    /// callers with their own random source; `u` outside [0, 1] is clamped, NaN is 0.
    pub fn pause(&self, n: u32, u: f64) -> Duration {
        self.policy.delay_drawn(n, Duration::ZERO, u)
    }

    /// The pause of the next retry with the draw `u`, and counts the retry.
    pub fn next_pause_with(&mut self, u: f64) -> Duration {
        self.retries = self.retries.saturating_add(1);
        self.pause(self.retries, u)
    }

    /// The pause of the next retry, drawn with the runtime's random source ([`Policy::delay`]).
    pub fn next_pause(&mut self) -> Duration {
        self.retries = self.retries.saturating_add(1);
        self.policy.delay(self.retries, Duration::ZERO)
    }

    /// Retries counted since the start or the last [`reset`](Self::reset).
    pub fn retries(&self) -> u32 {
        self.retries
    }

    /// After a pause set by the server's pushback: the next backoff is again the first
    /// (A6: "retry delay will reset to initial backoff").
    pub fn reset(&mut self) {
        self.retries = 0;
    }

    /// The range the pause of retry `n` is drawn from: `[low, high)` (at the nanosecond, `high`
    /// itself may be drawn).
    pub fn bounds(&self, n: u32) -> (Duration, Duration) {
        (self.pause(n, 0.0), self.pause(n, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    fn policy(initial_ms: u64, max_ms: u64, multiplier: f64) -> RetryPolicy {
        RetryPolicy::builder()
            .max_attempts(5)
            .initial_backoff(Duration::from_millis(initial_ms))
            .max_backoff(Duration::from_millis(max_ms))
            .backoff_multiplier(multiplier)
            .retryable_status_codes([Code::Unavailable])
            .build()
            .expect("a valid policy")
    }

    #[test]
    fn a6_bounds_are_zero_to_the_capped_nominal() {
        let backoff = RetryBackoff::new(&policy(100, 1000, 2.0), Jitter::A6);
        let ms = Duration::from_millis;
        assert_eq!(backoff.bounds(1), (ms(0), ms(100)));
        assert_eq!(backoff.bounds(2), (ms(0), ms(200)));
        assert_eq!(backoff.bounds(3), (ms(0), ms(400)));
        assert_eq!(backoff.bounds(4), (ms(0), ms(800)));
        assert_eq!(backoff.bounds(5), (ms(0), ms(1000)));
        assert_eq!(backoff.bounds(60), (ms(0), ms(1000)));
        assert_eq!(backoff.pause(3, 0.25), ms(100));
    }

    #[test]
    fn c_core_bounds_are_twenty_percent_around_the_nominal() {
        let backoff = RetryBackoff::new(&policy(100, 1000, 2.0), Jitter::CCore);
        let ms = Duration::from_millis;
        assert_eq!(backoff.bounds(1), (ms(80), ms(120)));
        assert_eq!(backoff.bounds(2), (ms(160), ms(240)));
        assert_eq!(backoff.bounds(3), (ms(320), ms(480)));
        assert_eq!(backoff.bounds(5), (ms(800), ms(1200)));
        assert_eq!(backoff.pause(1, 0.5), ms(100));
    }

    #[test]
    fn the_cap_comes_before_c_cores_jitter() {
        let backoff = RetryBackoff::new(&policy(500, 200, 2.0), Jitter::CCore);
        assert_eq!(backoff.nominal(1), Duration::from_millis(200));
        assert_eq!(
            backoff.bounds(1),
            (Duration::from_millis(160), Duration::from_millis(240))
        );
    }

    #[test]
    fn a_multiplier_below_one_shrinks_the_pauses() {
        let backoff = RetryBackoff::new(&policy(400, 1000, 0.5), Jitter::A6);
        assert_eq!(backoff.nominal(1), Duration::from_millis(400));
        assert_eq!(backoff.nominal(3), Duration::from_millis(100));
    }

    #[test]
    fn huge_exponents_stay_at_the_cap() {
        let backoff = RetryBackoff::new(&policy(100, 5000, 10.0), Jitter::A6);
        assert_eq!(backoff.nominal(u32::MAX), Duration::from_millis(5000));
        assert_eq!(backoff.pause(u32::MAX, f64::NAN), Duration::ZERO);
    }

    #[test]
    fn many_drawn_pauses_fill_their_bounds_past_the_cap_too() {
        // A6: U[0, nominal]; C-core: ±20 % of the capped nominal, up to 1.2·maxBackoff.
        for jitter in [Jitter::A6, Jitter::CCore] {
            let mut backoff = RetryBackoff::new(&policy(100, 1000, 2.0), jitter);
            for n in 1..=7 {
                let (low, high) = backoff.bounds(n);
                let nominal = backoff.nominal(n);
                let expected = match jitter {
                    Jitter::A6 => (Duration::ZERO, nominal),
                    Jitter::CCore => (nominal * 4 / 5, nominal * 6 / 5),
                };
                assert_eq!((low, high), expected, "{jitter:?} retry {n}");
                let mut samples = Vec::new();
                for _ in 0..5_000 {
                    backoff.reset();
                    for _ in 1..n {
                        backoff.next_pause();
                    }
                    samples.push(backoff.next_pause());
                }
                let width = high - low;
                assert!(
                    samples.iter().all(|p| low <= *p && *p <= high),
                    "{jitter:?} {n}"
                );
                assert!(
                    samples.iter().any(|p| *p < low + width / 50),
                    "{jitter:?} {n}"
                );
                assert!(
                    samples.iter().any(|p| *p > high - width / 50),
                    "{jitter:?} {n}"
                );
            }
            assert_eq!(backoff.nominal(7), Duration::from_secs(1));
        }
    }

    #[test]
    fn drawn_pauses_stay_in_their_bounds() {
        for jitter in [Jitter::A6, Jitter::CCore] {
            let mut backoff = RetryBackoff::new(&policy(100, 1000, 2.0), jitter);
            for n in 1..=6 {
                let (low, high) = backoff.bounds(n);
                let pause = backoff.next_pause();
                assert!(
                    low <= pause && pause < high,
                    "{jitter:?} retry {n}: {pause:?} not in [{low:?}, {high:?})"
                );
            }
        }
    }
}

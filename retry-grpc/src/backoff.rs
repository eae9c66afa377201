//! The pause before each retry: A6's `random(0, …)` form (the default) and C-core's ±20 % form.
//!
//! | form | pause before retry `n` (n = 1, 2, … since the start or the last pushback) | who |
//! |---|---|---|
//! | [`Jitter::A6`] (default) | `U[0, min(initialBackoff·backoffMultiplier^(n−1), maxBackoff))` | gRFC A6's text, grpc-go (`rand.Int63n(cur)`), grpc-java (`cur·random.nextDouble()`) |
//! | [`Jitter::CCore`] | `b_n·U[0.8, 1.2)` with `b_1 = min(initialBackoff, maxBackoff)`, `b_n = min(b_(n−1)·backoffMultiplier, maxBackoff)` | C-core (`BackOff::NextAttemptDelay`, jitter 0.2), so Python `grpcio`, C++, Ruby, PHP |
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
//! 1.85's `BackOff::NextAttemptDelay` caps every one.)

use crate::RetryPolicy;
use std::time::Duration;

/// The jitter form of the retry backoff (see the [module docs](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// A6's text: `U[0, min(initialBackoff·backoffMultiplier^(n−1), maxBackoff))`.
    #[default]
    A6,
    /// C-core's: within ±20 % of `min(initialBackoff·backoffMultiplier^(n−1), maxBackoff)`
    /// (the cap applied before the jitter).
    CCore,
}

/// C-core's jitter: ±20 %.
const C_CORE_JITTER: f64 = 0.2;

/// The backoff of one call: which retry this is since the start or the last pushback, and the
/// pause it gets.
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
/// # Ok::<(), retry_grpc::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct RetryBackoff {
    initial: Duration,
    max: Duration,
    multiplier: f64,
    jitter: Jitter,
    /// Retries since the start or the last pushback (grpc-go's `numRetriesSincePushback`).
    retries: u32,
}

impl RetryBackoff {
    /// The backoff of `policy` with the `jitter` form, before the first retry.
    pub fn new(policy: &RetryPolicy, jitter: Jitter) -> Self {
        RetryBackoff {
            initial: policy.initial_backoff(),
            max: policy.max_backoff(),
            multiplier: policy.backoff_multiplier(),
            jitter,
            retries: 0,
        }
    }

    /// The jitter form.
    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The nominal pause of retry `n` (from 1) since the start or the last pushback, before
    /// jitter: `min(initialBackoff·backoffMultiplier^(n−1), maxBackoff)`, for both forms.
    pub fn nominal(&self, n: u32) -> Duration {
        let n = n.max(1);
        let exponent = i32::try_from(n - 1).unwrap_or(i32::MAX);
        let seconds = self.initial.as_secs_f64() * self.multiplier.powi(exponent);
        let capped = seconds.min(self.max.as_secs_f64());
        Duration::try_from_secs_f64(capped).unwrap_or(self.max)
    }

    /// The pause of retry `n` for the uniform draw `u` in [0, 1): A6's `nominal·u`, or C-core's
    /// `nominal·(0.8 + 0.4·u)`. A pure function, for tests and for callers with their own
    /// random source; `u` outside [0, 1) is clamped.
    pub fn pause(&self, n: u32, u: f64) -> Duration {
        let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
        let factor = match self.jitter {
            Jitter::A6 => u,
            Jitter::CCore => 1.0 - C_CORE_JITTER + 2.0 * C_CORE_JITTER * u,
        };
        let nominal = self.nominal(n);
        Duration::try_from_secs_f64(nominal.as_secs_f64() * factor).unwrap_or(nominal)
    }

    /// The pause of the next retry with the draw `u`, and counts the retry.
    pub fn next_pause_with(&mut self, u: f64) -> Duration {
        self.retries = self.retries.saturating_add(1);
        self.pause(self.retries, u)
    }

    /// The pause of the next retry, drawn with the thread's random generator.
    pub fn next_pause(&mut self) -> Duration {
        self.next_pause_with(rand::random::<f64>())
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

    /// The range the pause of retry `n` is drawn from: `[low, high)`.
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

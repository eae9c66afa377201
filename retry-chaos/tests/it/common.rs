//! What the tests share: an error type that can be injected, and the sampling bound.

use retry_chaos::Injected;
use retry_runtime::{CircuitOpen, Elapsed, Transient};

/// A service's error: `Unavailable` is worth retrying; an injected error is
/// `Injected`, worth retrying as `Unavailable` is.
#[derive(Debug, PartialEq)]
pub enum CallError {
    Unavailable,
    Injected(u32),
    Timeout,
    Open,
}

impl Transient for CallError {
    fn is_transient(&self) -> bool {
        matches!(
            self,
            CallError::Unavailable | CallError::Injected(_) | CallError::Timeout
        )
    }
}

impl From<Injected> for CallError {
    fn from(injected: Injected) -> Self {
        CallError::Injected(injected.attempt())
    }
}

impl From<Elapsed> for CallError {
    fn from(_: Elapsed) -> Self {
        CallError::Timeout
    }
}

impl From<CircuitOpen> for CallError {
    fn from(_: CircuitOpen) -> Self {
        CallError::Open
    }
}

/// `count` of `n` draws at `rate` is within 4 standard deviations of `n · rate`
/// (`sqrt(n · rate · (1 − rate))`): a seeded draw that lands outside fails every time, and an
/// honest one lands outside about once in 16,000 seeds.
pub fn within_four_sigma(count: u64, n: u64, rate: f64) -> bool {
    let mean = n as f64 * rate;
    let sigma = (n as f64 * rate * (1.0 - rate)).sqrt();
    (count as f64 - mean).abs() <= 4.0 * sigma
}

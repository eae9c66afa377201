//! The variants that `gate_overhead.rs` (criterion) and `gate_steady.rs` (interleaved blocks)
//! time: a plain function, `#[retry]` without a gate, and `#[retry(gate = ...)]` with each
//! mode of `AdmissionGate`, on the happy path (every first attempt accepted), sync and async.
//!
//! Every variant is `#[inline(never)]`, so each call is one real call. The gates are `static`s
//! as an application's would be; on the happy path each call asks its gate once and reports
//! one accepted answer.

use retry_runtime::{
    AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, Gradient2, Rejected, Transient, retry,
};

#[derive(Debug)]
pub enum Error {
    Busy,
    /// Never made on the happy path the benchmarks time; shown only through `Debug`.
    Shed(#[allow(dead_code)] Rejected),
}

impl Transient for Error {
    fn is_transient(&self) -> bool {
        matches!(self, Error::Busy)
    }
}

impl From<Rejected> for Error {
    fn from(rejected: Rejected) -> Self {
        Error::Shed(rejected)
    }
}

/// The work of every variant. It can fail (the benchmark never passes 0), so the compiler has
/// to keep each variant's failure path.
#[inline(always)]
pub fn answer(x: u64) -> Result<u64, Error> {
    if x == 0 {
        Err(Error::Busy)
    } else {
        Ok(x.wrapping_mul(3))
    }
}

pub static THROTTLING: AdmissionGate =
    AdmissionGate::adaptive_throttling(AdaptiveThrottling::new()).name("throttling");
pub static RATE_LIMIT: AdmissionGate =
    AdmissionGate::rate_limit(ClientRateLimit::new()).name("rate_limit");
pub static AIMD: AdmissionGate = AdmissionGate::aimd(Aimd::new()).name("aimd");
pub static GRADIENT2: AdmissionGate = AdmissionGate::gradient2(Gradient2::new()).name("gradient2");

pub mod sync {
    use super::*;

    #[inline(never)]
    pub fn plain(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s")]
    pub fn attribute(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s", gate = THROTTLING)]
    pub fn throttling(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s", gate = RATE_LIMIT)]
    pub fn rate_limit(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s", gate = AIMD)]
    pub fn aimd(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s", gate = GRADIENT2)]
    pub fn gradient2(x: u64) -> Result<u64, Error> {
        answer(x)
    }
}

pub mod not_sync {
    use super::*;

    #[inline(never)]
    pub async fn plain(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s")]
    pub async fn attribute(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s", gate = THROTTLING)]
    pub async fn throttling(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s", gate = RATE_LIMIT)]
    pub async fn rate_limit(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s", gate = AIMD)]
    pub async fn aimd(x: u64) -> Result<u64, Error> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s", gate = GRADIENT2)]
    pub async fn gradient2(x: u64) -> Result<u64, Error> {
        answer(x)
    }
}

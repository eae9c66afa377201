//! The variants that the benchmarks time: a plain function, `#[retry]`, and the same retry written
//! with `backon` and `tokio-retry`, on the happy path and with one failure. Shared by
//! `attribute.rs` (criterion) and `steady.rs` (interleaved blocks), each of which includes this
//! file as its own module.
//!
//! Every variant is `#[inline(never)]`, so each call is one real call and none of them is folded
//! into the benchmark loop. `tokio-retry` has no sync form; its variants are async only.

use backon::{BlockingRetryable, ConstantBuilder, ExponentialBuilder, Retryable};
use retry_runtime::{Policy, Retrier, Transient, retry, retry_block};
use std::cell::Cell;
use std::time::Duration;
use tokio_retry::RetryIf;
use tokio_retry::strategy::FixedInterval;

#[derive(Debug)]
pub struct Busy;

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

pub fn is_busy(_: &Busy) -> bool {
    true
}

/// The work of every happy-path variant. It can fail (the benchmark never passes 0), so the
/// compiler has to keep each variant's failure path: a body that cannot fail would let it
/// delete the retry loop altogether and measure nothing.
#[inline(always)]
pub fn answer(x: u64) -> Result<u64, Busy> {
    if x == 0 {
        Err(Busy)
    } else {
        Ok(x.wrapping_mul(3))
    }
}

/// The work of every failure-path variant: odd calls fail, even calls succeed, so each call of
/// a retrying function fails once and then succeeds.
#[inline(always)]
pub fn flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
    let n = calls.get();
    calls.set(n + 1);
    if n.is_multiple_of(2) {
        Err(Busy)
    } else {
        Ok(n)
    }
}

// The same retry everywhere: up to 3 retries, exponential from 1 s, with jitter where the crate
// has it. On the happy path the policy's numbers never matter; building it does.
pub const BACKON: ExponentialBuilder = ExponentialBuilder::new().with_max_times(3).with_jitter();
pub const BACKON_ZERO: ConstantBuilder = ConstantBuilder::new()
    .with_delay(Duration::ZERO)
    .with_max_times(3);

/// The `Retrier`'s policies, as a configuration file would give them: the benchmarks pass them
/// through `black_box`, so that the compiler cannot fold them as it folds the attribute's
/// constant policy.
pub static RUN_TIME_POLICY: Policy = Policy::new().max(3).base(Duration::from_secs(1));
pub static RUN_TIME_POLICY_ZERO: Policy = Policy::new()
    .max(3)
    .base(Duration::ZERO)
    .jitter(retry_runtime::Jitter::None);

/// The registry of the `named policy` rows (issue 42): the same timings as the `const` rows'
/// (`max = 3, base = "1s"` on the happy path, `base = "0ns", jitter = none` on the failure
/// path), read from TOML by `retry-config` and installed as the process's resolver, as a
/// service that configures its policies does. Each call resolves its name once, as it starts.
#[allow(dead_code)] // `steady`'s rows only; `attribute.rs` includes this file too
pub const NAMED_POLICIES: &str = r#"
[retry.bench]
max = 3
base = "1s"

[retry.bench-zero]
max = 3
base = "0ns"
jitter = "none"
"#;

/// Installs [`NAMED_POLICIES`] as the process's resolver (the `named policy` rows need it;
/// without it they would run their written default, which is the `const` rows' work).
#[allow(dead_code)] // `steady`'s rows only
pub fn install_named_policies() {
    let config = retry_config::Config::from_toml(NAMED_POLICIES).expect("the bench's policies");
    std::sync::Arc::new(retry_config::Registry::new(config)).install();
}

pub mod sync {
    use super::*;

    #[inline(never)]
    pub fn plain(x: u64) -> Result<u64, Busy> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s")]
    pub fn attribute(x: u64) -> Result<u64, Busy> {
        answer(x)
    }

    #[inline(never)]
    pub fn backon(x: u64) -> Result<u64, Busy> {
        (|| answer(x)).retry(BACKON).when(is_busy).call()
    }

    /// `attribute` with its policy looked up by name at run time ([`install_named_policies`]).
    #[allow(dead_code)] // `steady`'s rows only
    #[inline(never)]
    #[retry(policy = "bench", max = 3, base = "1s")]
    pub fn named(x: u64) -> Result<u64, Busy> {
        answer(x)
    }

    /// `attribute_flaky` with its policy looked up by name at run time.
    #[allow(dead_code)] // `steady`'s rows only
    #[inline(never)]
    #[retry(policy = "bench-zero", max = 3, base = "0ns", jitter = none)]
    pub fn named_flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
        flaky(calls)
    }

    #[inline(never)]
    pub fn block(x: u64) -> Result<u64, Busy> {
        retry_block!(max = 3, base = "1s" => { answer(x) })
    }

    #[inline(never)]
    pub fn retrier(policy: &Policy, x: u64) -> Result<u64, Busy> {
        Retrier::new(policy).run(|| answer(x))
    }

    /// The floor under `#[retry]`: the attempt context alone (what `attempt()` and nested
    /// functions read), put in place around the body as every attempt does, without the loop.
    #[inline(never)]
    pub fn context_alone(x: u64) -> Result<u64, Busy> {
        retry_runtime::scope::caller_retries(|| answer(x))
    }

    /// The baseline of the failure path: the loop a careful programmer writes by hand.
    #[inline(never)]
    pub fn hand_written(calls: &Cell<u64>) -> Result<u64, Busy> {
        let mut retries = 0;
        loop {
            match flaky(calls) {
                Err(e) if e.is_transient() && retries < 3 => retries += 1,
                outcome => return outcome,
            }
        }
    }

    #[inline(never)]
    #[retry(max = 3, base = "0ns", jitter = none)]
    pub fn attribute_flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
        flaky(calls)
    }

    #[inline(never)]
    pub fn backon_flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
        (|| flaky(calls)).retry(BACKON_ZERO).when(is_busy).call()
    }

    #[inline(never)]
    pub fn block_flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
        retry_block!(max = 3, base = "0ns", jitter = none => { flaky(calls) })
    }

    #[inline(never)]
    pub fn retrier_flaky(policy: &Policy, calls: &Cell<u64>) -> Result<u64, Busy> {
        Retrier::new(policy).run(|| flaky(calls))
    }
}

pub mod not_sync {
    use super::*;

    #[inline(never)]
    pub async fn plain(x: u64) -> Result<u64, Busy> {
        answer(x)
    }

    #[inline(never)]
    #[retry(max = 3, base = "1s")]
    pub async fn attribute(x: u64) -> Result<u64, Busy> {
        answer(x)
    }

    #[inline(never)]
    pub async fn backon(x: u64) -> Result<u64, Busy> {
        (|| async { answer(x) }).retry(BACKON).when(is_busy).await
    }

    /// `attribute` with its policy looked up by name at run time ([`install_named_policies`]).
    #[allow(dead_code)] // `steady`'s rows only
    #[inline(never)]
    #[retry(policy = "bench", max = 3, base = "1s")]
    pub async fn named(x: u64) -> Result<u64, Busy> {
        answer(x)
    }

    /// `attribute_flaky` with its policy looked up by name at run time.
    #[allow(dead_code)] // `steady`'s rows only
    #[inline(never)]
    #[retry(policy = "bench-zero", max = 3, base = "0ns", jitter = none)]
    pub async fn named_flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
        flaky(calls)
    }

    /// The floor under `#[retry]`: the attempt context alone, in place around every poll of
    /// the body, without the loop.
    #[inline(never)]
    pub async fn context_alone(x: u64) -> Result<u64, Busy> {
        retry_runtime::scope::caller_retries_async(async { answer(x) }).await
    }

    #[inline(never)]
    pub async fn tokio_retry(x: u64) -> Result<u64, Busy> {
        // tokio-retry without its `rand` feature has no jitter; the happy path never draws.
        let strategy = FixedInterval::from_millis(1000).take(3);
        RetryIf::start(strategy, || async { answer(x) }, is_busy).await
    }

    #[inline(never)]
    #[retry(max = 3, base = "0ns", jitter = none)]
    pub async fn attribute_flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
        flaky(calls)
    }

    #[inline(never)]
    pub async fn backon_flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
        (|| async { flaky(calls) })
            .retry(BACKON_ZERO)
            .when(is_busy)
            .await
    }

    /// backon with a sleep that returns at once: `#[retry]` does not sleep a zero pause at all,
    /// and with tokio's timer backon's row measures the timer's 1 ms tick, not the decision.
    #[inline(never)]
    pub async fn backon_flaky_no_sleep(calls: &Cell<u64>) -> Result<u64, Busy> {
        (|| async { flaky(calls) })
            .retry(BACKON_ZERO)
            .sleep(|_: Duration| std::future::ready(()))
            .when(is_busy)
            .await
    }

    #[inline(never)]
    pub async fn tokio_retry_flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
        let strategy = FixedInterval::new(Duration::ZERO).take(3);
        RetryIf::start(strategy, || async { flaky(calls) }, is_busy).await
    }
}

//! The attribute's own cost, against a plain function and the same retry written with `backon`
//! and `tokio-retry`: `cargo bench -p retry-bench --bench attribute`.
//!
//! Every variant is `#[inline(never)]`, so each iteration makes one real call and none of them is
//! folded into the benchmark loop. `tokio-retry` has no sync form; its rows are async only.

mod common;

use backon::{BlockingRetryable, ConstantBuilder, ExponentialBuilder, Retryable};
use criterion::{Criterion, criterion_group, criterion_main};
use retry_runtime::{Transient, retry};
use std::cell::Cell;
use std::hint::black_box;
use std::time::Duration;
use tokio_retry::RetryIf;
use tokio_retry::strategy::FixedInterval;

#[derive(Debug)]
struct Busy;

impl Transient for Busy {
    fn is_transient(&self) -> bool {
        true
    }
}

fn is_busy(_: &Busy) -> bool {
    true
}

/// The work of every happy-path variant. It can fail (the benchmark never passes 0), so the
/// compiler has to keep each variant's failure path: a body that cannot fail would let it
/// delete the retry loop altogether and measure nothing.
#[inline(always)]
fn answer(x: u64) -> Result<u64, Busy> {
    if x == 0 {
        Err(Busy)
    } else {
        Ok(x.wrapping_mul(3))
    }
}

/// The work of every failure-path variant: odd calls fail, even calls succeed, so each call of
/// a retrying function fails once and then succeeds.
#[inline(always)]
fn flaky(calls: &Cell<u64>) -> Result<u64, Busy> {
    let n = calls.get();
    calls.set(n + 1);
    if n % 2 == 0 { Err(Busy) } else { Ok(n) }
}

// The same retry everywhere: up to 3 retries, exponential from 1 s, with jitter where the crate
// has it. On the happy path the policy's numbers never matter; building it does.
const BACKON: ExponentialBuilder = ExponentialBuilder::new().with_max_times(3).with_jitter();
const BACKON_ZERO: ConstantBuilder = ConstantBuilder::new()
    .with_delay(Duration::ZERO)
    .with_max_times(3);

mod sync {
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
}

mod not_sync {
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

fn happy_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("happy/sync");
    g.bench_function("plain", |b| b.iter(|| sync::plain(black_box(7))));
    g.bench_function("retry attribute", |b| {
        b.iter(|| sync::attribute(black_box(7)))
    });
    g.bench_function("backon", |b| b.iter(|| sync::backon(black_box(7))));
    g.bench_function("attempt context alone", |b| {
        b.iter(|| sync::context_alone(black_box(7)))
    });
    // Measuring plain once more shows how much of any difference is the harness's noise (the
    // same code at another address).
    g.bench_function("plain, again", |b| b.iter(|| sync::plain(black_box(7))));
    g.finish();

    let rt = runtime();
    let mut g = c.benchmark_group("happy/async");
    g.bench_function("plain", |b| {
        b.to_async(&rt).iter(|| not_sync::plain(black_box(7)))
    });
    g.bench_function("retry attribute", |b| {
        b.to_async(&rt).iter(|| not_sync::attribute(black_box(7)))
    });
    g.bench_function("backon", |b| {
        b.to_async(&rt).iter(|| not_sync::backon(black_box(7)))
    });
    g.bench_function("tokio-retry", |b| {
        b.to_async(&rt).iter(|| not_sync::tokio_retry(black_box(7)))
    });
    g.bench_function("attempt context alone", |b| {
        b.to_async(&rt)
            .iter(|| not_sync::context_alone(black_box(7)))
    });
    g.finish();
}

fn failure_path(c: &mut Criterion) {
    let calls = Cell::new(0);
    let mut g = c.benchmark_group("one failure/sync");
    g.bench_function("hand-written loop", |b| {
        b.iter(|| sync::hand_written(black_box(&calls)))
    });
    g.bench_function("retry attribute", |b| {
        b.iter(|| sync::attribute_flaky(black_box(&calls)))
    });
    g.bench_function("backon", |b| {
        b.iter(|| sync::backon_flaky(black_box(&calls)))
    });
    g.finish();

    let rt = runtime();
    let mut g = c.benchmark_group("one failure/async");
    g.bench_function("retry attribute", |b| {
        b.to_async(&rt)
            .iter(|| not_sync::attribute_flaky(black_box(&calls)))
    });
    g.bench_function("backon", |b| {
        b.to_async(&rt)
            .iter(|| not_sync::backon_flaky(black_box(&calls)))
    });
    g.bench_function("backon, a sleep that returns at once", |b| {
        b.to_async(&rt)
            .iter(|| not_sync::backon_flaky_no_sleep(black_box(&calls)))
    });
    g.bench_function("tokio-retry", |b| {
        b.to_async(&rt)
            .iter(|| not_sync::tokio_retry_flaky(black_box(&calls)))
    });
    g.finish();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = happy_path, failure_path
}
criterion_main!(benches);

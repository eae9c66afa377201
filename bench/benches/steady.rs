//! The variants of `attribute.rs`, timed in interleaved blocks: `cargo bench -p retry-bench --bench
//! steady`.
//!
//! Criterion measures one variant after another, so on a machine shared with other work a burst
//! of load lands on some rows and not on others, and the ratios between rows move by 20 % from run
//! to run. Here every round times one block of calls of each variant in turn, and each variant
//! keeps its fastest block: the load slows blocks down but never speeds one up, so the minimum
//! over many rounds is close to the unloaded cost, and every variant had the same chances.
//!
//! Async variants are polled once with a waker that does nothing: none of them sleeps (the
//! failure rows have zero pauses, and backon's sleep returns at once), so each is ready at its
//! first poll, and no runtime's work is counted.
//!
//! Without this package's `metrics` feature, retry-runtime is built without its own `metrics`
//! feature (the happy path as an application without metrics gets it). With `--features metrics`
//! it is built with it: every `#[retry]` row records into the facade's no-op recorder, and the
//! rows marked `Prometheus recorder` (only in that build) into the Prometheus exporter's
//! recorder, set as the thread's recorder for their blocks.

// The variants that sleep on tokio's timer (tokio-retry, backon's default sleep) need a runtime:
// they are criterion's rows only.
#[allow(dead_code)]
#[path = "common/variants.rs"]
mod variants;

use std::cell::Cell;
use std::future::Future;
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use variants::{not_sync, sync};

/// Calls per block: a few hundred microseconds, shorter than most bursts of other work.
const BLOCK: u32 = 10_000;
/// Rounds of one block per variant.
const ROUNDS: u32 = 400;

/// Polls the future of `$call` once, where it was made: every variant here is ready at once. A
/// macro, not a function taking the future, so that the future is written in place and never
/// moved: moving a freshly made future reads it back in wide words before its narrow stores
/// are done, a stall that would be the harness's cost, not the variant's.
macro_rules! ready {
    ($call:expr) => {{
        let mut future = pin!($call);
        poll_once(future.as_mut())
    }};
}

#[inline(always)]
fn poll_once<F: Future>(future: Pin<&mut F>) -> F::Output {
    match future.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a benchmarked future was not ready at its first poll"),
    }
}

/// A variant: times one block of its calls.
type Block<'a> = Box<dyn Fn() -> Duration + 'a>;

/// One block of `BLOCK` calls of `call`, timed.
#[inline(always)]
fn block(call: impl Fn()) -> Duration {
    let start = Instant::now();
    for _ in 0..BLOCK {
        call();
    }
    start.elapsed()
}

/// One block with `recorder` as this thread's recorder: the facade finds it before the global
/// one, so the rows that use it are interleaved with the rest in the same rounds.
#[cfg(feature = "metrics")]
fn recorded(recorder: &dyn metrics::Recorder, call: impl Fn()) -> Duration {
    let _local = metrics::set_default_local_recorder(recorder);
    block(call)
}

fn main() {
    let calls = Cell::new(0);
    let calls = &calls;
    // With `--features metrics`, the Prometheus exporter's recorder (without its listener), for
    // the `Prometheus recorder` rows; the other rows run with the facade's no-op recorder. Its
    // counters are read back at the end, so that the rows are known to have recorded.
    #[cfg(feature = "metrics")]
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    #[cfg(feature = "metrics")]
    let scrape = prometheus.handle();
    #[cfg(feature = "metrics")]
    let prometheus = &prometheus;
    #[cfg_attr(not(feature = "metrics"), allow(unused_mut))]
    let mut variants: Vec<(&str, Block<'_>)> = vec![
        (
            "happy sync: plain",
            Box::new(|| block(|| drop(black_box(sync::plain(black_box(7)))))),
        ),
        (
            "happy sync: #[retry]",
            Box::new(|| block(|| drop(black_box(sync::attribute(black_box(7)))))),
        ),
        (
            "happy sync: backon",
            Box::new(|| block(|| drop(black_box(sync::backon(black_box(7)))))),
        ),
        (
            "happy sync: retry_block!",
            Box::new(|| block(|| drop(black_box(sync::block(black_box(7)))))),
        ),
        (
            "happy sync: Retrier",
            Box::new(|| {
                block(|| {
                    drop(black_box(sync::retrier(
                        black_box(&variants::RUN_TIME_POLICY),
                        black_box(7),
                    )))
                })
            }),
        ),
        (
            "happy sync: attempt context alone",
            Box::new(|| block(|| drop(black_box(sync::context_alone(black_box(7)))))),
        ),
        (
            "happy async: plain",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::plain(black_box(7))))))),
        ),
        (
            "happy async: #[retry]",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::attribute(black_box(7))))))),
        ),
        (
            "happy async: backon",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::backon(black_box(7))))))),
        ),
        (
            "happy async: attempt context alone",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::context_alone(black_box(7))))))),
        ),
        (
            "one failure sync: hand-written loop",
            Box::new(|| block(|| drop(black_box(sync::hand_written(black_box(calls)))))),
        ),
        (
            "one failure sync: #[retry]",
            Box::new(|| block(|| drop(black_box(sync::attribute_flaky(black_box(calls)))))),
        ),
        (
            "one failure sync: backon",
            Box::new(|| block(|| drop(black_box(sync::backon_flaky(black_box(calls)))))),
        ),
        (
            "one failure sync: retry_block!",
            Box::new(|| block(|| drop(black_box(sync::block_flaky(black_box(calls)))))),
        ),
        (
            "one failure sync: Retrier",
            Box::new(|| {
                block(|| {
                    drop(black_box(sync::retrier_flaky(
                        black_box(&variants::RUN_TIME_POLICY_ZERO),
                        black_box(calls),
                    )))
                })
            }),
        ),
        (
            "one failure async: #[retry]",
            Box::new(|| {
                block(|| {
                    drop(black_box(ready!(not_sync::attribute_flaky(black_box(
                        calls,
                    )))))
                })
            }),
        ),
        (
            "one failure async: backon, a sleep that returns at once",
            Box::new(|| {
                block(|| {
                    drop(black_box(ready!(not_sync::backon_flaky_no_sleep(
                        black_box(calls),
                    ))))
                })
            }),
        ),
    ];
    #[cfg(feature = "metrics")]
    variants.extend::<[(&str, Block<'_>); 2]>([
        (
            "happy sync: #[retry], Prometheus recorder",
            Box::new(|| {
                recorded(prometheus, || {
                    drop(black_box(sync::attribute(black_box(7))))
                })
            }),
        ),
        (
            "happy async: #[retry], Prometheus recorder",
            Box::new(|| {
                recorded(prometheus, || {
                    drop(black_box(ready!(not_sync::attribute(black_box(7)))))
                })
            }),
        ),
    ]);
    // `cargo bench --bench steady -- async` keeps the variants whose name contains `async`
    // (for profiling one of them); cargo's own `--bench` argument is not a filter.
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let variants: Vec<_> = variants
        .into_iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    let mut fastest = vec![Duration::MAX; variants.len()];
    for _ in 0..ROUNDS {
        for ((_, run), fastest) in variants.iter().zip(&mut fastest) {
            *fastest = (*fastest).min(run());
        }
    }
    println!("fastest block of {BLOCK} calls out of {ROUNDS}, per call:");
    for ((name, _), fastest) in variants.iter().zip(&fastest) {
        let nanos = fastest.as_secs_f64() * 1e9 / f64::from(BLOCK);
        println!("{nanos:>9.2} ns  {name}");
    }
    #[cfg(feature = "metrics")]
    if variants.iter().any(|(name, _)| name.contains("Prometheus")) {
        let scrape = scrape.render();
        assert!(
            scrape.contains("retry_calls_total{function=\"attribute\",outcome=\"first_try\"}"),
            "the recorder saw no call: {scrape}"
        );
    }
}

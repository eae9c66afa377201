//! The variants of `attribute.rs`, timed in interleaved blocks: `cargo bench -p retry-bench --bench
//! steady`.
//!
//! Criterion measures one variant after another, so on a machine shared with other work the ratios
//! between rows move by 20 % from run to run; interleaved blocks (`common/blocks.rs`) keep them.
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
#[path = "common/blocks.rs"]
mod blocks;
#[allow(dead_code)]
#[path = "common/variants.rs"]
mod variants;
#[macro_use]
#[path = "common/poll.rs"]
mod poll;

use blocks::{Block, block, report};
use std::cell::Cell;
use std::hint::black_box;
use variants::{not_sync, sync};

/// One block with `recorder` as this thread's recorder: the facade finds it before the global
/// one, so the rows that use it are interleaved with the rest in the same rounds.
#[cfg(feature = "metrics")]
fn recorded(recorder: &dyn metrics::Recorder, call: impl Fn()) -> std::time::Duration {
    let _local = metrics::set_default_local_recorder(recorder);
    block(call)
}

fn main() {
    // The `named policy` rows' registry (issue 42), installed before any row runs.
    variants::install_named_policies();
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
            "happy sync: named policy, #[retry]",
            Box::new(|| block(|| drop(black_box(sync::named(black_box(7)))))),
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
            "happy async: named policy, #[retry]",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::named(black_box(7))))))),
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
            "one failure sync: named policy, #[retry]",
            Box::new(|| block(|| drop(black_box(sync::named_flaky(black_box(calls)))))),
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
            "one failure async: named policy, #[retry]",
            Box::new(|| {
                block(|| drop(black_box(ready!(not_sync::named_flaky(black_box(calls,))))))
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
    report("variant", &mut variants);
    #[cfg(feature = "metrics")]
    if variants.iter().any(|(name, _)| name.contains("Prometheus")) {
        let scrape = scrape.render();
        assert!(
            scrape.contains("retry_calls_total{function=\"attribute\",outcome=\"first_try\"}"),
            "the recorder saw no call: {scrape}"
        );
    }
}

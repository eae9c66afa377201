//! The attribute's own cost, against a plain function and the same retry written with `backon`
//! and `tokio-retry`: `cargo bench -p retry-bench --bench attribute`. The variants are in
//! `common/variants.rs`.
//!
//! Without this package's `metrics` feature retry-runtime is built without its own. With
//! `--features metrics` every group but the last runs with the feature compiled in and no
//! recorder (the facade's no-op recorder), and the last group, `happy/.../Prometheus recorder`
//! (only in that build), installs the Prometheus exporter's recorder as the global recorder and
//! measures the happy path again, beside a plain function.

mod common;
#[path = "common/variants.rs"]
mod variants;

use criterion::{Criterion, criterion_group, criterion_main};
use std::cell::Cell;
use std::hint::black_box;
use variants::{not_sync, sync};

fn happy_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("happy/sync");
    g.bench_function("plain", |b| b.iter(|| sync::plain(black_box(7))));
    g.bench_function("retry attribute", |b| {
        b.iter(|| sync::attribute(black_box(7)))
    });
    g.bench_function("backon", |b| b.iter(|| sync::backon(black_box(7))));
    g.bench_function("retry_block", |b| b.iter(|| sync::block(black_box(7))));
    g.bench_function("Retrier", |b| {
        b.iter(|| sync::retrier(black_box(&variants::RUN_TIME_POLICY), black_box(7)))
    });
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
    g.bench_function("retry_block", |b| {
        b.iter(|| sync::block_flaky(black_box(&calls)))
    });
    g.bench_function("Retrier", |b| {
        b.iter(|| {
            sync::retrier_flaky(
                black_box(&variants::RUN_TIME_POLICY_ZERO),
                black_box(&calls),
            )
        })
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

/// The happy path with the Prometheus exporter's recorder installed (for good: the last group).
#[cfg(feature = "metrics")]
fn happy_path_recorded(c: &mut Criterion) {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let prometheus = recorder.handle();
    metrics::set_global_recorder(recorder).expect("the only recorder of this benchmark");

    let mut g = c.benchmark_group("happy/sync, Prometheus recorder");
    g.bench_function("plain", |b| b.iter(|| sync::plain(black_box(7))));
    g.bench_function("retry attribute", |b| {
        b.iter(|| sync::attribute(black_box(7)))
    });
    g.finish();

    let rt = runtime();
    let mut g = c.benchmark_group("happy/async, Prometheus recorder");
    g.bench_function("plain", |b| {
        b.to_async(&rt).iter(|| not_sync::plain(black_box(7)))
    });
    g.bench_function("retry attribute", |b| {
        b.to_async(&rt).iter(|| not_sync::attribute(black_box(7)))
    });
    g.finish();

    // The recorder saw the calls: the benchmark measured what it claims.
    let scrape = prometheus.render();
    assert!(
        scrape.contains("retry_calls_total{function=\"attribute\",outcome=\"first_try\"}"),
        "{scrape}"
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

#[cfg(feature = "metrics")]
criterion_group! {
    name = benches;
    config = common::config();
    targets = happy_path, failure_path, happy_path_recorded
}
#[cfg(not(feature = "metrics"))]
criterion_group! {
    name = benches;
    config = common::config();
    targets = happy_path, failure_path
}
criterion_main!(benches);

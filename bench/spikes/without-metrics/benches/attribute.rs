//! `bench/benches/attribute.rs`'s sync groups (criterion), without the `metrics` feature:
//! `cargo bench --bench attribute` here.

#[allow(dead_code)]
#[path = "../../../benches/common/variants.rs"]
mod variants;

use criterion::{Criterion, criterion_group, criterion_main};
use std::cell::Cell;
use std::hint::black_box;
use variants::sync;

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
    g.bench_function("plain, again", |b| b.iter(|| sync::plain(black_box(7))));
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
}

criterion_group!(benches, happy_path, failure_path);
criterion_main!(benches);

//! What an admission gate costs on the happy path: `cargo bench -p retry-bench --bench
//! gate_overhead`. A plain function, `#[retry]` without a gate, and `#[retry(gate = ...)]` with
//! each mode (every first attempt accepted: each call asks the gate once and reports one
//! answer). The variants are in `common/gate_variants.rs`; `gate_steady` times the same ones in
//! interleaved blocks, the figure to trust on a loaded machine.

mod common;
#[path = "common/gate_variants.rs"]
mod gate_variants;

use criterion::{Criterion, criterion_group, criterion_main};
use gate_variants::{not_sync, sync};
use std::hint::black_box;

fn happy_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("gate/sync");
    g.bench_function("plain", |b| b.iter(|| sync::plain(black_box(7))));
    g.bench_function("retry attribute, no gate", |b| {
        b.iter(|| sync::attribute(black_box(7)))
    });
    g.bench_function("gate: adaptive throttling", |b| {
        b.iter(|| sync::throttling(black_box(7)))
    });
    g.bench_function("gate: rate limit", |b| {
        b.iter(|| sync::rate_limit(black_box(7)))
    });
    g.bench_function("gate: aimd", |b| b.iter(|| sync::aimd(black_box(7))));
    g.bench_function("gate: gradient2", |b| {
        b.iter(|| sync::gradient2(black_box(7)))
    });
    g.finish();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime");
    let mut g = c.benchmark_group("gate/async");
    g.bench_function("plain", |b| {
        b.to_async(&rt).iter(|| not_sync::plain(black_box(7)))
    });
    g.bench_function("retry attribute, no gate", |b| {
        b.to_async(&rt).iter(|| not_sync::attribute(black_box(7)))
    });
    g.bench_function("gate: adaptive throttling", |b| {
        b.to_async(&rt).iter(|| not_sync::throttling(black_box(7)))
    });
    g.bench_function("gate: rate limit", |b| {
        b.to_async(&rt).iter(|| not_sync::rate_limit(black_box(7)))
    });
    g.bench_function("gate: aimd", |b| {
        b.to_async(&rt).iter(|| not_sync::aimd(black_box(7)))
    });
    g.bench_function("gate: gradient2", |b| {
        b.to_async(&rt).iter(|| not_sync::gradient2(black_box(7)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = happy_path
}
criterion_main!(benches);

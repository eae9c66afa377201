//! The pause computation alone, per jitter form: `cargo bench -p retry-bench --bench delay`.

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use retry_runtime::{Jitter, Policy};
use std::hint::black_box;
use std::time::Duration;

fn delay(c: &mut Criterion) {
    let forms = [
        ("none", Jitter::None),
        ("default (proportional 0.5)", Jitter::Proportional(0.5)),
        (
            "absolute 500ms",
            Jitter::Absolute(Duration::from_millis(500)),
        ),
        ("full", Jitter::Full),
        ("equal", Jitter::Equal),
        ("decorrelated", Jitter::Decorrelated),
    ];
    let mut g = c.benchmark_group("delay");
    for (name, jitter) in forms {
        let policy = Policy::new().jitter(jitter);
        let previous = Duration::from_secs(2);
        g.bench_function(name, |b| {
            b.iter(|| black_box(&policy).delay(black_box(3), black_box(previous)))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = delay
}
criterion_main!(benches);

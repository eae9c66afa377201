//! What every benchmark file shares (a directory module, so cargo does not take it for a bench).

use criterion::Criterion;
use std::time::Duration;

/// Short runs: each benchmark is a few nanoseconds, so 3 s gives millions of samples, and
/// `cargo bench -p retry-bench` stays around two minutes.
pub fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

//! `bench/benches/steady.rs`'s sync rows, without the `metrics` feature: interleaved blocks of
//! 10,000 calls, 400 rounds, each row's fastest block. `cargo bench --bench steady` here.

#[allow(dead_code)]
#[path = "../../../benches/common/variants.rs"]
mod variants;

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration, Instant};
use variants::sync;

/// Calls per block.
const BLOCK: u32 = 10_000;
/// Rounds of one block per row.
const ROUNDS: u32 = 400;

/// A row: times one block of its calls.
type Block<'a> = Box<dyn Fn() -> Duration + 'a>;

#[inline(always)]
fn block(call: impl Fn()) -> Duration {
    let start = Instant::now();
    for _ in 0..BLOCK {
        call();
    }
    start.elapsed()
}

fn main() {
    let calls = Cell::new(0);
    let calls = &calls;
    let policy = &variants::RUN_TIME_POLICY;
    let policy_zero = &variants::RUN_TIME_POLICY_ZERO;
    let rows: Vec<(&str, Block<'_>)> = vec![
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
            Box::new(|| block(|| drop(black_box(sync::retrier(black_box(policy), black_box(7)))))),
        ),
        (
            "happy sync: attempt context alone",
            Box::new(|| block(|| drop(black_box(sync::context_alone(black_box(7)))))),
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
                        black_box(policy_zero),
                        black_box(calls),
                    )))
                })
            }),
        ),
    ];
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    let mut fastest = vec![Duration::MAX; rows.len()];
    for _ in 0..ROUNDS {
        for ((_, run), fastest) in rows.iter().zip(&mut fastest) {
            *fastest = (*fastest).min(run());
        }
    }
    println!("fastest block of {BLOCK} calls out of {ROUNDS}, per call (no `metrics`):");
    for ((name, _), fastest) in rows.iter().zip(&fastest) {
        let nanos = fastest.as_secs_f64() * 1e9 / f64::from(BLOCK);
        println!("{nanos:>9.2} ns  {name}");
    }
}

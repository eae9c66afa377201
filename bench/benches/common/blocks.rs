//! Interleaved blocks, the method of `steady.rs`, `gate_steady.rs` and `gate_floor.rs`.
//!
//! Criterion measures one variant after another, so on a machine shared with other work a burst
//! of load lands on some rows and not on others. Here every round times one block of calls of
//! each variant in turn, and each variant keeps its fastest block: the load slows blocks down
//! but never speeds one up, so the minimum over many rounds is close to the unloaded cost, and
//! every variant had the same chances.

use std::time::{Duration, Instant};

/// Calls per block: a few hundred microseconds, shorter than most bursts of other work.
pub const BLOCK: u32 = 10_000;
/// Rounds of one block per variant.
pub const ROUNDS: u32 = 400;

/// A variant: times one block of its calls.
pub type Block<'a> = Box<dyn Fn() -> Duration + 'a>;

/// One block of `BLOCK` calls of `call`, timed.
#[inline(always)]
pub fn block(call: impl Fn()) -> Duration {
    let start = Instant::now();
    for _ in 0..BLOCK {
        call();
    }
    start.elapsed()
}

/// Times `variants` in interleaved blocks and prints each one's time per call in its fastest
/// block, as a Markdown table whose first column is `title`. Arguments on the command line
/// (not cargo's own `--bench`) keep the variants whose name contains one of them, so that
/// `cargo bench --bench steady -- async` times those alone (for profiling one of them).
pub fn report(title: &str, variants: &mut Vec<(&str, Block<'_>)>) {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    variants.retain(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f)));
    let mut fastest = vec![Duration::MAX; variants.len()];
    for _ in 0..ROUNDS {
        for ((_, run), fastest) in variants.iter().zip(&mut fastest) {
            *fastest = (*fastest).min(run());
        }
    }
    println!("| {title} | ns per call (fastest block of {BLOCK}, {ROUNDS} rounds) |");
    println!("|---|---:|");
    for ((name, _), fastest) in variants.iter().zip(fastest) {
        let nanos = fastest.as_secs_f64() * 1e9 / f64::from(BLOCK);
        println!("| {name} | {nanos:.2} |");
    }
}

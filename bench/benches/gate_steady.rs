//! The variants of `gate_overhead.rs`, timed in interleaved blocks as `steady.rs` times the
//! attribute's: `cargo bench -p retry-bench --bench gate_steady`. Every round times one block of
//! calls of each variant in turn, and each variant keeps its fastest block, so that the load of
//! a shared machine slows blocks down without deciding the ratios. Async variants are polled
//! once with a waker that does nothing (none of them sleeps).

#[path = "common/gate_variants.rs"]
mod gate_variants;

use gate_variants::{not_sync, sync};
use std::future::Future;
use std::hint::black_box;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Calls per block.
const BLOCK: u32 = 10_000;
/// Rounds of one block per variant.
const ROUNDS: u32 = 400;

/// Polls the future of `$call` once, where it was made (see `steady.rs`).
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

type Block = Box<dyn Fn() -> Duration>;

#[inline(always)]
fn block(call: impl Fn()) -> Duration {
    let start = Instant::now();
    for _ in 0..BLOCK {
        call();
    }
    start.elapsed()
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let variants: Vec<(&str, Block)> = vec![
        (
            "sync: plain",
            Box::new(|| block(|| drop(black_box(sync::plain(black_box(7)))))),
        ),
        (
            "sync: #[retry], no gate",
            Box::new(|| block(|| drop(black_box(sync::attribute(black_box(7)))))),
        ),
        (
            "sync: gate, adaptive throttling",
            Box::new(|| block(|| drop(black_box(sync::throttling(black_box(7)))))),
        ),
        (
            "sync: gate, rate limit",
            Box::new(|| block(|| drop(black_box(sync::rate_limit(black_box(7)))))),
        ),
        (
            "sync: gate, aimd",
            Box::new(|| block(|| drop(black_box(sync::aimd(black_box(7)))))),
        ),
        (
            "sync: gate, gradient2",
            Box::new(|| block(|| drop(black_box(sync::gradient2(black_box(7)))))),
        ),
        (
            "async: plain",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::plain(black_box(7))))))),
        ),
        (
            "async: #[retry], no gate",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::attribute(black_box(7))))))),
        ),
        (
            "async: gate, adaptive throttling",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::throttling(black_box(7))))))),
        ),
        (
            "async: gate, rate limit",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::rate_limit(black_box(7))))))),
        ),
        (
            "async: gate, aimd",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::aimd(black_box(7))))))),
        ),
        (
            "async: gate, gradient2",
            Box::new(|| block(|| drop(black_box(ready!(not_sync::gradient2(black_box(7))))))),
        ),
    ];
    let variants: Vec<_> = variants
        .into_iter()
        .filter(|(name, _)| filter.as_ref().is_none_or(|f| name.contains(f.as_str())))
        .collect();
    let mut fastest = vec![Duration::MAX; variants.len()];
    for _ in 0..ROUNDS {
        for (i, (_, time)) in variants.iter().enumerate() {
            fastest[i] = fastest[i].min(time());
        }
    }
    println!("| variant | ns per call (fastest block of {BLOCK}, {ROUNDS} rounds) |");
    println!("|---|---:|");
    for ((name, _), best) in variants.iter().zip(fastest) {
        println!(
            "| {name} | {:.2} |",
            best.as_nanos() as f64 / f64::from(BLOCK)
        );
    }
}

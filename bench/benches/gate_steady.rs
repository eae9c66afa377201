//! The variants of `gate_overhead.rs`, timed in interleaved blocks as `steady.rs` times the
//! attribute's: `cargo bench -p retry-bench --bench gate_steady`. Every round times one block of
//! calls of each variant in turn, and each variant keeps its fastest block, so that the load of
//! a shared machine slows blocks down without deciding the ratios. Async variants are polled
//! once with a waker that does nothing (none of them sleeps).

#[path = "common/blocks.rs"]
mod blocks;
#[path = "common/gate_variants.rs"]
mod gate_variants;
#[macro_use]
#[path = "common/poll.rs"]
mod poll;

use blocks::{Block, block, report};
use gate_variants::{not_sync, sync};
use std::hint::black_box;

fn main() {
    let mut variants: Vec<(&str, Block<'_>)> = vec![
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
    report("variant", &mut variants);
}

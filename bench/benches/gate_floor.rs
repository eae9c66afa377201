//! The floor under the admission gate's happy path on this machine: what any gate that keeps
//! its mode's rule must do per call, without the gate, the loop or the runtime around it.
//! `cargo bench -p retry-bench --bench gate_floor` (bench/RESULTS.md §3, "The floor under the
//! gate").
//!
//! Adaptive throttling and the rate limiter place each answer by its time (a bin of the
//! window, a half second of the measured rate) and count it in a word other threads count in
//! too: one clock read and one atomic read-modify-write. AIMD and Gradient2 hold a slot of a
//! shared count while the attempt runs and time it: a read-modify-write to take the slot and
//! one to give it back, and two clock reads (Gradient2 learns from the latency in
//! microseconds; AIMD compares it with its timeout). Each floor is timed with the exact clock
//! (`Instant::now()`, what tokio's clock and the loop's read) and with Linux's coarse one
//! (`CLOCK_MONOTONIC_COARSE`, a few milliseconds' resolution), in interleaved blocks as
//! `gate_steady.rs` times the gate itself.

#[path = "common/blocks.rs"]
mod blocks;

use blocks::{Block, block, report};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
/// A bin of adaptive throttling's default window: 120 s in 16 bins.
const BIN_NANOS: u64 = 7_500_000_000;

/// The shared words: a window's bins, and a concurrency limit's count in flight.
static BINS: [AtomicU64; 32] = [const { AtomicU64::new(0) }; 32];
static IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds since `epoch` on the exact clock.
#[inline(always)]
fn exact(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

/// Nanoseconds on Linux's coarse monotonic clock (the exact one elsewhere).
#[inline(always)]
fn coarse(epoch: Instant) -> u64 {
    #[cfg(target_os = "linux")]
    {
        let _ = epoch;
        let now = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
        (now.tv_sec as u64)
            .wrapping_mul(1_000_000_000)
            .wrapping_add(now.tv_nsec as u64)
    }
    #[cfg(not(target_os = "linux"))]
    exact(epoch)
}

/// One answer counted in its bin, as adaptive throttling counts it: the stamped word updated
/// with a compare-and-swap.
#[inline(always)]
fn count(nanos: u64) {
    let bin = nanos / BIN_NANOS;
    let _ = BINS[(bin & 31) as usize].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
        Some(if word >> 40 == bin {
            word + 1
        } else {
            (bin << 40) | 1
        })
    });
}

/// A concurrency slot taken below the limit and given back, the attempt timed.
#[inline(always)]
fn slot(clock: impl Fn() -> u64) {
    let start = clock();
    let taken = IN_FLIGHT.fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
        (n < 1_000).then_some(n + 1)
    });
    let latency = clock().wrapping_sub(start);
    if taken.is_ok() {
        IN_FLIGHT.fetch_sub(1, Ordering::Release);
    }
    black_box(latency);
}

/// Keeps `value` from being optimised away.
#[inline(always)]
fn keep(value: u64) {
    black_box(value);
}

fn main() {
    let epoch = Instant::now();
    let mut variants: Vec<(&str, Block<'_>)> = vec![
        ("the loop alone", Box::new(|| block(|| keep(0)))),
        (
            "one exact clock read (`Instant::now`)",
            Box::new(move || block(|| keep(exact(epoch)))),
        ),
        (
            "one coarse clock read (`CLOCK_MONOTONIC_COARSE`)",
            Box::new(move || block(|| keep(coarse(epoch)))),
        ),
        (
            "one atomic compare-and-swap",
            Box::new(|| block(|| count(black_box(1)))),
        ),
        (
            "throttling, rate limit: exact read + count",
            Box::new(move || block(|| count(exact(epoch)))),
        ),
        (
            "throttling, rate limit: coarse read + count",
            Box::new(move || block(|| count(coarse(epoch)))),
        ),
        (
            "AIMD, Gradient2: 2 exact reads + slot taken and given back",
            Box::new(move || block(|| slot(|| exact(epoch)))),
        ),
        (
            "AIMD: 2 coarse reads + slot taken and given back",
            Box::new(move || block(|| slot(|| coarse(epoch)))),
        ),
        (
            "a slot taken and given back, no clock",
            Box::new(|| block(|| slot(|| 0))),
        ),
    ];
    report("floor", &mut variants);
}

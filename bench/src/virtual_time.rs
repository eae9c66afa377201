//! What the simulations on tokio's paused clock share: the runtime, seeded random streams,
//! exponential draws, and running independent runs on every core.
//!
//! A run is one current-thread runtime whose clock starts paused: when every task waits, the
//! clock jumps to the next timer, so simulated seconds cost no wall time and every timestamp is
//! exact (tokio's timer rounds each sleep up to its next millisecond). The runtime's objects
//! (`RetryBudget`, `CircuitBreaker`, the loop of `#[retry]`) read that clock, so they run on
//! virtual time unchanged. One thread, a fixed spawn order and seeded streams make a run
//! deterministic: the same seed gives the same numbers.

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use retry_runtime::{CircuitOpen, Elapsed, Transient};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A current-thread runtime with timers, its clock paused from the start.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
}

/// SplitMix64's finaliser: spreads nearby inputs (client 1, client 2, ...) over unrelated seeds.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The stream of `parts` under `seed`: the same parts always give the same stream, so that a
/// call, a client or a request draws the same numbers under every strategy (common random
/// numbers, which make the strategies' differences their own and not the dice's).
pub fn stream(seed: u64, parts: &[u64]) -> SmallRng {
    let key = parts
        .iter()
        .fold(mix(seed), |key, &part| mix(key ^ mix(part)));
    SmallRng::seed_from_u64(key)
}

/// An exponentially distributed duration of mean `mean` (inverse transform sampling).
pub fn exponential(rng: &mut SmallRng, mean: Duration) -> Duration {
    let u: f64 = 1.0 - rng.random::<f64>(); // (0, 1]: ln stays finite
    mean.mul_f64(-u.ln())
}

/// Locks `m`, taking the value over from a thread that panicked while holding it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why a simulated call did not succeed: what the annotated functions of the simulations
/// return as their error.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// The server failed the attempt, or did not answer it in time: worth retrying.
    Failed,
    /// This crate's breaker refused the call: the server was not called.
    Refused,
    /// The admission gate shed the attempt: the server was not called. Not transient: the
    /// loop gives up, as it does with `#[retry(gate = ...)]`.
    Shed,
}

impl Transient for Failure {
    fn is_transient(&self) -> bool {
        *self == Failure::Failed
    }
}

impl From<CircuitOpen> for Failure {
    fn from(_: CircuitOpen) -> Self {
        Failure::Refused
    }
}

impl From<Elapsed> for Failure {
    fn from(_: Elapsed) -> Self {
        Failure::Failed
    }
}

/// `f` applied to every job, on as many threads as the machine has cores, in the jobs' order.
/// Each run owns its runtime, so runs are independent and the results do not depend on which
/// thread ran what.
pub fn parallel<J: Sync, R: Send>(jobs: &[J], f: impl Fn(&J) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else { break };
                        done.push((i, f(job)));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_repeat_and_differ() {
        let draw = |parts: &[u64]| stream(7, parts).random::<u64>();
        assert_eq!(draw(&[1, 2]), draw(&[1, 2]));
        assert_ne!(draw(&[1, 2]), draw(&[2, 1]));
        assert_ne!(draw(&[1]), stream(8, &[1]).random::<u64>());
    }

    #[test]
    fn the_exponential_has_its_mean() {
        let mut rng = stream(1, &[]);
        let n = 20_000;
        let sum: f64 = (0..n)
            .map(|_| exponential(&mut rng, Duration::from_millis(10)).as_secs_f64())
            .sum();
        let mean = sum / f64::from(n);
        assert!((mean - 0.010).abs() < 0.0003, "{mean}");
    }

    #[test]
    fn parallel_keeps_the_jobs_order() {
        let jobs: Vec<u64> = (0..50).collect();
        assert_eq!(
            parallel(&jobs, |j| j * 2),
            (0..50).map(|j| j * 2).collect::<Vec<_>>()
        );
    }
}

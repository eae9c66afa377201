//! What the circuit breaker and the retry budget share between threads: std's primitives, or
//! loom's when the crate's unit tests are built with `--cfg loom`, so that the models in
//! `breaker::loom` and `budget::loom` run every interleaving of their threads through these.
//!
//! Only `cfg(all(test, loom))` switches (as in tokio): a user who builds their own code with
//! `--cfg loom` still gets std's types here, and `const` breakers and budgets.
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p retry-runtime --release --lib loom
//! ```
//!
//! The models are small (two or three threads, a few operations each) so that loom can explore
//! every interleaving of them, with no preemption bound: about a minute on 2 cores in release.
//! While editing, `LOOM_MAX_PREEMPTIONS=3` explores those with at most 3 preemptions per
//! execution in under a second.

#[cfg(all(test, loom))]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(all(test, loom))]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(all(test, loom)))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(all(test, loom)))]
pub(crate) use std::sync::{Mutex, MutexGuard};

use std::time::Instant;

/// An instant set once, by whichever thread gets there first: std's `OnceLock`, or under loom
/// a model of it (loom has no `OnceLock`): a mutex around an `Option`, with the same meaning,
/// "the first initialiser wins, everyone sees its value".
#[derive(Debug)]
pub(crate) struct OnceInstant {
    #[cfg(not(all(test, loom)))]
    cell: std::sync::OnceLock<Instant>,
    #[cfg(all(test, loom))]
    cell: Mutex<Option<Instant>>,
}

impl OnceInstant {
    #[cfg(not(all(test, loom)))]
    pub(crate) const fn new() -> Self {
        Self {
            cell: std::sync::OnceLock::new(),
        }
    }

    #[cfg(all(test, loom))]
    pub(crate) fn new() -> Self {
        Self {
            cell: Mutex::new(None),
        }
    }

    /// The instant, set to `init` if no thread has set it yet.
    pub(crate) fn get_or_init(&self, init: Instant) -> Instant {
        #[cfg(not(all(test, loom)))]
        return *self.cell.get_or_init(|| init);
        #[cfg(all(test, loom))]
        return *lock(&self.cell).get_or_insert(init);
    }

    /// The instant, if a thread has set it.
    pub(crate) fn get(&self) -> Option<Instant> {
        #[cfg(not(all(test, loom)))]
        return self.cell.get().copied();
        #[cfg(all(test, loom))]
        return *lock(&self.cell);
    }
}

/// Locks `mutex`. Nothing panics while this crate holds one of its locks; if something did, the
/// state is still whole, so a poisoned lock is taken as it is.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

//! Where jitter's randomness comes from.

use rand::RngExt;

/// Runs `f` with a source of uniform draws: `draw(lo, hi)` is a value in `[lo, hi]`.
///
/// The per-thread generator is fast and is never held across an `.await`, so an annotated
/// async function stays `Send`.
pub(crate) fn with<R>(f: impl FnOnce(&mut dyn FnMut(u64, u64) -> u64) -> R) -> R {
    let mut rng = rand::rng();
    f(&mut |lo, hi| {
        if lo >= hi {
            lo
        } else {
            rng.random_range(lo..=hi)
        }
    })
}

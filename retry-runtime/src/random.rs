//! Where jitter's randomness comes from.

use rand::RngExt;

/// Runs `f` with a source of uniform draws: `draw(lo, hi)` is a value in `[lo, hi]`.
///
/// The per-thread generator is fast and is never held across an `.await`, so an annotated
/// async function stays `Send`. Inside [`testing::record`](crate::testing::record) the
/// recording's seeded generator is used instead.
pub(crate) fn with<R>(f: impl FnOnce(&mut dyn FnMut(u64, u64) -> u64) -> R) -> R {
    fn draw(rng: &mut impl RngExt, lo: u64, hi: u64) -> u64 {
        if lo >= hi {
            lo
        } else {
            rng.random_range(lo..=hi)
        }
    }
    crate::testing::with_seeded(|seeded| match seeded {
        Some(rng) => f(&mut |lo, hi| draw(rng, lo, hi)),
        None => {
            let mut rng = rand::rng();
            f(&mut |lo, hi| draw(&mut rng, lo, hi))
        }
    })
}

//! Where adaptive throttling's draws come from: the thread's generator, or a source handed over
//! by retry-runtime ([`set_source`]).

use rand::RngExt;
use std::sync::OnceLock;

/// The source retry-runtime handed over, if it did.
static SOURCE: OnceLock<fn() -> f64> = OnceLock::new();

/// Makes `source` (a uniform draw in [0, 1)) the source of every later draw; the first call
/// wins. retry-runtime calls it when a `testing::record` begins, with its own source, which draws
/// from the recording's seeded generator while one is active on the thread and from the
/// thread's generator otherwise (as this crate's own does), so that a recorded run sheds the same
/// attempts for the same seed. The draw is taken only while the rejection probability is above
/// 0, so the happy path never reads it.
pub(crate) fn set_source(source: fn() -> f64) {
    let _ = SOURCE.set(source);
}

/// A uniform draw in [0, 1).
pub(crate) fn uniform() -> f64 {
    if let Some(source) = SOURCE.get() {
        return source();
    }
    const ONE: u64 = 1 << 53;
    rand::rng().random_range(0..ONE) as f64 / ONE as f64
}

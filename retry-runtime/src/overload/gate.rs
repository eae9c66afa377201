//! The admission gate's place in the loop: the error bound of `#[retry(gate = ...)]`, and the
//! source of adaptive throttling's draws. The gate itself is retry-overload's
//! ([`AdmissionGate`](retry_overload::AdmissionGate)).

use retry_overload::Rejected;

/// `E: From<Rejected>`, with an error message that says so (as `loop_error!` writes it for the
/// loop's own errors; `Rejected`'s `std::error::Error` impl is retry-overload's).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot say that the admission gate shed an attempt, which `#[retry(gate = ...)]` needs",
    label = "`{Self}` does not implement `From<retry_runtime::Rejected>`",
    note = "add `impl From<retry_runtime::Rejected> for {Self}` (a variant such as `Shed(Rejected)`), or remove `gate`"
)]
pub(crate) trait FromRejected {
    /// The error for an attempt the gate shed.
    fn from_rejected(from: Rejected) -> Self;
}

impl<E: From<Rejected>> FromRejected for E {
    fn from_rejected(from: Rejected) -> Self {
        E::from(from)
    }
}

/// A uniform draw in [0, 1) from the loop's source of randomness, the seeded one inside
/// [`testing::record`](crate::testing::record): what adaptive throttling draws from once a
/// recording has handed it to retry-overload (`testing`'s `Recorder::new`), so that a recorded
/// run sheds the same attempts for the same seed.
pub(crate) fn uniform() -> f64 {
    const ONE: u64 = 1 << 53;
    crate::random::with(|draw| draw(0, ONE - 1)) as f64 / ONE as f64
}

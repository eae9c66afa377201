//! Overload: the AWS SDKs' 2026 retry behaviour ([`Aws2026`], [`RetryQuota`]) and an admission
//! gate before every attempt, first tries included ([`AdmissionGate`]).
//!
//! A retry budget bounds retries and a breaker stops calls to a service that is down; neither
//! sheds first tries, which are what keeps a struggling service down once the retries are
//! bounded (the sustaining load of a metastable failure). The gate does: it is asked before
//! every attempt, and learns from each attempt's answer.

/// Declares the functions of an `impl` block `const`, except in the crate's loom build, whose
/// atomics and mutexes have no `const` constructors (see `crate::sync`).
macro_rules! loom_const_fn {
    (impl $ty:ty { $($(#[$attr:meta])* $vis:vis fn $name:ident($($params:tt)*) -> $ret:ty $body:block)* }) => {
        impl $ty {
            $(
                #[cfg(not(all(test, loom)))]
                $(#[$attr])* $vis const fn $name($($params)*) -> $ret $body
                #[cfg(all(test, loom))]
                $(#[$attr])* $vis fn $name($($params)*) -> $ret $body
            )*
        }
    };
}

/// `x` within [lo, hi], or `nan` for NaN: the settings' clamping, usable in `const fn`s.
const fn clamp_or(x: f64, lo: f64, hi: f64, nan: f64) -> f64 {
    if x > hi {
        hi
    } else if x >= lo {
        x
    } else if x < lo {
        lo
    } else {
        nan
    }
}

mod aws2026;
mod concurrency;
mod gate;
mod rate;
mod throttling;

#[cfg(test)]
mod tests;

pub use aws2026::{Aws2026, Aws2026Decision, Aws2026Standard, FailureKind, RetryQuota};
pub use concurrency::{Aimd, Gradient2};
pub(crate) use gate::FromRejected;
pub use gate::{
    AdmissionGate, GateMode, GateOutcome, GatePermit, GateState, RejectReason, Rejected,
};
pub use rate::ClientRateLimit;
pub use throttling::AdaptiveThrottling;

//! Overload: the AWS SDKs' 2026 retry behaviour ([`Aws2026`], [`RetryQuota`]) and an admission
//! gate before every attempt, first tries included ([`AdmissionGate`]).
//!
//! A retry budget bounds retries and a breaker stops calls to a service that is down; neither
//! sheds first tries, which are what keeps a struggling service down once the retries are
//! bounded (the sustaining load of a metastable failure). The gate does: it is asked before
//! every attempt, and learns from each attempt's answer.

use crate::bounds::{at_least_one, clamp_or, clamp_u32};

mod aws2026;
pub(crate) mod aws2026_call;
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

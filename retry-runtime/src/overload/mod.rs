//! Overload: the AWS SDKs' 2026 retry behaviour ([`Aws2026`], with retry-overload's
//! [`RetryQuota`]) and an admission gate before every attempt, first tries included
//! ([`AdmissionGate`]).
//!
//! The algorithms are the crate retry-overload's (the gate's four modes, the quota, the kinds of
//! failure), re-exported here and at the crate's root; what reads this crate's types stays here:
//! the AWS mode's delays and decisions with the [`Verdict`](crate::Verdict) they read
//! (`aws2026.rs`), and the gate's error bound and source of randomness in the loop (`gate.rs`).

use crate::bounds::{at_least_one, clamp_or};

mod aws2026;
pub(crate) mod aws2026_call;
mod gate;

pub use aws2026::{Aws2026, Aws2026Decision, Aws2026Standard};
pub(crate) use gate::{FromRejected, uniform};
pub use retry_overload::{
    AdaptiveThrottling, AdmissionGate, Aimd, ClientRateLimit, FailureKind, GateMode, GateOutcome,
    GatePermit, GateState, Gradient2, RejectReason, Rejected, RetryQuota,
};

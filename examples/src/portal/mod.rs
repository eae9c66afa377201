//! The claims portal of the design notes' story: what `cargo run --example portal` shows, and
//! what the `claims-portal` processes of the fault tests run.
//!
//! - [`coverage`]: the question "is this claim covered?", asked by one `#[retry]` function with
//!   a retry budget and a circuit breaker, and the fallback where its loop gives up.
//! - [`config`]: its policy, budget and breaker, read from `examples/portal.toml` (or the file
//!   given with `--config`) into a `retry_config::Registry`.
//! - [`later`]: the fallback's work: the claim saved and its check queued under its idempotency
//!   key; the worker's handler that makes the check later and e-mails the result.
//! - [`contract`]: the wire to the contract service, and a stand-in for the service that keeps
//!   its answers by idempotency key.
//! - [`story`]: the scenes and the lines the retry loop's hooks print.
//! - [`rehearse`]: the storm rehearsed with faults injected by `retry-chaos` into the coverage
//!   check (`--rehearse`; feature `rehearse`, on by default).
//! - [`outage`]: scene 5, the long outage, which the example plays and the benchmark that draws
//!   the metrics of an outage replays.

#![warn(missing_docs)]

pub mod config;
pub mod contract;
pub mod coverage;
pub mod later;
pub mod outage;
#[cfg(feature = "rehearse")]
pub mod rehearse;
pub mod story;

pub use contract::{ContractClient, ContractService};

use serde::{Deserialize, Serialize};
use std::fmt;

/// A claim number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClaimId(pub u32);

impl fmt::Display for ClaimId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A claim as the customer reports it: the number, and where the answer goes if it cannot be
/// given at once.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Claim {
    /// The claim number.
    pub id: ClaimId,
    /// The customer's e-mail address.
    pub email: String,
}

impl Claim {
    /// Claim `id` reported by the customer at `email`.
    pub fn new(id: u32, email: &str) -> Self {
        Claim {
            id: ClaimId(id),
            email: email.to_owned(),
        }
    }
}

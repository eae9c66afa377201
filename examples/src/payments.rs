//! The payment service of `cargo run --example payments`, as a library, so that the example, the
//! `payments-service` binary (which the fault tests in `examples/tests/` kill with SIGKILL) and
//! the benchmark in `bench/` run the same code.
//!
//! - [`service`]: `POST /payouts` with an `Idempotency-Key`, on a SQLite file or a PostgreSQL
//!   database. The keys are kept by `retry_durable::store` in the same database as the ledger,
//!   and the payout's ledger row commits together with the key's completion.
//! - [`bank`]: the bank the service pays through, a system outside the service's database. The
//!   service passes its key on, so a second call after a crash is answered with the first
//!   transfer.
//! - [`client`]: the portal's side, `#[retry]` sending the same key on every attempt.
//! - [`faults`]: where the service can be told to stop, so that a test kills it there.
//! - [`process`]: the service as a child process: start it, read what it says, kill it.

pub mod bank;
pub mod client;
pub mod faults;
pub mod mails;
pub mod process;
pub mod service;

use serde::{Deserialize, Serialize};
use std::fmt;

/// A claim number (the insurance claim the payout settles).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClaimId(pub u32);

/// An amount in euro cents, so that no payout is ever rounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cents(pub u64);

/// The request body of `POST /payouts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayoutRequest {
    /// The claim the payout settles.
    pub claim: ClaimId,
    /// How much.
    pub cents: Cents,
}

/// The service's confirmation, the body of a 201: what the store keeps for a repeat.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt {
    /// `P-` and the payout's row in the ledger.
    pub receipt: String,
    /// The claim the payout settles.
    pub claim: ClaimId,
    /// How much was paid.
    pub cents: Cents,
    /// The bank's transfer, when the service pays through a bank.
    pub transfer: Option<String>,
}

impl fmt::Display for Cents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EUR {}.{:02}", self.0 / 100, self.0 % 100)
    }
}

impl fmt::Display for ClaimId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "receipt {}", self.receipt)?;
        if let Some(transfer) = &self.transfer {
            write!(f, " (bank transfer {transfer})")?;
        }
        Ok(())
    }
}

/// The first eight characters of a key, for log lines.
pub fn short(key: &retry_runtime::IdempotencyKey) -> &str {
    key.as_str().get(..8).unwrap_or(key.as_str())
}

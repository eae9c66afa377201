//! The HTTP doors of `retry-runtime`, built on its [`engine`](retry_runtime::engine): a tower
//! layer ([`tower::RetryLayer`], feature `tower`) and a reqwest middleware
//! ([`reqwest::RetryMiddleware`], feature `reqwest-middleware`).
//!
#![doc = include_str!("../docs/guide.md")]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// Without a door (retry-grpc depends on this crate for `never_sent` alone), the doors' shared
// options are unused.
#![cfg_attr(
    not(any(feature = "tower", feature = "reqwest-middleware")),
    allow(dead_code)
)]

mod options;
mod sent;

#[cfg(feature = "reqwest-middleware")]
pub mod reqwest;
#[cfg(feature = "tower")]
pub mod tower;

pub use options::{
    BoxError, Counters, DEFAULT_BODY_LIMIT, HttpRetry, ReplayBody, Resend, Route, SendOnce,
};
pub use sent::never_sent;

/// The connection broke under a request: the rule of the doors' error classifier, shared with
/// `Transient for reqwest::Error` (one rule for both).
pub use retry_runtime::integrations::http::connection_broke;

/// The attribute's keys and what [`HttpRetry`] (or the layer) has for each: a method, or why it
/// has none (the reason the guide gives too). A key added to the attribute's grammar fails
/// `every_key_has_a_method_or_a_reason` until it has a row.
#[cfg(test)]
mod parity;

//! Every HTTP header the library reads or writes, for a client or a service of any HTTP
//! library (no feature needed):
//!
//! | header | a client | a service |
//! |---|---|---|
//! | `Idempotency-Key` ([`IdempotencyKey::HEADER`](crate::IdempotencyKey::HEADER)) | writes [`key_header_value`]: the key as the IETF draft's structured-field string | reads it with [`key_from_header`] ([`KeyError`] is a 400), under the rule of every key ([`validate_key`]) |
//! | `Retry-Attempt` ([`AttemptHeader`]) | writes [`AttemptHeader::for_current_attempt`] | reads [`AttemptHeader::caller_retries`], and runs its own retrying functions once ([`scope::caller_retries`](crate::scope::caller_retries)) |
//! | `Retry-After` ([`RETRY_AFTER`]) | reads [`parse_retry_after`] into a [`Verdict::RetryAfter`](crate::Verdict::RetryAfter) | writes seconds, for example `Retry-After: 1` with a 503 |
//! | `grpc-retry-pushback-ms` ([`GRPC_RETRY_PUSHBACK_MS`]) | reads [`Pushback`]: a pause, or "do not retry" | writes milliseconds in a failed call's trailers |
//!
//! ```
//! use retry_runtime::headers::{AttemptHeader, key_header_value, parse_retry_after};
//! use retry_runtime::IdempotencyKey;
//! use std::time::{Duration, SystemTime};
//!
//! // What a client sends with each attempt of a keyed call.
//! let key = IdempotencyKey::from("payout-4711");
//! assert_eq!(key_header_value(&key), "\"payout-4711\"");
//! let (name, number) = AttemptHeader::DEFAULT.for_current_attempt();
//! assert_eq!((name, number.as_str()), ("Retry-Attempt", "1"));
//!
//! // What it reads in a 503.
//! assert_eq!(parse_retry_after("2", SystemTime::now()), Some(Duration::from_secs(2)));
//! ```

mod attempt;
mod key;
mod pushback;
mod retry_after;

pub use attempt::AttemptHeader;
pub use key::{KEY_RULE, KeyError, key_from_header, key_header_value, validate_key};
pub use pushback::{GRPC_RETRY_PUSHBACK_MS, Pushback};
pub use retry_after::{RETRY_AFTER, parse_retry_after};

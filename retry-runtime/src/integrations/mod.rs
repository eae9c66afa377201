//! Which errors of real clients are worth another try: `http`, `reqwest` and `tonic`.
//!
//! Each is an optional feature, off by default, so that a user of one client compiles none of
//! the others:
//!
//! ```toml
//! [dependencies]
//! retry-runtime = { version = "0.1", features = ["reqwest"] }
//! ```
//!
//! With the feature on, the client's error type implements [`Transient`](crate::Transient), so
//! `#[retry]` needs no `on = ...` for it:
//!
//! | feature | for | transient | not transient | pause the server asked for |
//! |---|---|---|---|---|
//! | `http` | `http::StatusCode`, and `http::Response` through `http::response_verdict` | 408, 429, 500, 502, 503, 504 | every other status: 1xx–3xx, the other 4xx, 501 and 505–511 | `Retry-After`, in seconds or as a date, read from a response's headers |
//! | `reqwest` | `reqwest::Error`, and `reqwest::Response` through `reqwest::response_verdict` | connect errors (DNS included), timeouts, status errors with a transient status (the `http` row), a connection closed mid-message, a request, body or decode error caused by a transient [`std::io::Error`] (a body cut off before its `content-length` among them) | builder, redirect and upgrade errors, status errors with any other status, a body that arrived whole but does not decode, every other request or body error | `Retry-After` through `response_verdict`; none for an error: a `reqwest::Error` keeps no headers (judge the response before `error_for_status`) |
//! | `tonic` | `tonic::Status`, `tonic::Code` | `Unavailable`, `ResourceExhausted`, `Aborted`, `DeadlineExceeded`, and any status made from a transient [`std::io::Error`] | every other code, `Unknown` and `Internal` among them | `grpc-retry-pushback-ms` in the status's metadata; a negative or unreadable value means "do not retry" |
//!
//! Each module below explains its choices. The tables agree: reqwest's status errors use the
//! `http` row, and the `tokio` timeout and [`std::io::Error`] tables are on
//! [`Transient`](crate::Transient)'s page.
//!
//! The `reqwest` and `tonic` rows look for the I/O error under a client's own error with
//! [`has_transient_io_cause`](crate::has_transient_io_cause), which is public for the same
//! question about any other client's error.
//!
//! The modules are tested against the real crates: reqwest's errors come from real requests on
//! loopback (a closed port, a listener that never answers, a server that answers 503 or closes
//! the connection). `cargo test --workspace` builds them with every feature on, because the
//! workspace's test crate asks for them.
//!
//! One part of `http` needs no feature: [`http::parse_retry_after`] reads a `Retry-After` value
//! for a client of any HTTP library.

pub mod http;
#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "tonic")]
pub mod tonic;

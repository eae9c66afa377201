//! Which errors of real clients are worth another try.
//!
//! Each is an optional feature, off by default, so that a user of one client compiles none of
//! the others:
//!
//! ```toml
//! [dependencies]
//! retry-runtime = { version = "0.1", features = ["http"] }
//! ```
//!
//! With the feature on, the client's error type implements [`Transient`](crate::Transient), so
//! `#[retry]` needs no `on = ...` for it:
//!
//! | feature | for | transient | not transient | pause the server asked for |
//! |---|---|---|---|---|
//! | `http` | `http::StatusCode`, and `http::Response` through `http::response_verdict` | 408, 429, 500, 502, 503, 504 | every other status: 1xx–3xx, the other 4xx, 501 and 505–511 | `Retry-After`, in seconds or as a date, read from a response's headers |
//!
//! Each module below explains its choices. The `tokio` timeout and [`std::io::Error`] tables
//! are on [`Transient`](crate::Transient)'s page.
//!
//! `http` is also the name of a module that is always there, [`crate::http`], which parses
//! `Retry-After` without any dependency; the feature `http` only adds what needs the `http`
//! crate's types.

#[cfg(feature = "http")]
pub mod http;

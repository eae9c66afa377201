//! Which errors of real clients are worth another try: `http`, `reqwest`, `tonic`, `sqlx` and
//! `tokio-postgres`.
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
//! | `sqlx` | `sqlx::Error` | SQLSTATE `40001` serialization failure, `40P01` deadlock, class `08` connection exceptions, `57P01`–`57P03` shutdown and cannot connect now, `53300` too many connections; SQLite busy and locked; pool timeouts; I/O errors by the [`std::io::Error`] table | constraint violations (class `23`), syntax and permission errors, every other SQLSTATE, row-not-found, decode and encode errors, configuration, TLS and protocol errors, a closed pool | none |
//! | `tokio-postgres` | `tokio_postgres::Error` | the same SQLSTATEs, a closed connection (`is_closed`), a transient [`std::io::Error`] anywhere in the `source()` chain | every other error | none |
//!
//! Each module below explains its choices. The tables agree: `reqwest` turns `http` on (reqwest
//! is built on the `http` crate), reqwest's status errors use the `http` row, and the `tokio` timeout and [`std::io::Error`] tables are on
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
#[cfg(feature = "sqlx")]
pub mod sqlx;
#[cfg(feature = "tokio-postgres")]
pub mod tokio_postgres;
#[cfg(feature = "tonic")]
pub mod tonic;

/// Whether a PostgreSQL SQLSTATE names a passing failure: the table that `sqlx` and
/// `tokio-postgres` share, for other drivers too.
///
/// | SQLSTATE | condition | transient |
/// |---|---|---|
/// | `40001` | serialization failure | yes: retry the whole transaction |
/// | `40P01` | deadlock detected | yes: retry the whole transaction |
/// | `08xxx` | connection exceptions (`08000`, `08003`, `08006`, `08001`, `08004`, ...) | yes |
/// | `57P01` | admin shutdown ("terminating connection due to administrator command") | yes |
/// | `57P02` | crash shutdown | yes |
/// | `57P03` | cannot connect now ("the database system is starting up" / "shutting down") | yes |
/// | `53300` | too many connections | yes |
/// | everything else, among them class `23` (constraint violations), `42` (syntax, undefined objects, permissions), `22` (data), `28` (authentication), `57014` (statement timeout), `53100` (disk full) | | no |
///
/// ```
/// use retry_runtime::integrations::sqlstate_is_transient;
///
/// assert!(sqlstate_is_transient("40001"));
/// assert!(sqlstate_is_transient("08006"));
/// assert!(!sqlstate_is_transient("23505")); // unique violation
/// ```
pub fn sqlstate_is_transient(code: &str) -> bool {
    matches!(
        code,
        "40001" | "40P01" | "57P01" | "57P02" | "57P03" | "53300"
    ) || code.starts_with("08")
}

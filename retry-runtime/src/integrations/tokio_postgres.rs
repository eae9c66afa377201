//! Feature `tokio-postgres`: which `tokio_postgres::Error`s are worth another try, also when
//! they come through `deadpool-postgres` or `bb8-postgres`.
//!
//! The checks, in order; the first that applies decides:
//!
//! | the error | transient | why |
//! |---|---|---|
//! | a database error with a SQLSTATE ([`code`](::tokio_postgres::Error::code)) | by the [SQLSTATE table](super::sqlstate_is_transient): `40001`, `40P01`, class `08`, `57P01`–`57P03`, `53300` | a conflict or a server restarting: the same transaction may commit next time (the `sqlx` feature reads the same table) |
//! | the connection is closed ([`is_closed`](::tokio_postgres::Error::is_closed)) | yes | the server ended the session (a restart, an idle timeout); a new connection may work |
//! | an [`std::io::Error`] anywhere in the [`source`](std::error::Error::source) chain (connect, read, write) | by [`Transient`]'s I/O table: refused, reset, aborted, broken pipe, unexpected end of file, timed out, ... | a connection that could not be made or died under the statement |
//! | anything else: a constraint violation, a syntax or permission error, a row count, a conversion (`ToSql`, `FromSql`), a bad configuration, an authentication failure | no | the same call fails the same way |
//!
//! During `pg_ctl restart -m fast` a client sees, in some order: connection refused, connection
//! reset, `57P01` "terminating connection due to administrator command", `57P03` "the database
//! system is shutting down" or "starting up", and a closed connection. All of them are
//! transient by this table, so a `#[retry]` with pauses that cover the restart gets through it.
//!
//! ```no_run
//! use retry_runtime::retry;
//! use tokio_postgres::Client;
//!
//! #[retry(max = 5, base = "100ms", jitter = full)]
//! async fn balance(client: &Client, account: i64) -> Result<i64, tokio_postgres::Error> {
//!     let row = client.query_one("SELECT cents FROM accounts WHERE id = $1", &[&account]).await?;
//!     Ok(row.get(0))
//! }
//! ```
//!
//! A closed connection stays closed: a retry through the same `Client` fails again at once. Take
//! a connection from a pool inside the annotated function, so that each attempt gets a live one.

use crate::Transient;

/// The [module's table](self): a transient SQLSTATE, a closed connection, or a transient
/// [`std::io::Error`] in the source chain.
impl Transient for ::tokio_postgres::Error {
    fn is_transient(&self) -> bool {
        if let Some(code) = self.code() {
            return super::sqlstate_is_transient(code.code());
        }
        self.is_closed() || crate::has_transient_io_cause(self)
    }
}

//! Feature `sqlx`: which `sqlx::Error`s are worth another try.
//!
//! Retrying a transaction that lost a serialization conflict is the most common retry in
//! database code. The checks, in order; the first that applies decides:
//!
//! | the error | transient | why |
//! |---|---|---|
//! | `Database` with a PostgreSQL SQLSTATE (five characters; MySQL's SQLSTATEs read the same) | by the [SQLSTATE table](super::sqlstate_is_transient): `40001` serialization failure, `40P01` deadlock, class `08` connection exceptions, `57P01` admin shutdown, `57P02` crash shutdown, `57P03` cannot connect now, `53300` too many connections | a conflict or a server restarting: the same transaction may commit next time. Everything else is not: constraint violations (class `23`), syntax and permission errors (class `42`), data errors (class `22`), ... |
//! | `Database` with a SQLite result code (a number) | `SQLITE_BUSY` and `SQLITE_LOCKED`, with their extended codes (`5`, `6`, `261`, `517`, ...) | another connection held the lock past the busy timeout |
//! | `PoolTimedOut` | yes | no connection became free, or the server did not accept one, within the pool's `acquire_timeout` |
//! | `Io` | by [`Transient`]'s I/O table: refused, reset, aborted, broken pipe, unexpected end of file, timed out, ... | the connection died under the statement; a new one may work |
//! | `RowNotFound`, `Decode`, `ColumnDecode`, `Encode`, `TypeNotFound`, `ColumnNotFound`, `ColumnIndexOutOfBounds` | no | the query or the types are wrong; the same rows will not decode better |
//! | `Configuration`, `InvalidArgument`, `Tls`, `Protocol`, `PoolClosed`, `WorkerCrashed`, `BeginFailed`, `InvalidSavePointStatement`, `AnyDriverError`, and variants sqlx adds later | no | a mistake in the program or its setup, or a pool the program closed |
//!
//! Retry the **whole transaction**, not the failed statement: after a serialization failure
//! PostgreSQL has rolled the transaction back. Annotate the function that opens and commits it:
//!
//! ```no_run
//! use retry_runtime::retry;
//! use sqlx::PgPool;
//!
//! #[retry(max = 3, base = "5ms", jitter = full)]
//! async fn transfer(pool: &PgPool, from: i64, to: i64, cents: i64) -> Result<(), sqlx::Error> {
//!     let mut tx = pool.begin().await?;
//!     sqlx::query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").execute(&mut *tx).await?;
//!     sqlx::query("UPDATE accounts SET cents = cents - $1 WHERE id = $2")
//!         .bind(cents).bind(from).execute(&mut *tx).await?;
//!     sqlx::query("UPDATE accounts SET cents = cents + $1 WHERE id = $2")
//!         .bind(cents).bind(to).execute(&mut *tx).await?;
//!     tx.commit().await // a serialization failure here is retried from `begin`
//! }
//! ```
//!
//! A failed `COMMIT` whose connection died leaves the outcome unknown: the transaction may have
//! committed. Retry such a function only when a second run is harmless (it checks what the first
//! did, or its writes are keyed, as the idempotency stores' are).

use crate::Transient;

/// The [module's table](self): serialization failures, deadlocks, connection exceptions, a
/// server shutting down or starting, too many connections, SQLite's busy and locked, pool
/// timeouts and I/O errors are transient; constraint violations, syntax and permission errors,
/// row-not-found, decode errors and configuration errors are not.
///
/// ```
/// use retry_runtime::Transient;
///
/// assert!(sqlx::Error::PoolTimedOut.is_transient());
/// assert!(sqlx::Error::Io(std::io::ErrorKind::ConnectionReset.into()).is_transient());
/// assert!(!sqlx::Error::RowNotFound.is_transient());
/// assert!(!sqlx::Error::PoolClosed.is_transient());
/// ```
impl Transient for ::sqlx::Error {
    fn is_transient(&self) -> bool {
        match self {
            ::sqlx::Error::Database(error) => {
                error.code().is_some_and(|code| code_is_transient(&code))
            }
            ::sqlx::Error::PoolTimedOut => true,
            ::sqlx::Error::Io(error) => error.is_transient(),
            _ => false,
        }
    }
}

/// A SQLSTATE by the shared table; a SQLite result code (decimal, at most four digits) by its
/// primary code.
fn code_is_transient(code: &str) -> bool {
    const SQLITE_BUSY: u32 = 5;
    const SQLITE_LOCKED: u32 = 6;
    if code.len() < 5 {
        if let Ok(extended) = code.parse::<u32>() {
            return matches!(extended & 0xff, SQLITE_BUSY | SQLITE_LOCKED);
        }
    }
    super::sqlstate_is_transient(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn sqlite_codes_by_their_primary_code() {
        for transient in ["5", "6", "261", "517", "262"] {
            assert!(code_is_transient(transient), "{transient}");
        }
        for permanent in ["1", "19", "2067", "1555", "787", "14"] {
            assert!(!code_is_transient(permanent), "{permanent}");
        }
    }

    #[test]
    fn sqlstates_by_the_shared_table() {
        for transient in [
            "40001", "40P01", "08006", "08001", "57P01", "57P02", "57P03", "53300",
        ] {
            assert!(code_is_transient(transient), "{transient}");
        }
        for permanent in [
            "23505", "23503", "42601", "42501", "22012", "57014", "53100", "40002",
        ] {
            assert!(!code_is_transient(permanent), "{permanent}");
        }
    }

    #[test]
    fn kinds_without_a_database_code() {
        assert!(::sqlx::Error::PoolTimedOut.is_transient());
        assert!(::sqlx::Error::Io(io::ErrorKind::UnexpectedEof.into()).is_transient());
        assert!(!::sqlx::Error::Io(io::ErrorKind::PermissionDenied.into()).is_transient());
        for permanent in [
            ::sqlx::Error::RowNotFound,
            ::sqlx::Error::PoolClosed,
            ::sqlx::Error::WorkerCrashed,
            ::sqlx::Error::Protocol("garbage".into()),
            ::sqlx::Error::ColumnNotFound("claim".into()),
            ::sqlx::Error::Decode("not a number".into()),
            ::sqlx::Error::Configuration("bad url".into()),
        ] {
            assert!(!permanent.is_transient(), "{permanent:?}");
        }
    }
}
